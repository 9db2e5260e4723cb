//! The legacy HTTP+SSE transport of MCP 2024-11-05 (`--transport sse`), for clients that
//! speak nothing newer. rmcp no longer ships one, so this is a small axum endpoint feeding
//! the same [`KernelMcp`] handler through rmcp's sink/stream transport:
//!
//! - `GET /sse` opens an event stream. Its first event is `endpoint`, whose data is the URL
//!   to POST to (`/messages?session_id=…`); every server message follows as a `message` event.
//! - `POST /messages?session_id=…` with one JSON-RPC message: 202 Accepted, the answer comes on
//!   the stream. 400 for a body that is not JSON-RPC, 404 for an unknown session id.
//!
//! The same bearer-token guard as streamable HTTP sits in front (see [`super::http`]), and
//! Host/Origin are checked against the same allow-lists. Each stream is one MCP connection;
//! closing it ends that connection (sessions belong to the process and stay).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::sync::mpsc;

use super::{KernelMcp, Toolset};
use crate::auth::HttpAccess;
use crate::registry::Registry;

/// Messages buffered per direction and connection.
const BUFFER: usize = 64;
/// Most legacy SSE connections at once.
const MAX_CONNECTIONS: usize = 64;

/// Shared state of the endpoint.
#[derive(Clone)]
pub struct SseState {
    registry: Arc<Registry>,
    toolset: Toolset,
    access: HttpAccess,
    /// Session id → the sender feeding that connection's handler.
    connections: Arc<Mutex<HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>>>,
}

/// The router: `GET /sse`, `POST /messages`.
pub fn router(registry: Arc<Registry>, toolset: Toolset, access: HttpAccess) -> axum::Router {
    let state = SseState {
        registry,
        toolset,
        access,
        connections: Arc::default(),
    };
    axum::Router::new()
        .route("/sse", axum::routing::get(open))
        .route("/messages", axum::routing::post(message))
        .with_state(state)
}

/// A 403 for a foreign Host or Origin (DNS rebinding, cross-site pages), else `None`.
fn foreign(access: &HttpAccess, headers: &HeaderMap) -> Option<Response> {
    if access.host_allowed(headers) && access.origin_allowed(headers) {
        return None;
    }
    tracing::warn!("rejected a legacy SSE request with a disallowed Host or Origin");
    Some(
        (
            StatusCode::FORBIDDEN,
            "Forbidden: Host or Origin is not allowed",
        )
            .into_response(),
    )
}

/// `GET /sse`: start a connection and stream its messages.
async fn open(State(s): State<SseState>, headers: HeaderMap) -> Response {
    if let Some(r) = foreign(&s.access, &headers) {
        return r;
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_server, from_client) = mpsc::channel::<ClientJsonRpcMessage>(BUFFER);
    let (to_client, from_server) = mpsc::channel::<ServerJsonRpcMessage>(BUFFER);
    {
        let mut c = s.connections.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|_, tx| !tx.is_closed());
        if c.len() >= MAX_CONNECTIONS {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many legacy SSE connections; close one or use streamable HTTP (/mcp).",
            )
                .into_response();
        }
        c.insert(id.clone(), to_server);
    }
    let incoming = Box::pin(futures::stream::unfold(from_client, |mut rx| async move {
        rx.recv().await.map(|m| (m, rx))
    }));
    let outgoing = tokio_util::sync::PollSender::new(to_client);
    let server = KernelMcp::with_toolset(s.registry.clone(), s.toolset);
    let connections = s.connections.clone();
    let conn_id = id.clone();
    tokio::spawn(async move {
        match server.serve((outgoing, incoming)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!("legacy SSE connection ended before initializing: {e}"),
        }
        connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&conn_id);
    });
    tracing::info!(session = %id, "legacy SSE connection opened");
    Sse::new(events(id, from_server))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The `endpoint` event, then each server message.
fn events(
    id: String,
    from_server: mpsc::Receiver<ServerJsonRpcMessage>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/messages?session_id={id}"));
    let messages = futures::stream::unfold(from_server, |mut rx| async move {
        let m = rx.recv().await?;
        let data = serde_json::to_string(&m).unwrap_or_default();
        Some((Event::default().event("message").data(data), rx))
    });
    futures::stream::once(async move { endpoint })
        .chain(messages)
        .map(Ok)
}

/// `POST /messages?session_id=…`.
async fn message(
    State(s): State<SseState>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(r) = foreign(&s.access, &headers) {
        return r;
    }
    let id = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("session_id="));
    let Some(id) = id else {
        return (
            StatusCode::BAD_REQUEST,
            "Bad Request: session_id is missing",
        )
            .into_response();
    };
    let tx = s
        .connections
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(id)
        .cloned();
    let Some(tx) = tx else {
        return (
            StatusCode::NOT_FOUND,
            "Not Found: no such SSE session; GET /sse first",
        )
            .into_response();
    };
    let msg: ClientJsonRpcMessage = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("not a JSON-RPC message: {e}")}});
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response();
        }
    };
    match tx.send(msg).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(_) => (
            StatusCode::NOT_FOUND,
            "Not Found: the SSE session has ended",
        )
            .into_response(),
    }
}
