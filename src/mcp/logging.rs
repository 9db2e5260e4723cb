//! Server log messages to MCP clients that asked for them (`logging/setLevel`).
//!
//! [`McpLogLayer`] is a `tracing` layer: each event of this crate (target `kernel_mcp…`) at
//! debug or above becomes a short record pushed into a bounded channel with `try_send`, so
//! logging never blocks and a slow client costs dropped records, not memory. One forwarder
//! task (started by the first `logging/setLevel`, on the MCP runtime) sends each record as
//! `notifications/message` to every subscribed peer whose level it meets; a peer whose
//! connection is closed is dropped. rmcp's own events are never forwarded (no feedback
//! loop when sending a notification logs).
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
use tracing::{Event, Level};
use tracing_subscriber::layer::{Context, Layer};

/// Records waiting for the forwarder; more are dropped.
const QUEUE: usize = 256;
/// Longest message forwarded (bytes); the rest is cut.
const MAX_MESSAGE_BYTES: usize = 2048;
/// Most peers subscribed at once; the oldest is dropped for a new one.
const MAX_PEERS: usize = 64;

/// One log event, as forwarded.
#[derive(Debug, Clone)]
struct Record {
    level: LoggingLevel,
    logger: String,
    message: String,
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
    connection: u64,
    peer: Peer<RoleServer>,
    level: LoggingLevel,
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

/// Send `connection`'s `peer` every record at `level` or above from now on (a later call
/// replaces the level). Must be called on the runtime MCP is served on (the forwarder starts
/// there).
pub fn subscribe(connection: u64, peer: Peer<RoleServer>, level: LoggingLevel) {
    let hub = hub();
    {
        let mut peers = hub.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.retain(|s| !s.peer.is_transport_closed());
        if let Some(s) = peers.iter_mut().find(|s| s.connection == connection) {
            s.level = level;
            s.peer = peer;
        } else {
            if peers.len() >= MAX_PEERS {
                peers.remove(0);
            }
            peers.push(Subscriber {
                connection,
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
                .filter(|s| rank(r.level) >= rank(s.level))
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

impl<S: tracing::Subscriber> Layer<S> for McpLogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
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
        });
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

    #[test]
    fn levels_rank_from_debug_to_emergency() {
        assert!(rank(LoggingLevel::Error) > rank(LoggingLevel::Warning));
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
    }
}
