//! Server log messages to MCP clients that asked for them (`logging/setLevel`).
//!
//! [`McpLogLayer`] is a `tracing` layer: each event of this crate (target `kernel_mcp…`) at
//! debug or above becomes a short record pushed into a bounded channel with `try_send`, so
//! logging never blocks and a slow client costs dropped records, not memory. One forwarder
//! task (started by the first `logging/setLevel`, on the MCP runtime) sends each record as
//! `notifications/message` to every subscribed peer whose level it meets and who may see it;
//! a peer whose connection is closed is dropped. rmcp's own events are never forwarded (no
//! feedback loop when sending a notification logs).
//!
//! Who may see a record: an event inside a session's span (the registry gives each session one,
//! `session{id, owner, principal}`) goes to the clients that see that session — its principal's
//! clients (and admins) for a named session, only the owning connection for a connection's own
//! `default` (whose events can carry a person's console output). An event outside any session
//! span goes to admins (the owner, in a single-user setup: every client), except those of the
//! session and kernel layers, which are about some session's kernel by nature and are dropped
//! when no span says whose.
//!
//! Logging is deprecated from MCP 2026-07-28 on: clients of that version never call
//! `logging/setLevel`; they name a level in a request's `_meta`
//! (`io.modelcontextprotocol/logLevel`), and get the records at that level or above while that
//! request runs, in its own response ([`subscribe_request`]); a request without one gets none.

#![allow(deprecated)] // rmcp marks the logging types deprecated (SEP-2577); 2025 clients use them

use std::fmt::Write;
use std::sync::{Mutex, OnceLock};

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use serde_json::json;
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Records waiting for the forwarder; more are dropped.
const QUEUE: usize = 256;
/// Longest message forwarded (bytes); the rest is cut.
const MAX_MESSAGE_BYTES: usize = 2048;
/// Most peers subscribed at once; the oldest is dropped for a new one.
const MAX_PEERS: usize = 64;

/// Targets whose events are about a session's kernel even outside its span.
const SESSION_TARGETS: [&str; 3] = [
    "kernel_mcp::session",
    "kernel_mcp::kernel",
    "kernel_mcp::broker::endpoint",
];

/// Who may receive a record.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Audience {
    /// Admins (the server-wide events).
    Everyone,
    /// Connection `n` only (its own `default` session's events).
    Connection(u64),
    /// The clients of this principal (its named sessions' events), and admins.
    Principal(String),
    /// Nobody (a session's event that says not whose).
    Nobody,
}

/// Whose a session span is: its connection's (a connection's own `default`) or its
/// principal's.
#[derive(Default)]
struct SessionOwner {
    connection: Option<u64>,
    principal: Option<String>,
}

impl SessionOwner {
    fn audience(&self) -> Audience {
        match (self.connection, &self.principal) {
            (Some(c), _) => Audience::Connection(c),
            (None, Some(p)) => Audience::Principal(p.clone()),
            (None, None) => Audience::Everyone,
        }
    }
}

/// Who a subscribed client is: its service connection (`None`: a standalone server's client,
/// which sees every connection's records), its principal, and whether it is an admin.
#[derive(Debug, Clone)]
pub struct Listener {
    pub connection: Option<u64>,
    pub principal: String,
    pub admin: bool,
}

/// One log event, as forwarded.
#[derive(Debug, Clone)]
struct Record {
    level: LoggingLevel,
    logger: String,
    message: String,
    audience: Audience,
}

/// The process-wide hub: the channel's sending end, its receiving end until the forwarder
/// takes it, and the subscribed peers.
struct Hub {
    tx: mpsc::Sender<Record>,
    rx: Mutex<Option<mpsc::Receiver<Record>>>,
    peers: Mutex<Vec<Subscriber>>,
}

impl Listener {
    /// Who `caller` is to the forwarder (which records it may receive).
    pub fn of(caller: &super::caller::Caller) -> Listener {
        let viewer = caller.scope.viewer();
        Listener {
            connection: viewer.connection().map(|c| c.get()),
            principal: viewer.owner().to_string(),
            admin: viewer.is_admin(),
        }
    }
}

/// One subscribed connection, or one request that named a level.
struct Subscriber {
    /// The subscribing handler (one per MCP connection), or request.
    handler: u64,
    who: Listener,
    peer: Peer<RoleServer>,
    level: LoggingLevel,
}

impl Subscriber {
    fn sees(&self, audience: &Audience) -> bool {
        sees(&self.who, audience)
    }
}

/// True when `who` may receive a record for `audience`.
fn sees(who: &Listener, audience: &Audience) -> bool {
    match audience {
        Audience::Everyone => who.admin,
        Audience::Connection(c) => who.connection.is_none_or(|v| v == *c),
        Audience::Principal(p) => who.admin || *p == who.principal,
        Audience::Nobody => false,
    }
}

fn hub() -> &'static Hub {
    static HUB: OnceLock<Hub> = OnceLock::new();
    HUB.get_or_init(|| {
        let (tx, rx) = mpsc::channel(QUEUE);
        Hub {
            tx,
            rx: Mutex::new(Some(rx)),
            peers: Mutex::new(Vec::new()),
        }
    })
}

/// Rank of a level (higher = more severe).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Send `handler`'s `peer` every record at `level` or above that `who` may see from now
/// on; a later call replaces the level. Must be called on the runtime MCP is served on (the
/// forwarder starts there).
pub fn subscribe(handler: u64, who: Listener, peer: Peer<RoleServer>, level: LoggingLevel) {
    let hub = hub();
    {
        let mut peers = hub.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.retain(|s| !s.peer.is_transport_closed());
        if let Some(s) = peers.iter_mut().find(|s| s.handler == handler) {
            s.level = level;
            s.peer = peer;
            s.who = who;
        } else {
            if peers.len() >= MAX_PEERS {
                peers.remove(0);
            }
            peers.push(Subscriber {
                handler,
                who,
                peer,
                level,
            });
        }
    }
    let rx = hub.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(rx) = rx {
        tokio::spawn(forward(rx));
    }
}

/// Records handed to the forwarder and not yet sent.
static PENDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// How long a request that named a log level waits, at its end, for the records it caused to
/// be sent (its response stream closes after its answer).
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A request's own subscription (a 2026-07-28 request's `_meta` log level): it ends when
/// this is dropped, at the end of the request.
pub struct RequestSubscription(u64);

impl RequestSubscription {
    /// Wait (at most [`FLUSH_WAIT`]) until the records logged so far are sent, so the ones
    /// this request caused reach its response before its answer closes it.
    pub async fn flush(&self) {
        let deadline = tokio::time::Instant::now() + FLUSH_WAIT;
        while PENDING.load(std::sync::atomic::Ordering::Acquire) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
}

impl Drop for RequestSubscription {
    fn drop(&mut self) {
        let mut peers = hub().peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.retain(|s| s.handler != self.0);
    }
}

/// Send the request's `peer` (its response stream) every record at `level` or above that
/// `who` may see, until the returned guard is dropped.
pub fn subscribe_request(
    who: Listener,
    peer: Peer<RoleServer>,
    level: LoggingLevel,
) -> RequestSubscription {
    // Request subscriptions are numbered down from the top, apart from handlers' numbers.
    static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);
    let id = REQUESTS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    subscribe(id, who, peer, level);
    RequestSubscription(id)
}

/// The forwarder: each record to each peer whose level it meets.
async fn forward(mut rx: mpsc::Receiver<Record>) {
    while let Some(r) = rx.recv().await {
        let targets: Vec<Peer<RoleServer>> = {
            let mut peers = hub().peers.lock().unwrap_or_else(|e| e.into_inner());
            peers.retain(|s| !s.peer.is_transport_closed());
            peers
                .iter()
                .filter(|s| rank(r.level) >= rank(s.level) && s.sees(&r.audience))
                .map(|s| s.peer.clone())
                .collect()
        };
        for peer in targets {
            let param = LoggingMessageNotificationParam::new(r.level, json!(r.message))
                .with_logger(r.logger.clone());
            let _ = peer.notify_logging_message(param).await;
        }
        PENDING.fetch_sub(1, std::sync::atomic::Ordering::Release);
    }
}

/// The tracing layer described in the module docs.
pub struct McpLogLayer;

impl<S> Layer<S> for McpLogLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    /// Remember whose a session span is (spans made before any subscription count too).
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "session" {
            return;
        }
        let mut owner = SessionOwner::default();
        attrs.record(&mut owner);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(owner);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        if !meta.target().starts_with("kernel_mcp") {
            return;
        }
        // Nobody subscribed yet: nothing to do (the common case, kept cheap).
        let hub = hub();
        if hub.peers.lock().map(|p| p.is_empty()).unwrap_or(true) {
            return;
        }
        let level = match *meta.level() {
            Level::ERROR => LoggingLevel::Error,
            Level::WARN => LoggingLevel::Warning,
            Level::INFO => LoggingLevel::Info,
            Level::DEBUG => LoggingLevel::Debug,
            Level::TRACE => return,
        };
        let mut visitor = Message::default();
        event.record(&mut visitor);
        let mut message = visitor.0;
        if message.len() > MAX_MESSAGE_BYTES {
            let mut cut = MAX_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let sent = hub.tx.try_send(Record {
            level,
            logger: meta.target().to_string(),
            message,
            audience: audience(event, &ctx),
        });
        if sent.is_ok() {
            PENDING.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// Who may receive `event`: see the module docs.
fn audience<S>(event: &Event<'_>, ctx: &Context<'_, S>) -> Audience
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    // The audit trail is the operator's (every principal's calls): never forwarded.
    if event.metadata().target() == super::audit::TARGET {
        return Audience::Nobody;
    }
    if let Some(scope) = ctx.event_scope(event) {
        for span in scope {
            if let Some(owner) = span.extensions().get::<SessionOwner>() {
                return owner.audience();
            }
        }
    }
    let target = event.metadata().target();
    if SESSION_TARGETS
        .iter()
        .any(|t| target == *t || target.starts_with(&format!("{t}::")))
    {
        Audience::Nobody
    } else {
        Audience::Everyone
    }
}

/// Reads a session span's `owner` (connection) and `principal` fields.
impl Visit for SessionOwner {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "owner" {
            self.connection = Some(value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "principal" {
            self.principal = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "principal" {
            self.principal = Some(format!("{value:?}").trim_matches('"').to_string());
        }
    }
}

/// An event's `message` followed by its other fields as `name=value`.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if self.0.len() > MAX_MESSAGE_BYTES {
            return;
        }
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            let _ = write!(self.0, "{value:?}");
            if !rest.is_empty() {
                self.0.push(' ');
                self.0.push_str(&rest);
            }
        } else {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// Records the audience of every event, as [`McpLogLayer`] would judge it.
    struct Probe(Arc<Mutex<Vec<Audience>>>);

    impl<S> Layer<S> for Probe
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
            self.0.lock().unwrap().push(audience(event, &ctx));
        }
    }

    #[test]
    fn a_sessions_events_go_to_who_sees_it_and_unattributed_kernel_events_to_nobody() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(McpLogLayer)
            .with(Probe(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let private = tracing::info_span!(target: "kernel_mcp::session", "session", id = "default", owner = Some(3u64));
            let principal = Some("uid:7".to_string());
            let named = tracing::info_span!(target: "kernel_mcp::session", "session", id = "s", owner = None::<u64>, principal);
            private.in_scope(|| tracing::info!(target: "kernel_mcp::session::actor", "output"));
            named.in_scope(|| tracing::info!(target: "kernel_mcp::session::actor", "output"));
            tracing::info!(target: "kernel_mcp::registry", parent: &private, "expired");
            tracing::info!(target: "kernel_mcp::kernel::process", "stderr line");
            tracing::info!(target: "kernel_mcp::service", "client connected");
            tracing::info!(target: "kernel_mcp::audit", parent: &named, "tool call");
        });
        assert_eq!(
            *seen.lock().unwrap(),
            [
                Audience::Connection(3),
                Audience::Principal("uid:7".into()),
                Audience::Connection(3),
                Audience::Nobody,
                Audience::Everyone,
                Audience::Nobody,
            ]
        );
        let who = |connection, principal: &str, admin| Listener {
            connection,
            principal: principal.into(),
            admin,
        };
        assert!(sees(&who(Some(3), "owner", true), &Audience::Connection(3)));
        assert!(!sees(
            &who(Some(4), "owner", true),
            &Audience::Connection(3)
        ));
        assert!(sees(&who(None, "owner", true), &Audience::Connection(3)));
        assert!(!sees(&who(None, "owner", true), &Audience::Nobody));
        assert!(sees(
            &who(None, "uid:7", false),
            &Audience::Principal("uid:7".into())
        ));
        assert!(!sees(
            &who(None, "uid:8", false),
            &Audience::Principal("uid:7".into())
        ));
        assert!(sees(
            &who(None, "owner", true),
            &Audience::Principal("uid:7".into())
        ));
        assert!(
            !sees(&who(None, "uid:8", false), &Audience::Everyone),
            "server-wide events are for admins"
        );
    }

    #[test]
    fn levels_rank_from_debug_to_emergency() {
        assert!(rank(LoggingLevel::Error) > rank(LoggingLevel::Warning));
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
    }
}
