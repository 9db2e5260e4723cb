//! The channels websocket of the Jupyter face (`GET /api/kernels/{id}/channels`): a
//! person's Jupyter client talks to the agent's kernel through it.
//!
//! - Handshake: an RFC 6455 upgrade answered by hand (hyper's upgrade, then
//!   tokio-tungstenite on the raw stream, the websocket crate the project already uses).
//!   The `v1.kernel.websocket.jupyter.org` subprotocol is chosen when the client offers it
//!   (binary frames); otherwise messages are JSON text frames with a `channel` field, and
//!   binary JSON frames when they carry buffers ([`crate::wire::websocket`]). A request for
//!   an unknown kernel is a 404 and one past [`super::MAX_CONNECTIONS`] a 503, both before
//!   the upgrade; the token was checked before this route (see [`super::guard`]).
//! - Relay: each websocket gets its own [`KernelLink`] (a client connection of its own), so
//!   what the person sends on shell, control and stdin goes to the kernel under the
//!   person's msg_ids and every reply, input request and iopub message comes back; iopub
//!   carries the agent's runs too, as it would to any client of the kernel, and the
//!   person's cells never enter an agent's run (the session follows only its own msg_ids;
//!   they enter its history as other-client cells).
//! - A new kernel (a restart by anyone, recovery after a crash): the relay sees the
//!   session's generation change (asked every [`CHECK_EVERY`], and at once after a restart
//!   through the face), tells the client `status: restarting` as Jupyter Server does, and
//!   links to the new kernel. The session's end closes the websocket (1000, with the reason).
//! - Bounds: frames over [`MAX_FRAME`] are refused by the websocket layer; while more than
//!   [`MAX_BACKLOG`] kernel messages wait for a slow client, iopub messages are dropped
//!   (counted, logged once), never replies.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use super::link::KernelLink;
use super::rest::{Seen, no_kernel};
use super::{Face, models};
use crate::kernel::{Channel, KernelEvent};
use crate::session::SessionHandle;
use crate::session::cmd;
use crate::wire::websocket::{self as ws, V1_SUBPROTOCOL};
use crate::wire::{Message, WireError};

/// How often the relay asks whether the session has a new kernel (or has ended).
pub const CHECK_EVERY: Duration = Duration::from_millis(500);
/// The largest websocket message a client may send (bytes).
pub const MAX_FRAME: usize = 64 << 20;
/// Kernel messages waiting for a slow client beyond which iopub messages are dropped.
pub const MAX_BACKLOG: usize = 10_000;

/// Which framing the websocket speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    V1,
    Json,
}

/// `GET /api/kernels/{id}/channels`: upgrade, then relay (see the module docs).
pub async fn upgrade(
    Seen { face, sessions }: Seen,
    Path(id): Path<String>,
    mut request: Request,
) -> Response {
    let headers = request.headers();
    let Some(key) = websocket_key(headers) else {
        return models::error(
            StatusCode::BAD_REQUEST,
            "This is the kernel's channels websocket: connect with a websocket client.",
        );
    };
    let framing = if offers(headers, V1_SUBPROTOCOL) {
        Framing::V1
    } else {
        Framing::Json
    };
    let Some(found) = sessions.by_kernel(&id).await else {
        return no_kernel(&id);
    };
    if !face.connect(&id) {
        return models::error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} kernel websockets are open on this service; close one first.",
                super::MAX_CONNECTIONS
            ),
        );
    }
    let accept = derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut request);
    let session = found.info.session_id.clone();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let config = WebSocketConfig::default()
                    .max_message_size(Some(MAX_FRAME))
                    .max_frame_size(Some(MAX_FRAME));
                let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
                tracing::info!(session = %session, kernel_id = %id, ?framing, "a Jupyter client connected to the kernel");
                Relay {
                    face: face.clone(),
                    kernel_id: id.clone(),
                    handle: found.handle,
                    framing,
                    dropped: 0,
                    noted: None,
                }
                .run(socket)
                .await;
                tracing::info!(session = %session, kernel_id = %id, "the Jupyter client disconnected");
            }
            Err(e) => tracing::debug!(kernel_id = %id, "websocket upgrade failed: {e}"),
        }
        face.disconnect(&id);
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = response.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if framing == Framing::V1 {
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(V1_SUBPROTOCOL),
        );
    }
    response
}

/// The `Sec-WebSocket-Key` of a valid upgrade request (GET with `Connection: upgrade`,
/// `Upgrade: websocket`, version 13), else `None`.
fn websocket_key(headers: &HeaderMap) -> Option<String> {
    let has = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !has(header::CONNECTION, "upgrade") || !has(header::UPGRADE, "websocket") {
        return None;
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .and_then(|v| v.to_str().ok())
        != Some("13")
    {
        return None;
    }
    headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// True when the client offers subprotocol `name`.
fn offers(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == name)
}

/// Why a relay stopped.
enum Stop {
    /// The client went away.
    Client,
    /// The session ended; the reason is told to the client.
    Session(String),
}

/// One websocket's relay.
struct Relay {
    face: Arc<Face>,
    kernel_id: String,
    handle: SessionHandle,
    framing: Framing,
    /// iopub messages dropped for a slow client.
    dropped: u64,
    /// The client's Jupyter session id the session was last told about (its notices name
    /// this client "a person through the Jupyter API").
    noted: Option<String>,
}

type Socket = WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

impl Relay {
    async fn run(mut self, mut socket: Socket) {
        let stop = self.relay(&mut socket).await;
        let frame = match stop {
            Stop::Client => None,
            Stop::Session(why) => Some(CloseFrame {
                code: CloseCode::Normal,
                reason: why.into(),
            }),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(frame)).await;
    }

    async fn relay(&mut self, socket: &mut Socket) -> Stop {
        let mut restarted = self.face.restarted.subscribe();
        let mut link = match self.open_link().await {
            Ok(l) => l,
            Err(stop) => return stop,
        };
        let mut check = tokio::time::interval(CHECK_EVERY);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                frame = socket.next() => {
                    let decoded = match frame {
                        Some(Ok(WsMessage::Text(t))) => ws::decode_json(t.as_str()),
                        Some(Ok(WsMessage::Binary(b))) if self.framing == Framing::V1 => ws::decode_v1(&b),
                        Some(Ok(WsMessage::Binary(b))) => ws::decode_json_binary(&b),
                        Some(Ok(WsMessage::Close(_))) | None => return Stop::Client,
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => {
                            tracing::debug!(kernel_id = %self.kernel_id, "websocket read failed: {e}");
                            return Stop::Client;
                        }
                    };
                    self.forward(&mut link, decoded).await;
                }
                ev = link.events.recv() => match ev {
                    Some(KernelEvent::Message(channel, msg)) => {
                        if channel == Channel::Iopub && link.events.len() > MAX_BACKLOG {
                            self.drop_one();
                            continue;
                        }
                        if socket.send(self.frame(channel, &msg)).await.is_err() {
                            return Stop::Client;
                        }
                    }
                    Some(KernelEvent::ChannelClosed(..)) => {}
                    Some(KernelEvent::Exited(_)) | None => {
                        // The kernel this link reached is gone: a new one, or the session's end.
                        match self.relink(socket, &mut link).await {
                            Ok(()) => {}
                            Err(stop) => return stop,
                        }
                    }
                },
                r = restarted.recv() => {
                    if matches!(r, Ok(ref id) if *id == self.kernel_id)
                        && let Err(stop) = self.relink(socket, &mut link).await
                    {
                        return stop;
                    }
                }
                _ = check.tick() => {
                    match self.handle.call(cmd::Info).await {
                        Ok(info) if info.generation != link.generation => {
                            if let Err(stop) = self.relink(socket, &mut link).await {
                                return stop;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => return Stop::Session(self.ended()),
                    }
                }
            }
        }
    }

    /// A link to the session's current kernel, waiting out a start or restart under way
    /// (up to the session's startup timeout). Errors: the session ended, or its kernel
    /// cannot be reached.
    async fn open_link(&self) -> Result<KernelLink, Stop> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let info = self
                .handle
                .call(cmd::Info)
                .await
                .map_err(|_| Stop::Session(self.ended()))?;
            match KernelLink::open(&self.face.sessions, &info).await {
                Ok(l) => return Ok(l),
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(Stop::Session(e.to_string()));
                }
                Err(e) => {
                    tracing::debug!(kernel_id = %self.kernel_id, "no link yet: {e}");
                    tokio::time::sleep(CHECK_EVERY).await;
                }
            }
        }
    }

    /// The session has a new kernel (or its kernel is gone): tell the client it restarts, as
    /// Jupyter Server does, and link to the new one.
    async fn relink(&mut self, socket: &mut Socket, link: &mut KernelLink) -> Result<(), Stop> {
        let status = Message::new(
            "status",
            json!({"execution_state": "restarting"}),
            "kernel-mcp",
        );
        if socket
            .send(self.frame(Channel::Iopub, &status))
            .await
            .is_err()
        {
            return Err(Stop::Client);
        }
        *link = self.open_link().await?;
        tracing::info!(kernel_id = %self.kernel_id, generation = link.generation, "relinked to the session's new kernel");
        Ok(())
    }

    /// Send one decoded client frame to the kernel (malformed ones, and iopub, are dropped).
    async fn forward(
        &mut self,
        link: &mut KernelLink,
        decoded: Result<(String, Message), WireError>,
    ) {
        let (name, msg) = match decoded {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(kernel_id = %self.kernel_id, "dropped a client frame: {e}");
                return;
            }
        };
        let channel = match name.as_str() {
            "shell" => Channel::Shell,
            "control" => Channel::Control,
            "stdin" => Channel::Stdin,
            other => {
                tracing::debug!(kernel_id = %self.kernel_id, "dropped a client message on {other:?}");
                return;
            }
        };
        if self.noted.as_deref() != Some(msg.header.session.as_str()) {
            self.handle.tell(cmd::NoteClient {
                session: msg.header.session.clone(),
                who: super::PERSON.into(),
            });
            self.noted = Some(msg.header.session.clone());
        }
        if let Err(e) = link.send(channel, &msg).await {
            tracing::debug!(kernel_id = %self.kernel_id, "a client message did not reach the kernel: {e}");
        }
    }

    /// `msg` on `channel` as one frame of this websocket's framing.
    fn frame(&self, channel: Channel, msg: &Message) -> WsMessage {
        let name = channel.to_string();
        match self.framing {
            Framing::V1 => WsMessage::Binary(ws::encode_v1(&name, msg).into()),
            Framing::Json if msg.buffers.is_empty() => {
                WsMessage::Text(ws::encode_json(&name, msg).into())
            }
            Framing::Json => WsMessage::Binary(ws::encode_json_binary(&name, msg).into()),
        }
    }

    fn drop_one(&mut self) {
        if self.dropped == 0 {
            tracing::warn!(kernel_id = %self.kernel_id, "a Jupyter client reads too slowly; dropping iopub messages while {MAX_BACKLOG} wait");
        }
        self.dropped += 1;
    }

    fn ended(&self) -> String {
        format!("session '{}' has ended", self.handle.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn only_a_websocket_upgrade_has_a_key_and_the_v1_subprotocol_is_chosen_when_offered() {
        let good = headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            (
                "sec-websocket-protocol",
                "x, v1.kernel.websocket.jupyter.org",
            ),
        ]);
        assert_eq!(
            websocket_key(&good).as_deref(),
            Some("dGhlIHNhbXBsZSBub25jZQ==")
        );
        assert!(offers(&good, V1_SUBPROTOCOL));
        let plain = headers(&[("connection", "keep-alive")]);
        assert_eq!(websocket_key(&plain), None);
        assert!(!offers(&plain, V1_SUBPROTOCOL));
        let old = headers(&[
            ("connection", "upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "8"),
            ("sec-websocket-key", "k"),
        ]);
        assert_eq!(websocket_key(&old), None);
    }
}
