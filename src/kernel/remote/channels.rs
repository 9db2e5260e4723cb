//! The channels websocket of one remote kernel (`/api/kernels/{id}/channels?session_id=…`):
//! one task owns the socket, writes what [`Link::send`] queues and delivers what arrives as
//! [`KernelEvent`]s.
//!
//! - Framing: the `v1.kernel.websocket.jupyter.org` subprotocol is offered first; a server
//!   that does not pick it (jupyter_server 1.x, so Enterprise Gateway 3) gets JSON frames
//!   ([`crate::wire::websocket`]).
//! - Filtering: the server sends `kernel_info_request`s of its own on connect ("nudging" the
//!   kernel). Replies on shell, control and stdin count only when they answer a msg_id we
//!   sent; iopub traffic parented to somebody else's `kernel_info_request` is dropped.
//! - Reconnect: a dropped socket is opened again with the same `session_id`, so the server
//!   hands back the same kernel channels and replays what it buffered; messages queued
//!   meanwhile are sent after. Before each attempt the REST status is asked: a kernel the
//!   server no longer has ends the link with [`KernelEvent::Exited`], as does an iopub
//!   `status` of `dead`, or `restarting` from the server itself (the kernel died and the
//!   server replaced it: its state is gone), or a server unreachable (or answering 503) for
//!   [`RECONNECT_FOR`].
//! - "No such kernel" (404, from the status poll or a handshake) counts only once the server
//!   has said it for [`GONE_GRACE`] without answering for the kernel in between: Enterprise
//!   Gateway with kernel persistence answers 404 and 503 for a while for a kernel it is
//!   restarting or moving, and the run goes on once the kernel is back.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError, SubProtocolError};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{GatewayError, Rest, gone, redact};
use crate::kernel::types::SendError;
use crate::kernel::types::{Channel, KernelEvent};
use crate::wire::websocket::{self as ws, V1_SUBPROTOCOL};
use crate::wire::{Message, WireError};

/// How long a dropped websocket is retried before the kernel counts as lost.
pub const RECONNECT_FOR: Duration = Duration::from_secs(60);
/// How often the REST kernel status is asked while the websocket is open (a server may keep
/// the socket open after the kernel was deleted).
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long the server may keep saying it has no such kernel (404) before the kernel counts
/// as gone (see the module docs).
pub const GONE_GRACE: Duration = Duration::from_secs(10);
/// Why a kernel the server replaced after its death counts as gone.
const RESTARTED: &str = "the server restarted it after it died";
/// How long one websocket handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Our msg_ids remembered to recognise replies (the oldest are forgotten first).
const REMEMBERED_IDS: usize = 10_000;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Which framing the server picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    V1 = 1,
    Json = 2,
}

/// State the task shares with the kernel handle.
#[derive(Default)]
struct Shared {
    connected: AtomicBool,
    dropped: AtomicU64,
    framing: AtomicU8,
}

/// The queue into the websocket task; dropping it ends the task.
pub struct Link {
    out: mpsc::UnboundedSender<(Channel, Message)>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
    liveness: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
        self.liveness.abort();
    }
}

/// Since when the server has been saying it has no such kernel; forgotten as soon as it
/// answers for the kernel again. The one rule for [`GONE_GRACE`].
#[derive(Debug, Default)]
struct Absence(Option<Instant>);

impl Absence {
    /// The server said 404 now: true once it has said so for [`GONE_GRACE`].
    fn not_found(&mut self, id: &str) -> bool {
        let since = *self.0.get_or_insert_with(|| {
            tracing::info!(kernel_id = %id, "the server has no such kernel; waiting up to {} s for it to come back", GONE_GRACE.as_secs());
            Instant::now()
        });
        since.elapsed() >= GONE_GRACE
    }

    /// The server answered for the kernel.
    fn present(&mut self) {
        self.0 = None;
    }
}

/// Ask the kernel's REST status every [`STATUS_EVERY`]; report (once) when the server says
/// it is dead, or has had no such kernel for [`GONE_GRACE`]. An unreachable server is the
/// websocket's to notice.
async fn watch_status(rest: Rest, id: String, gone: tokio::sync::oneshot::Sender<&'static str>) {
    let mut absence = Absence::default();
    loop {
        tokio::time::sleep(STATUS_EVERY).await;
        let why = match rest.kernel(&id).await {
            Err(GatewayError::NotFound { .. }) if absence.not_found(&id) => {
                "the server no longer has it"
            }
            Ok(m) if m.execution_state == "dead" => "the server reports it dead",
            Ok(_) => {
                absence.present();
                continue;
            }
            _ => continue,
        };
        let _ = gone.send(why);
        return;
    }
}

/// Why a handshake failed.
enum ConnectError {
    /// The server does not have the kernel (404).
    Gone,
    Failed(String),
}

/// Why a kernel's websocket could not be opened. The texts never hold the token.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("the websocket handshake took over {timeout_s} s")]
    Timeout { timeout_s: f64 },
    /// The server does not have the kernel (404).
    #[error("gateway '{gateway}' has no kernel {id}")]
    NoKernel { gateway: String, id: String },
    /// Any other failure (a bad URL, a refused handshake), said token-free.
    #[error("{0}")]
    Failed(String),
}

impl Link {
    /// Open the websocket of kernel `id` (the first handshake happens here, so its failure is
    /// the caller's) and start the task delivering to `events`.
    pub async fn open(
        rest: Rest,
        id: String,
        session: String,
        events: mpsc::UnboundedSender<KernelEvent>,
        timeout: Duration,
        owned: bool,
    ) -> Result<Link, LinkError> {
        let (socket, framing) =
            match tokio::time::timeout(timeout, connect(&rest, &id, &session, None)).await {
                Err(_) => {
                    return Err(LinkError::Timeout {
                        timeout_s: timeout.as_secs_f64(),
                    });
                }
                Ok(Err(ConnectError::Gone)) => {
                    return Err(LinkError::NoKernel {
                        gateway: rest.gateway().name.clone(),
                        id,
                    });
                }
                Ok(Err(ConnectError::Failed(e))) => return Err(LinkError::Failed(e)),
                Ok(Ok(s)) => s,
            };
        let shared = Arc::new(Shared::default());
        shared.connected.store(true, Ordering::Relaxed);
        shared.framing.store(framing as u8, Ordering::Relaxed);
        let (out, out_rx) = mpsc::unbounded_channel();
        let (gone_tx, gone_rx) = tokio::sync::oneshot::channel();
        let liveness = tokio::spawn(watch_status(rest.clone(), id.clone(), gone_tx));
        let task = tokio::spawn(
            Task {
                rest,
                id,
                session,
                events,
                shared: shared.clone(),
                out: out_rx,
                ours: Default::default(),
                unsent: None,
                gone: gone_rx,
                owned,
            }
            .run(socket, framing),
        );
        Ok(Link {
            out,
            shared,
            task,
            liveness,
        })
    }

    /// Queue `msg` for `channel`. Errors: [`SendError::Closed`]: the link has ended (the
    /// kernel is gone).
    pub fn send(&self, channel: Channel, msg: Message) -> Result<(), SendError> {
        self.out.send((channel, msg)).map_err(|_| SendError::Closed)
    }

    /// True while the websocket is open.
    pub fn connected(&self) -> bool {
        self.shared.connected.load(Ordering::Relaxed) && !self.task.is_finished()
    }

    /// Frames dropped as malformed.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// `"v1"` or `"json"`.
    pub fn framing(&self) -> &'static str {
        match self.shared.framing.load(Ordering::Relaxed) {
            1 => "v1",
            _ => "json",
        }
    }
}

/// Handshake with the channels endpoint; `prefer` skips the subprotocol offer once the
/// server is known not to pick it.
async fn connect(
    rest: &Rest,
    id: &str,
    session: &str,
    prefer: Option<Framing>,
) -> Result<(Socket, Framing), ConnectError> {
    let gateway = rest.gateway();
    let url = gateway.ws_join(&format!("api/kernels/{id}/channels?session_id={session}"));
    let mut offer_v1 = prefer != Some(Framing::Json);
    loop {
        let mut req = url
            .as_str()
            .into_client_request()
            .map_err(|e| ConnectError::Failed(format!("bad websocket URL: {e}")))?;
        if let Some(h) = gateway.auth_header() {
            req.headers_mut().insert("authorization", h);
        }
        if offer_v1 {
            req.headers_mut().insert(
                "sec-websocket-protocol",
                HeaderValue::from_static(V1_SUBPROTOCOL),
            );
        }
        crate::tls::install_provider();
        let outcome =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::connect_async(req))
                .await
                .map_err(|_| ConnectError::Failed("the websocket handshake timed out".into()))?;
        return match outcome {
            Ok((socket, resp)) => {
                let v1 = resp
                    .headers()
                    .get("sec-websocket-protocol")
                    .is_some_and(|p| p.as_bytes() == V1_SUBPROTOCOL.as_bytes());
                Ok((socket, if v1 { Framing::V1 } else { Framing::Json }))
            }
            // The server does not speak v1: ask again without the offer (JSON framing).
            Err(WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(
                SubProtocolError::NoSubProtocol,
            ))) if offer_v1 => {
                offer_v1 = false;
                continue;
            }
            Err(WsError::Http(resp)) if resp.status().as_u16() == 404 => Err(ConnectError::Gone),
            Err(e) => Err(ConnectError::Failed(redact(
                gateway,
                &format!("websocket to gateway '{}' failed: {e}", gateway.name),
            ))),
        };
    }
}

/// Why pumping stopped.
enum Stop {
    /// The kernel handle is gone: close and end.
    Closed,
    /// The socket dropped: reconnect.
    Dropped(String),
    /// The kernel is gone on the server.
    KernelGone(&'static str),
}

struct Task {
    rest: Rest,
    id: String,
    session: String,
    events: mpsc::UnboundedSender<KernelEvent>,
    shared: Arc<Shared>,
    out: mpsc::UnboundedReceiver<(Channel, Message)>,
    /// Our msg_ids, and their order for forgetting.
    ours: (HashSet<String>, VecDeque<String>),
    /// A frame whose write failed; sent first after a reconnect.
    unsent: Option<WsMessage>,
    /// Fires when the REST status says the kernel is gone.
    gone: tokio::sync::oneshot::Receiver<&'static str>,
    /// True when we started the kernel: a replacement the server made after its death is
    /// deleted too, so nothing of ours is left running there.
    owned: bool,
}

impl Task {
    async fn run(mut self, mut socket: Socket, mut framing: Framing) {
        loop {
            match self.pump(&mut socket, framing).await {
                Stop::Closed => {
                    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
                    return;
                }
                Stop::KernelGone(why) => {
                    tracing::warn!(gateway = %self.rest.gateway().name, kernel_id = %self.id, "remote kernel is gone: {why}");
                    if self.owned && why == RESTARTED {
                        // Detached: dropping the kernel on the death aborts this task.
                        let (rest, id) = (self.rest.clone(), self.id.clone());
                        tokio::spawn(async move {
                            // A kernel in the middle of its restart may refuse: try a few times.
                            for _ in 0..10 {
                                let _ = rest.delete(&id, Duration::from_secs(10)).await;
                                if let Err(GatewayError::NotFound { .. }) = rest.kernel(&id).await {
                                    return;
                                }
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                            tracing::warn!(kernel_id = %id, "could not delete the kernel the server restarted");
                        });
                    }
                    let _ = self.events.send(gone());
                    return;
                }
                Stop::Dropped(why) => {
                    self.shared.connected.store(false, Ordering::Relaxed);
                    tracing::warn!(gateway = %self.rest.gateway().name, kernel_id = %self.id, "kernel websocket dropped ({why}); reconnecting");
                }
            }
            match self.reconnect(framing).await {
                Some((s, f)) => {
                    (socket, framing) = (s, f);
                    self.shared.connected.store(true, Ordering::Relaxed);
                    tracing::info!(gateway = %self.rest.gateway().name, kernel_id = %self.id, "kernel websocket reconnected");
                }
                None => {
                    let _ = self.events.send(gone());
                    return;
                }
            }
        }
    }

    /// Open the socket again (same session_id), asking the REST status first; `None` when
    /// the kernel is gone or the server stays unreachable.
    async fn reconnect(&mut self, framing: Framing) -> Option<(Socket, Framing)> {
        let deadline = Instant::now() + RECONNECT_FOR;
        let mut pause = Duration::from_millis(100);
        let mut absence = Absence::default();
        let gone = |id: &str| {
            tracing::warn!(kernel_id = %id, "the server no longer has the kernel ({} s)", GONE_GRACE.as_secs());
            None
        };
        loop {
            match self.rest.kernel(&self.id).await {
                Err(GatewayError::NotFound { .. }) => {
                    if absence.not_found(&self.id) {
                        return gone(&self.id);
                    }
                }
                Ok(m) if m.execution_state == "dead" => return None,
                Ok(_) => absence.present(),
                Err(_) => {}
            }
            match connect(&self.rest, &self.id, &self.session, Some(framing)).await {
                Ok(s) => return Some(s),
                Err(ConnectError::Gone) => {
                    if absence.not_found(&self.id) {
                        return gone(&self.id);
                    }
                }
                Err(ConnectError::Failed(e)) => {
                    if Instant::now() >= deadline {
                        tracing::warn!(kernel_id = %self.id, "giving up on the kernel's websocket: {e}");
                        return None;
                    }
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    async fn pump(&mut self, socket: &mut Socket, framing: Framing) -> Stop {
        if let Some(frame) = self.unsent.take()
            && let Err(e) = socket.send(frame.clone()).await
        {
            self.unsent = Some(frame);
            return Stop::Dropped(e.to_string());
        }
        loop {
            tokio::select! {
                why = &mut self.gone => {
                    return Stop::KernelGone(why.unwrap_or("the status watch ended"));
                }
                out = self.out.recv() => {
                    let Some((channel, msg)) = out else { return Stop::Closed };
                    self.remember(msg.msg_id());
                    let name = channel.to_string();
                    let frame = match framing {
                        Framing::V1 => WsMessage::Binary(ws::encode_v1(&name, &msg).into()),
                        Framing::Json => WsMessage::Text(ws::encode_json(&name, &msg).into()),
                    };
                    if let Err(e) = socket.send(frame.clone()).await {
                        self.unsent = Some(frame);
                        return Stop::Dropped(e.to_string());
                    }
                }
                frame = socket.next() => {
                    let decoded = match frame {
                        None => return Stop::Dropped("closed".into()),
                        Some(Err(e)) => return Stop::Dropped(e.to_string()),
                        Some(Ok(WsMessage::Close(_))) => return Stop::Dropped("closed by the server".into()),
                        Some(Ok(WsMessage::Text(t))) => ws::decode_json(t.as_str()),
                        Some(Ok(WsMessage::Binary(b))) if framing == Framing::V1 => ws::decode_v1(&b),
                        Some(Ok(WsMessage::Binary(b))) => ws::decode_json_binary(&b),
                        Some(Ok(_)) => continue,
                    };
                    if let Some(stop) = self.deliver(decoded) {
                        return stop;
                    }
                }
            }
        }
    }

    fn remember(&mut self, id: &str) {
        let (set, order) = &mut self.ours;
        if set.insert(id.to_string()) {
            order.push_back(id.to_string());
        }
        while order.len() > REMEMBERED_IDS {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
    }

    /// Hand one decoded message on, unless it is somebody else's reply or malformed.
    fn deliver(&mut self, decoded: Result<(String, Message), WireError>) -> Option<Stop> {
        let (name, msg) = match decoded {
            Ok(x) => x,
            Err(e) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(kernel_id = %self.id, "dropped a websocket frame: {e}");
                return None;
            }
        };
        let channel = match name.as_str() {
            "shell" => Channel::Shell,
            "control" => Channel::Control,
            "stdin" => Channel::Stdin,
            "iopub" => Channel::Iopub,
            _ => return None,
        };
        let ours = msg.parent_msg_id().is_some_and(|p| self.ours.0.contains(p));
        if channel == Channel::Iopub {
            if msg.msg_type() == "status" && !ours {
                match msg.content["execution_state"].as_str() {
                    Some("dead") => return Some(Stop::KernelGone("the server reports it dead")),
                    Some("restarting") if msg.parent_header.is_none() => {
                        return Some(Stop::KernelGone(RESTARTED));
                    }
                    _ => {}
                }
            }
            let nudge = msg
                .parent_header
                .as_ref()
                .is_some_and(|p| p.msg_type == "kernel_info_request");
            if nudge && !ours {
                return None;
            }
        } else if !ours {
            return None;
        }
        let _ = self.events.send(KernelEvent::Message(channel, msg));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_404_counts_only_once_it_has_lasted_the_grace_and_an_answer_resets_it() {
        let mut absence = Absence::default();
        assert!(!absence.not_found("k"), "the first 404 is not believed");
        tokio::time::sleep(GONE_GRACE - Duration::from_millis(1)).await;
        assert!(!absence.not_found("k"));
        absence.present();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !absence.not_found("k"),
            "the clock starts again after an answer"
        );
        tokio::time::sleep(GONE_GRACE).await;
        assert!(absence.not_found("k"), "gone after the whole grace");
    }
}
