//! Sessions belong to who is calling, not to a connection (docs/auth.md), through the real
//! service (`service --http`) and a real authorization server (oidc-provider):
//! - a 2026-07-28 client (no `initialize`, no `Mcp-Session-Id`) keeps its principal's
//!   `default` across requests, with an honest `state_reset`;
//! - closing such a request's response stream cancels its run (the spec's only cancel);
//! - a request's `_meta` log level delivers log messages in its response, and none without;
//! - two OAuth principals on one service: neither lists, reads, runs in, interrupts, exports,
//!   forks or destroys the other's sessions, by MCP or by the Jupyter API (not-found codes,
//!   never "forbidden"), each may use the same names; an admin sees both, with owners;
//! - `session_id` parameters carry `x-mcp-header` for routing by session.
//!
//! This module owns the reading of a 2026-07-28 reply's result; the tests are the
//! submodules: `stateless` (the stateless HTTP client), `oauth_owners` (two OAuth
//! principals and an admin), `relay` (a 2026-07-28 client through `serve --shared`) and
//! `socket_users` (two uids on the service's socket).

mod oauth_owners;
mod relay;
mod socket_users;
mod stateless;

use serde_json::Value;

use crate::common::oauth::Reply;

/// The result of the reply's answer to request 1 (an error result included).
fn result(reply: &Reply) -> Value {
    reply
        .messages()
        .into_iter()
        .find(|m| m["id"] == 1)
        .map(|m| m["result"].clone())
        .unwrap_or_else(|| panic!("no answer ({}): {}", reply.status, reply.body))
}

/// The error code of an `isError` result, or "" when the call succeeded.
fn error_code(reply: &Reply) -> String {
    let r = result(reply);
    match r["isError"] == true {
        true => r["structuredContent"]["error_code"]
            .as_str()
            .unwrap_or("(run error)")
            .to_string(),
        false => String::new(),
    }
}

fn structured(reply: &Reply) -> Value {
    result(reply)["structuredContent"].clone()
}
