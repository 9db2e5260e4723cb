//! Execution an agent can trust (issue 3 acceptance), against the real binary and a real
//! ipykernel: deadlines, floods, input(), late output, terminal control, wait/poll,
//! queue cancellation, MCP cancellation and progress, orphans, start-up failures, stale
//! state and kernel crashes.
//!
//! Deadlines only prove "returns instead of hanging" unless the issue states a bound.
//!
//! This module owns what the suites share, reading `execute`'s and `get_execution`'s
//! results; the tests are the submodules: `output` (deadlines, floods, late and terminal
//! output), `input` (`input()` and `send_input`), `runs` (wait/poll, the queue, MCP
//! cancellation and progress) and `kernel_failures` (orphans, start-up failures, stale
//! generations, kernel crashes).

mod input;
mod kernel_failures;
mod output;
mod runs;

use crate::common::*;
use serde_json::{Value, json};

/// `execute` with arbitrary arguments; returns the raw result and its structured content.
async fn run(server: &Server, args: Value) -> (rmcp::model::CallToolResult, Value) {
    let r = server.call("execute", args).await;
    let v = structured(&r);
    (r, v)
}

fn run_id(v: &Value) -> String {
    v["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run_id: {v}"))
        .to_string()
}

fn notices(v: &Value) -> String {
    v["notices"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn error_code(v: &Value) -> &str {
    v["error_code"].as_str().unwrap_or("")
}

/// `get_execution(run_id, wait_s)`.
async fn get_execution(server: &Server, run_id: &str, wait_s: f64) -> Value {
    structured(
        &server
            .call("get_execution", json!({"run_id": run_id, "wait_s": wait_s}))
            .await,
    )
}
