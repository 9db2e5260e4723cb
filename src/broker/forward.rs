//! Forwarding an artifact into a brokered tool's argument (`forward_artifact`, docs/tools.md
//! "Artifacts"): the call goes through the session's endpoint exactly as a kernel's
//! `mcp.call` does — the registry's grant, the argument budget (here
//! [`MAX_FORWARD_BYTES`], since the arguments never cross the kernel's socket), the
//! session's journal (`outcome_unknown` included) and its cancellation — and answers the
//! same bounded result envelope.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::endpoint::Endpoint;
use super::ops::{self, Failure};
use super::shared::Shared;
use crate::artifacts::MAX_FORWARD_BYTES;
use crate::session::observer::SessionObserver;

/// The endpoint of the session `observer` observes, when it is the broker's.
pub fn endpoint_of(observer: &Arc<dyn SessionObserver>) -> Option<Arc<Shared>> {
    observer
        .as_any()?
        .downcast_ref::<Endpoint>()
        .map(Endpoint::shared)
}

/// Call `server`'s `tool` with `arguments` for the session of `shared`, within `budget`
/// bytes of JSON (at most [`MAX_FORWARD_BYTES`]) and `timeout_s` (default: a kernel call's).
/// Errors: the [`Failure`] a kernel's call would get (`limit` before anything is sent).
pub async fn forward(
    shared: &Shared,
    server: &str,
    tool: &str,
    arguments: Map<String, Value>,
    budget: usize,
    timeout_s: Option<f64>,
) -> Result<Value, Failure> {
    let req = ops::Request {
        key: String::new(),
        op: "call".into(),
        server: Some(server.to_string()),
        tool: Some(tool.to_string()),
        arguments: Some(Value::Object(arguments)),
        timeout: timeout_s,
        // No kernel context to continue: the call's span is a child of the agent's tool call.
        trace: Default::default(),
        budget: Some(budget.min(MAX_FORWARD_BYTES)),
    };
    // The agent's call has no peer that can go away mid-call: its cancellation drops this.
    let never = Box::pin(std::future::pending::<()>());
    match ops::call(shared, req, never).await {
        Some(r) => r,
        None => Err(ops::Failure::gone()),
    }
}
