//! Reaching a room on a Jupyter Server: the document session (`PUT
//! /api/collaboration/session/{path}` with `{"format": "json", "type": "notebook"}`, answered
//! with `{fileId, sessionId}`), then the room's websocket
//! (`/api/collaboration/room/json:notebook:{fileId}?sessionId=…`, or
//! `/api/collaboration/room/JupyterLab:globalAwareness`), both with the server's token as
//! `Authorization: token …`, as JupyterLab reaches them.
//!
//! The `sessionId` is the server process's: a different one on a reconnect means the
//! server restarted and rebuilt the document from its file, so our copy must be dropped.
//! Errors never hold the token.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::CollabError;
use super::replica::MAX_DOC_BYTES;
use crate::kernel::remote::{Gateway, first_chars, redact};

/// How long connecting may take before the server counts as unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the session request and the websocket handshake may each take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest websocket message read: a whole document (sync step 2) and some.
pub const MAX_MESSAGE_BYTES: usize = MAX_DOC_BYTES + (8 << 20);
/// The most of the session answer read.
const MAX_SESSION_BODY: usize = 64 * 1024;

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Which room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoomAddress {
    /// The notebook at `path` (relative to the server's root).
    Notebook { path: String },
    /// JupyterLab's room for who is online and what they have open.
    GlobalAwareness,
}

/// A notebook's document session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub file_id: String,
    pub session_id: String,
}

/// An HTTP client for the session requests.
///
/// Errors: [`CollabError::Unavailable`] when it cannot be built.
pub fn http_client(gateway: &Gateway) -> Result<reqwest::Client, CollabError> {
    crate::tls::install_provider();
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .no_proxy()
        .build()
        .map_err(|e| unavailable(gateway, &format!("cannot build an HTTP client: {e}")))
}

/// `PUT /api/collaboration/session/{path}`.
///
/// Errors: [`CollabError::NotFound`] (no such file), [`CollabError::NotCollaborative`] (the
/// server has no collaboration endpoints), [`CollabError::Unauthorized`],
/// [`CollabError::Unavailable`].
pub async fn session(
    http: &reqwest::Client,
    gateway: &Gateway,
    path: &str,
) -> Result<Session, CollabError> {
    let url = gateway.join(&format!("api/collaboration/session/{}", encode_path(path)));
    let mut req = http
        .put(url)
        .timeout(REQUEST_TIMEOUT)
        .json(&json!({"format": "json", "type": "notebook"}));
    if let Some(h) = gateway.auth_header() {
        req = req.header(reqwest::header::AUTHORIZATION, h);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| unavailable(gateway, &chain(&e)))?;
    let status = resp.status();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(CollabError::Unauthorized {
            server: gateway.name.clone(),
            status: status.as_u16(),
        });
    }
    let body = read_capped(resp).await;
    let text = String::from_utf8_lossy(&body);
    if status == StatusCode::NOT_FOUND {
        // The handler's own 404 is JSON saying the file does not exist; a server without
        // the handler answers with its HTML 404 page.
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(String::from));
        return Err(if message.is_some_and(|m| m.contains("does not exist")) {
            CollabError::NotFound {
                path: path.to_string(),
            }
        } else {
            CollabError::NotCollaborative {
                server: gateway.name.clone(),
            }
        });
    }
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match (v["fileId"].as_str(), v["sessionId"].as_str()) {
        (Some(f), Some(s)) if status.is_success() => Ok(Session {
            file_id: f.to_string(),
            session_id: s.to_string(),
        }),
        _ => Err(unavailable(
            gateway,
            &format!(
                "the collaboration session request answered HTTP {}: {}",
                status.as_u16(),
                first_chars(&text, 200)
            ),
        )),
    }
}

async fn read_capped(mut resp: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = MAX_SESSION_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    body
}

/// Open the room's websocket.
///
/// Errors: [`CollabError::Unauthorized`], [`CollabError::NotCollaborative`] (404),
/// [`CollabError::Unavailable`].
pub async fn websocket(
    gateway: &Gateway,
    room: &RoomAddress,
    session: Option<&Session>,
) -> Result<Socket, CollabError> {
    let path = match (room, session) {
        (RoomAddress::Notebook { .. }, Some(s)) => format!(
            "api/collaboration/room/json:notebook:{}?sessionId={}",
            s.file_id, s.session_id
        ),
        _ => "api/collaboration/room/JupyterLab:globalAwareness".to_string(),
    };
    let url = gateway.ws_join(&path);
    let mut req = url
        .as_str()
        .into_client_request()
        .map_err(|e| unavailable(gateway, &format!("bad websocket URL: {e}")))?;
    if let Some(h) = gateway.auth_header() {
        req.headers_mut().insert("authorization", h);
    }
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_MESSAGE_BYTES);
    config.max_frame_size = Some(MAX_MESSAGE_BYTES);
    crate::tls::install_provider();
    let connecting = tokio_tungstenite::connect_async_with_config(req, Some(config), false);
    match tokio::time::timeout(REQUEST_TIMEOUT, connecting).await {
        Err(_) => Err(unavailable(gateway, "the websocket handshake timed out")),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(WsError::Http(resp))) => {
            let status = resp.status().as_u16();
            Err(match status {
                401 | 403 => CollabError::Unauthorized {
                    server: gateway.name.clone(),
                    status,
                },
                404 => CollabError::NotCollaborative {
                    server: gateway.name.clone(),
                },
                _ => unavailable(
                    gateway,
                    &format!("the room's websocket answered HTTP {status}"),
                ),
            })
        }
        Ok(Err(e)) => Err(unavailable(gateway, &format!("websocket failed: {e}"))),
    }
}

/// Whether a websocket error is a message over [`MAX_MESSAGE_BYTES`].
pub fn too_long(e: &WsError) -> bool {
    matches!(e, WsError::Capacity(CapacityError::MessageTooLong { .. }))
}

/// `path` for a URL: each segment percent-encoded, `/` kept.
fn encode_path(path: &str) -> String {
    path.trim_matches('/')
        .split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

pub fn unavailable(gateway: &Gateway, detail: &str) -> CollabError {
    CollabError::Unavailable {
        server: gateway.name.clone(),
        url: gateway.url.clone(),
        detail: redact(gateway, detail),
    }
}

/// An error and its causes, one sentence.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(": ");
        s.push_str(&c.to_string());
        source = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_encoded_segment_by_segment() {
        assert_eq!(encode_path("/a b/c#d.ipynb"), "a%20b/c%23d.ipynb");
        assert_eq!(encode_path("x.ipynb"), "x.ipynb");
    }
}
