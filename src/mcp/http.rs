//! The MCP face's HTTP edge in front of rmcp's streamable HTTP service: its gate
//! ([`gate`]: authentication and scopes, from [`crate::auth`]) and two fix-ups ([`fixups`]).
//!
//! - [`gate`] builds the [`Gate`] of `/mcp`: tokens as `Authorization: Bearer …`, the need of
//!   a call rated by [`super::access::need`], refusals in plain text.
//! - [`fixups`] (an axum middleware, inside the gate) answers 404 for a `DELETE` naming an MCP
//!   session that does not exist (rmcp answers 202), and 400 instead of rmcp's 415 for a JSON
//!   body that does not parse (its type was right; its content was not).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::auth::challenge::text_body;
use crate::auth::{Face, Gate, HttpAccess, Need};

/// How the MCP face words its refusals.
pub const MCP_FACE: Face = Face {
    name: "MCP",
    body: text_body,
    scheme: "Bearer",
    hint: "send `Authorization: Bearer <token>` (the server's token: its --token-file, KERNEL_MCP_TOKEN, or for `kernel-mcp service --http` the file `kernel-mcp token` names).",
};

/// The gate of `/mcp` (and of the legacy SSE routes) under `access`.
pub fn gate(access: HttpAccess) -> Gate {
    Gate {
        access,
        need: Need::JsonRpc(super::access::need),
        face: MCP_FACE,
    }
}

/// The MCP session manager, to tell an unknown session from a live one.
#[derive(Clone)]
pub struct Fixups {
    pub sessions: Arc<LocalSessionManager>,
}

/// The middleware described in the module docs.
pub async fn fixups(State(g): State<Fixups>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    if method == Method::DELETE
        && let Some(id) = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        let id: Arc<str> = Arc::from(id);
        if !g.sessions.has_session(&id).await.unwrap_or(false) {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    let json_body = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
        });
    let response = next.run(request).await;
    if method == Method::POST
        && json_body
        && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
    {
        let (mut parts, _) = response.into_parts();
        parts.status = StatusCode::BAD_REQUEST;
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(
            parts,
            Body::from("Bad Request: the body is not a JSON-RPC message"),
        );
    }
    response
}
