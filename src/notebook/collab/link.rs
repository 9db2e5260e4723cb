//! One room, kept in sync: a task owns the websocket, applies what the room sends to our
//! copy of the document and the awareness table, and sends our changes, our awareness
//! state (renewed every [`RENEW_EVERY`]), sync requests and save requests as they are
//! queued in [`Inner`].
//!
//! - Sync: on every connection both sides send sync step 1 (their state vector) and answer
//!   the other's with step 2 (what it lacks), so changes made while disconnected are
//!   exchanged then; afterwards each change is one update message.
//! - Reconnect: a dropped socket is opened again (a fresh document session first) after
//!   0.25 s, doubling to 4 s, for up to [`RECONNECT_FOR`]; then the link is lost. A server
//!   that restarted (another `sessionId`) rebuilt the document from its file: our copy is
//!   dropped and synced afresh, and changes of ours not yet sent are lost (logged).
//! - Bad bytes from the room are logged and dropped; bytes the document library cannot
//!   apply drop our copy and reconnect.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::Message as WsMessage;

use super::connect::{self, RoomAddress, Session, Socket};
use super::presence::{Local, Peers, RENEW_EVERY};
use super::replica::{Outgoing, Replica};
use super::wire::{self, Incoming};
use super::{CollabError, LinkState};
use crate::kernel::remote::Gateway;

/// How long a dropped room is retried before it counts as lost.
pub const RECONNECT_FOR: Duration = Duration::from_secs(60);

/// What the room task and the handle share.
pub struct Inner {
    pub replica: Replica,
    pub peers: Peers,
    pub local: Local,
    /// Sync step 2 answers to send, ahead of anything else.
    answers: Vec<Vec<u8>>,
    awareness_due: bool,
    sync_requests: u32,
    saves: Vec<u64>,
    save_waiters: HashMap<u64, oneshot::Sender<String>>,
    next_save: u64,
    closing: bool,
}

/// The state of one room shared by its task and its handle.
pub struct Shared {
    inner: Mutex<Inner>,
    wake: Notify,
    /// Bumped on every change of the document (ours, and every update from the room: the
    /// server sends ours back too, so one of ours may count twice).
    pub version: watch::Sender<u64>,
    /// How many sync step 2 answers arrived (a sync round trip waits for the next).
    pub synced: watch::Sender<u64>,
    pub state: watch::Sender<LinkState>,
    /// Frames dropped as malformed.
    pub dropped: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub fn new(local_state: serde_json::Value) -> Arc<Shared> {
        let replica = Replica::new();
        let local = Local::new(replica.client_id(), local_state);
        Arc::new(Shared {
            inner: Mutex::new(Inner {
                replica,
                peers: Peers::default(),
                local,
                answers: Vec::new(),
                awareness_due: true,
                sync_requests: 0,
                saves: Vec::new(),
                save_waiters: HashMap::new(),
                next_save: 1,
                closing: false,
            }),
            wake: Notify::new(),
            version: watch::Sender::new(0),
            synced: watch::Sender::new(0),
            state: watch::Sender::new(LinkState::Connecting),
            dropped: Default::default(),
        })
    }

    /// The shared state, locked (never across an await).
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tell the task there is something to send.
    pub fn kick(&self) {
        self.wake.notify_one();
    }

    pub fn bump(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// Queue a sync round trip; returns the count of answers to wait past.
    pub fn request_sync(&self) -> u64 {
        let seen = *self.synced.borrow();
        self.lock().sync_requests += 1;
        self.kick();
        seen
    }

    /// Queue a save request; its answer (`success`, `skipped`, `failed`) arrives on the
    /// receiver.
    pub fn request_save(&self) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        let mut g = self.lock();
        let id = g.next_save;
        g.next_save += 1;
        g.saves.push(id);
        g.save_waiters.insert(id, tx);
        drop(g);
        self.kick();
        rx
    }

    /// Ask the task to announce our awareness state again (it changed).
    pub fn announce(&self) {
        self.lock().awareness_due = true;
        self.kick();
    }

    /// Ask the task to leave the room.
    pub fn close(&self) {
        self.lock().closing = true;
        self.kick();
    }
}

/// Where and how to reach the room.
#[derive(Clone)]
pub struct Target {
    pub gateway: Gateway,
    pub room: RoomAddress,
    pub http: reqwest::Client,
}

/// Connect (a document session first for a notebook) and sync: the first connection of a
/// link, whose failure is the caller's.
///
/// Errors: as [`connect::session`] and [`connect::websocket`]; [`CollabError::Timeout`] when
/// the room does not answer our sync within `timeout`.
pub async fn open(
    shared: &Arc<Shared>,
    target: &Target,
    timeout: Duration,
) -> Result<(Socket, Option<Session>), CollabError> {
    let session = match &target.room {
        RoomAddress::Notebook { path } => {
            Some(connect::session(&target.http, &target.gateway, path).await?)
        }
        RoomAddress::GlobalAwareness => None,
    };
    let mut socket = connect::websocket(&target.gateway, &target.room, session.as_ref()).await?;
    let want = shared.request_sync();
    let synced = tokio::time::timeout(timeout, async {
        loop {
            match pump_once(shared, &mut socket, None).await {
                Ok(()) if *shared.synced.borrow() > want => return Ok(()),
                Ok(()) => {}
                Err(stop) => return Err(stop),
            }
        }
    })
    .await;
    match synced {
        Ok(Ok(())) => Ok((socket, session)),
        Ok(Err(Stop::Refused(4404, _))) => Err(CollabError::NotFound {
            path: match &target.room {
                RoomAddress::Notebook { path } => path.clone(),
                RoomAddress::GlobalAwareness => String::new(),
            },
        }),
        Ok(Err(stop)) => Err(connect::unavailable(&target.gateway, &stop.to_string())),
        Err(_) => Err(CollabError::Timeout {
            what: format!(
                "the first sync with the room (over {} s)",
                timeout.as_secs()
            ),
        }),
    }
}

/// Why pumping stopped.
enum Stop {
    /// We left the room.
    Closed,
    /// The socket dropped, or our copy must be synced afresh: reconnect.
    Dropped(String),
    /// Nothing more can be done (the document is too large).
    Fatal(String),
    /// The server refused the room with a close code of its own: `4404` no such file,
    /// `4400` a bad request, `4500` its own failure.
    Refused(u16, String),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Closed => f.write_str("the room was left"),
            Stop::Dropped(why) | Stop::Fatal(why) => f.write_str(why),
            Stop::Refused(4404, _) => f.write_str("the server has no such notebook any more"),
            Stop::Refused(code, why) => write!(f, "the server refused the room ({code} {why})"),
        }
    }
}

/// Run the room from its first connection until it is left or lost.
pub async fn run(shared: Arc<Shared>, target: Target, socket: Socket, session: Option<Session>) {
    shared.state.send_replace(LinkState::Connected);
    let mut socket = Some(socket);
    let mut session = session;
    let mut down_since: Option<Instant> = None;
    let mut backoff = Duration::from_millis(250);
    loop {
        if let Some(s) = socket.take() {
            down_since = None;
            backoff = Duration::from_millis(250);
            shared.state.send_replace(LinkState::Connected);
            match pump(&shared, s).await {
                Stop::Closed => break,
                stop @ (Stop::Fatal(_) | Stop::Refused(..)) => {
                    let why = stop.to_string();
                    tracing::warn!(server = %target.gateway.name, "collaboration room lost: {why}");
                    shared.state.send_replace(LinkState::Lost(why));
                    break;
                }
                Stop::Dropped(why) => {
                    tracing::info!(server = %target.gateway.name, "collaboration room dropped ({why}); reconnecting");
                }
            }
        }
        if shared.lock().closing {
            break;
        }
        let since = *down_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= RECONNECT_FOR {
            let why = format!(
                "the server could not be reached for {} s",
                RECONNECT_FOR.as_secs()
            );
            shared.state.send_replace(LinkState::Lost(why));
            break;
        }
        shared.state.send_replace(LinkState::Reconnecting);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(4));
        socket = reconnect(&shared, &target, &mut session).await;
    }
    if matches!(
        *shared.state.borrow(),
        LinkState::Connected | LinkState::Reconnecting | LinkState::Connecting
    ) {
        shared.state.send_replace(LinkState::Closed);
    }
    // Whoever still waits for a save gets an answer.
    shared.lock().save_waiters.clear();
}

/// One reconnection attempt.
async fn reconnect(
    shared: &Arc<Shared>,
    target: &Target,
    session: &mut Option<Session>,
) -> Option<Socket> {
    let fresh = match &target.room {
        RoomAddress::Notebook { path } => {
            match connect::session(&target.http, &target.gateway, path).await {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::debug!("collaboration reconnect: {e}");
                    return None;
                }
            }
        }
        RoomAddress::GlobalAwareness => None,
    };
    if let (Some(old), Some(new)) = (session.as_ref(), fresh.as_ref())
        && old.session_id != new.session_id
    {
        tracing::warn!(server = %target.gateway.name, "the Jupyter server restarted; the notebook is synced afresh from it (changes not yet sent are lost)");
        reset(shared);
    }
    *session = fresh;
    match connect::websocket(&target.gateway, &target.room, session.as_ref()).await {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::debug!("collaboration reconnect: {e}");
            None
        }
    }
}

/// Drop our copy of the document (it will be synced afresh).
fn reset(shared: &Shared) {
    let mut g = shared.lock();
    g.replica = Replica::new();
    g.local = Local::new(g.replica.client_id(), g.local.state().clone());
    g.peers = Peers::default();
    g.answers.clear();
    g.awareness_due = true;
    drop(g);
    shared.bump();
}

/// Serve the socket: send what is queued, apply what arrives, renew our awareness.
async fn pump(shared: &Arc<Shared>, mut socket: Socket) -> Stop {
    let mut renew = tokio::time::interval(RENEW_EVERY);
    renew.tick().await;
    // Our step 1 and awareness on every connection.
    shared.request_sync();
    shared.announce();
    loop {
        if let Err(stop) = pump_once(shared, &mut socket, Some(&mut renew)).await {
            if let Stop::Closed = stop {
                let _ = socket.close(None).await;
            }
            return stop;
        }
    }
}

/// Send what is queued, then wait for one frame, a kick or (with `renew`) the time to
/// renew our awareness, and handle it.
async fn pump_once(
    shared: &Arc<Shared>,
    socket: &mut Socket,
    renew: Option<&mut tokio::time::Interval>,
) -> Result<(), Stop> {
    let (frames, closing) = outgoing(shared);
    for f in frames {
        socket
            .send(WsMessage::Binary(f.into()))
            .await
            .map_err(|e| Stop::Dropped(e.to_string()))?;
    }
    if closing {
        return Err(Stop::Closed);
    }
    let renewal = async {
        match renew {
            Some(r) => {
                r.tick().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        frame = socket.next() => match frame {
            None => Err(Stop::Dropped("the server closed the room's websocket".into())),
            Some(Err(e)) if connect::too_long(&e) => Err(Stop::Fatal(format!(
                "the room sent a message over {} MiB", connect::MAX_MESSAGE_BYTES >> 20))),
            Some(Err(e)) => Err(Stop::Dropped(e.to_string())),
            Some(Ok(WsMessage::Binary(b))) => handle(shared, &b),
            Some(Ok(WsMessage::Close(Some(c)))) if (4400..4600).contains(&u16::from(c.code)) => {
                Err(Stop::Refused(u16::from(c.code), c.reason.to_string()))
            }
            Some(Ok(WsMessage::Close(c))) => Err(Stop::Dropped(format!(
                "the server closed the room ({})",
                c.map(|c| format!("{} {}", u16::from(c.code), c.reason)).unwrap_or_default()))),
            Some(Ok(_)) => Ok(()),
        },
        _ = shared.wake.notified() => Ok(()),
        _ = renewal => {
            let mut g = shared.lock();
            g.local.bump();
            g.awareness_due = true;
            Ok(())
        }
    }
}

/// The frames to send now; true when leaving (our awareness removal is the last frame).
fn outgoing(shared: &Shared) -> (Vec<Vec<u8>>, bool) {
    let mut g = shared.lock();
    let mut frames = std::mem::take(&mut g.answers);
    for _ in 0..std::mem::take(&mut g.sync_requests).min(1) {
        frames.push(wire::sync_step1(&g.replica.state_vector()));
    }
    match g.replica.take_outgoing() {
        Outgoing::Nothing => {}
        Outgoing::Updates(list) => frames.extend(list.iter().map(|u| wire::update(u))),
        Outgoing::Everything(all) => frames.push(wire::update(&all)),
    }
    if std::mem::take(&mut g.awareness_due) {
        frames.push(wire::awareness(&g.local.update()));
    }
    for id in std::mem::take(&mut g.saves) {
        frames.push(wire::save(id));
    }
    if g.closing {
        frames.push(wire::awareness(&g.local.removal()));
    }
    (frames, g.closing)
}

/// Handle one frame from the room.
fn handle(shared: &Arc<Shared>, frame: &[u8]) -> Result<(), Stop> {
    let msg = match wire::decode(frame) {
        Ok(m) => m,
        Err(e) => {
            shared
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!("{e}; frame dropped");
            return Ok(());
        }
    };
    let mut g = shared.lock();
    match msg {
        Incoming::SyncStep1(sv) => {
            let diff = g.replica.diff_for(&sv);
            g.answers.push(wire::sync_step2(&diff));
            drop(g);
            shared.kick();
        }
        Incoming::SyncStep2(u) => {
            drop(g);
            apply(shared, &u)?;
            shared.synced.send_modify(|n| *n += 1);
        }
        Incoming::Update(u) => {
            drop(g);
            apply(shared, &u)?;
        }
        Incoming::Awareness(update) => {
            let Inner { peers, local, .. } = &mut *g;
            let again = peers.apply(&update, local);
            g.awareness_due |= again;
            drop(g);
            if again {
                shared.kick();
            }
        }
        Incoming::AwarenessQuery => {
            g.awareness_due = true;
            drop(g);
            shared.kick();
        }
        Incoming::Raw(v) => {
            if v["type"] == "save"
                && let Some(id) = v["responseTo"].as_u64()
                && let Some(tx) = g.save_waiters.remove(&id)
            {
                let _ = tx.send(v["status"].as_str().unwrap_or("unknown").to_string());
            } else if v["type"] == "conflict" {
                tracing::warn!("the server reports a conflict between our copy and its document");
            }
        }
        Incoming::Other(_) => {}
    }
    Ok(())
}

/// Apply an update from the room to our copy.
fn apply(shared: &Arc<Shared>, update: &[u8]) -> Result<(), Stop> {
    // Two zero bytes: an update with nothing in it.
    if update == [0, 0] {
        return Ok(());
    }
    let applied = shared.lock().replica.apply_remote(update);
    match applied {
        Ok(()) => {
            shared.bump();
            Ok(())
        }
        Err(CollabError::TooLarge { limit_mib }) => Err(Stop::Fatal(format!(
            "the notebook passed {limit_mib} MiB in the room"
        ))),
        Err(e) => {
            tracing::warn!("{e}");
            reset(shared);
            Err(Stop::Dropped(e.to_string()))
        }
    }
}
