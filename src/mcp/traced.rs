//! The server span of each MCP request (see [`crate::telemetry::spans::Request`]): built from
//! the request's context — its `_meta` (the caller's trace, SEP-414), protocol version,
//! `Mcp-Session-Id` over HTTP, and the principal its face stamped — and ended with the
//! answer: `error.type` is `tool_error` for a result with `isError`, the JSON-RPC code for an
//! error. `KernelMcp`'s handlers each open one here (see `server.rs`).

use std::future::Future;

use rmcp::model::CallToolResponse;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tracing::Instrument;

use crate::telemetry::spans::{Outcome, Request};

/// The span of the request in `context`, for `method` (and `tool`).
pub(super) fn request(
    method: &'static str,
    tool: Option<&str>,
    context: &RequestContext<RoleServer>,
) -> Request {
    let parts = context.extensions.get::<axum::http::request::Parts>();
    let transport = if parts.is_some() { "tcp" } else { "pipe" };
    let protocol = context.protocol_version().map(|v| v.to_string());
    let req = Request::start(
        method,
        tool,
        &context.meta,
        &context.id.to_string(),
        protocol,
        transport,
    );
    if !req.span.is_disabled() {
        let session = parts.and_then(|p| super::http_sessions::session_id(&p.headers));
        let principal = crate::auth::authenticated(&context.extensions).map(|a| a.principal.id());
        req.caller(session, principal.as_deref());
    }
    req
}

/// Run `handler` in `req`'s span and end the span with its answer (`tool_error` when
/// `is_error` says the answer is one).
pub(super) async fn traced<T>(
    req: Request,
    handler: impl Future<Output = Result<T, McpError>>,
    is_error: impl FnOnce(&T) -> Option<Option<String>>,
) -> Result<T, McpError> {
    let out = handler.instrument(req.span.clone()).await;
    match &out {
        Ok(v) => match is_error(v) {
            Some(code) => req.end(Outcome::ToolError(code.as_deref())),
            None => req.end(Outcome::Ok),
        },
        Err(e) => req.end(Outcome::JsonRpc(e.code.0)),
    }
    out
}

/// Whether a `tools/call` answer is a tool error, and its contract `error_code`.
pub(super) fn tool_error(response: &CallToolResponse) -> Option<Option<String>> {
    match response {
        CallToolResponse::Complete(r) if r.is_error == Some(true) => Some(
            r.structured_content
                .as_ref()
                .and_then(|v| v["error_code"].as_str())
                .map(str::to_string),
        ),
        _ => None,
    }
}

/// Never an error beyond a JSON-RPC one.
pub(super) fn never<T>(_: &T) -> Option<Option<String>> {
    None
}
