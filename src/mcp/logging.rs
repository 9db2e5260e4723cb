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
//! Who may see a record (DESIGN §12): an event inside a session's span (the registry gives
//! each session one, `session{id, owner}`) goes to the clients that see that session — every
//! client for a named session, only the owning connection for a connection's own `default`
//! (whose events can carry a person's console output). An event outside any session span goes
//! to every client, except those of the session and kernel layers, which are about some
//! session's kernel by nature and are dropped when no span says whose.
//!
//! Logging is deprecated from MCP 2026-07-28 on; clients of that version never call
//! `logging/setLevel`, so they never get these notifications.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Audience {
    Everyone,
    /// Connection `n` only (its own `default` session's events).
    Connection(u64),
    /// Nobody (a session's event that says not whose).
    Nobody,
}

/// The owner a session span names (`None`: a named session, every client's).
struct SessionOwner(Option<u64>);

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

/// One subscribed connection.
struct Subscriber {
    /// The subscribing handler (one per MCP connection).
    handler: u64,
    /// The service connection it is (`None`: a standalone server's client, which sees every
    /// session).
    viewer: Option<u64>,
    peer: Peer<RoleServer>,
    level: LoggingLevel,
}

impl Subscriber {
    fn sees(&self, audience: Audience) -> bool {
        sees(self.viewer, audience)
    }
}

/// True when a client of connection `viewer` (`None`: standalone) may receive a record for
/// `audience`.
fn sees(viewer: Option<u64>, audience: Audience) -> bool {
    match audience {
        Audience::Everyone => true,
        Audience::Connection(c) => viewer.is_none_or(|v| v == c),
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

/// Send `handler`'s `peer` every record at `level` or above that its connection `viewer` may
/// see (`None`: a standalone client, every record) from now on; a later call replaces the
/// level. Must be called on the runtime MCP is served on (the forwarder starts there).
pub fn subscribe(handler: u64, viewer: Option<u64>, peer: Peer<RoleServer>, level: LoggingLevel) {
    let hub = hub();
    {
        let mut peers = hub.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.retain(|s| !s.peer.is_transport_closed());
        if let Some(s) = peers.iter_mut().find(|s| s.handler == handler) {
            s.level = level;
            s.peer = peer;
        } else {
            if peers.len() >= MAX_PEERS {
                peers.remove(0);
            }
            peers.push(Subscriber {
                handler,
                viewer,
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

/// The forwarder: each record to each peer whose level it meets.
async fn forward(mut rx: mpsc::Receiver<Record>) {
    while let Some(r) = rx.recv().await {
        let targets: Vec<Peer<RoleServer>> = {
            let mut peers = hub().peers.lock().unwrap_or_else(|e| e.into_inner());
            peers.retain(|s| !s.peer.is_transport_closed());
            peers
                .iter()
                .filter(|s| rank(r.level) >= rank(s.level) && s.sees(r.audience))
                .map(|s| s.peer.clone())
                .collect()
        };
        for peer in targets {
            let param = LoggingMessageNotificationParam::new(r.level, json!(r.message))
                .with_logger(r.logger.clone());
            let _ = peer.notify_logging_message(param).await;
        }
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
        let mut owner = OwnerField(None);
        attrs.record(&mut owner);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SessionOwner(owner.0));
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
        let _ = hub.tx.try_send(Record {
            level,
            logger: meta.target().to_string(),
            message,
            audience: audience(event, &ctx),
        });
    }
}

/// Who may receive `event`: see the module docs.
fn audience<S>(event: &Event<'_>, ctx: &Context<'_, S>) -> Audience
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    if let Some(scope) = ctx.event_scope(event) {
        for span in scope {
            if let Some(SessionOwner(owner)) = span.extensions().get::<SessionOwner>() {
                return owner.map_or(Audience::Everyone, Audience::Connection);
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

/// Reads a session span's `owner` field.
struct OwnerField(Option<u64>);

impl Visit for OwnerField {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "owner" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
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
            let named = tracing::info_span!(target: "kernel_mcp::session", "session", id = "s", owner = None::<u64>);
            private.in_scope(|| tracing::info!(target: "kernel_mcp::session::actor", "output"));
            named.in_scope(|| tracing::info!(target: "kernel_mcp::session::actor", "output"));
            tracing::info!(target: "kernel_mcp::registry", parent: &private, "expired");
            tracing::info!(target: "kernel_mcp::kernel::process", "stderr line");
            tracing::info!(target: "kernel_mcp::service", "client connected");
        });
        assert_eq!(
            *seen.lock().unwrap(),
            [
                Audience::Connection(3),
                Audience::Everyone,
                Audience::Connection(3),
                Audience::Nobody,
                Audience::Everyone,
            ]
        );
        assert!(sees(Some(3), Audience::Connection(3)));
        assert!(!sees(Some(4), Audience::Connection(3)));
        assert!(sees(None, Audience::Connection(3)));
        assert!(!sees(None, Audience::Nobody));
    }

    #[test]
    fn levels_rank_from_debug_to_emergency() {
        assert!(rank(LoggingLevel::Error) > rank(LoggingLevel::Warning));
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
    }
}
