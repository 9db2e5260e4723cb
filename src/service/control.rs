//! `kernel-mcp service status | stop | restart`: the service's control line.
//!
//! A client that wants the service's status, or wants it stopped, sends one line as the
//! first thing on a fresh connection, `{"kernel-mcp-control": {"op": "status" | "stop"}}`,
//! and reads one answer line, `{"kernel-mcp-control": ANSWER}`; the service then hangs up.
//! Only the service's own user (the owner principal, who has the admin access) may send one:
//! a peer admitted with `--allow-uid` gets `{"ok": false, "error": …}`, the same as for any
//! other refusal. The control line is not MCP, like the hello beside it ([`super::hello`]).
//!
//! `status` answers [`Status`]: pid, start time and uptime, socket, the floors in force, the
//! *names* of the environment variables the service started with (never a value) and its
//! sessions. `stop` answers [`Stopping`] (with the service's own arguments and working
//! directory, so that `restart` can start it again as it was, in the caller's environment),
//! then tells every connected MCP client in a `notifications/message` and ends the service
//! as a signal would (every kernel shut down; the socket and the files beside it removed).
//! Docs: docs/cli.md ("kernel-mcp service"), docs/serving.md.

use std::sync::Mutex;
use std::time::Instant;

use rmcp::RoleServer;
use rmcp::service::Peer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::registry::Registry;
use crate::registry::floors::Floors;

/// The key of a control line and of its answer.
pub const KEY: &str = "kernel-mcp-control";
/// Most MCP clients told at once that the service stops (one per connection).
const MAX_TOLD: usize = 256;

/// What a control line asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Describe the running service ([`Status`]).
    Status,
    /// End the service gracefully ([`Stopping`]).
    Stop,
}

/// The service's answer to `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    /// When the service started (RFC 3339, UTC).
    pub started_at: String,
    /// Seconds since then.
    pub uptime_s: u64,
    pub socket: String,
    /// The floors every session gets at least (`--sandbox`, `--max-memory-mib`).
    pub floors: Floors,
    /// The names (never the values) of the environment variables it started with, sorted.
    pub environment: Vec<String>,
    /// Open connections on the socket.
    pub connections: usize,
    /// Every live session, whoever owns it.
    pub sessions: Vec<SessionLine>,
    pub version: String,
}

/// One session in [`Status`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionLine {
    /// The session id as its principal names it (`default` for a connection's own).
    pub session_id: String,
    /// The principal it belongs to (`None`: the service's own user).
    pub owner: Option<String>,
    /// For a connection's own `default`: that connection's number.
    pub connection: Option<u64>,
    pub kernel: String,
    pub status: String,
    pub pid: Option<u32>,
    pub memory_mib: Option<u64>,
}

/// The service's answer to `stop`, sent before it stops.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stopping {
    pub pid: u32,
    /// The service's arguments after the executable (for `restart`).
    pub args: Vec<String>,
    /// The service's working directory (for `restart`: relative paths keep their meaning).
    pub cwd: String,
}

/// What the service knows about itself from its start, and how to reach its clients.
#[derive(Debug)]
pub struct Facts {
    started: Instant,
    socket: String,
    environment: Vec<String>,
    args: Vec<String>,
    cwd: String,
    clients: Mutex<Vec<(u64, Peer<RoleServer>)>>,
    next_client: std::sync::atomic::AtomicU64,
}

impl Facts {
    /// Record the process's start (call when the service starts): its environment's names,
    /// its arguments and working directory.
    pub fn now(socket: &std::path::Path) -> Facts {
        let mut environment: Vec<String> = std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        environment.sort();
        environment.dedup();
        Facts {
            started: Instant::now(),
            socket: socket.display().to_string(),
            environment,
            args: std::env::args_os()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| "/".into()),
            clients: Mutex::new(Vec::new()),
            next_client: Default::default(),
        }
    }

    /// Keep `peer` to tell it when the service stops; returns its number for [`Self::forget`].
    pub fn remember(&self, peer: Peer<RoleServer>) -> u64 {
        let n = self
            .next_client
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut clients = lock(&self.clients);
        if clients.len() < MAX_TOLD {
            clients.push((n, peer));
        }
        n
    }

    /// The client `n` has gone.
    pub fn forget(&self, n: u64) {
        lock(&self.clients).retain(|(m, _)| *m != n);
    }

    /// The status of the service of `registry` now.
    pub async fn status(&self, registry: &Registry, connections: usize) -> Status {
        let instance = crate::instance::current();
        Status {
            pid: std::process::id(),
            started_at: instance.started_at.clone(),
            uptime_s: self.started.elapsed().as_secs(),
            socket: self.socket.clone(),
            floors: registry.server_floors(),
            environment: self.environment.clone(),
            connections,
            sessions: overview(registry).await,
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// The answer to `stop`.
    pub fn stopping(&self) -> Stopping {
        Stopping {
            pid: std::process::id(),
            args: self.args.clone(),
            cwd: self.cwd.clone(),
        }
    }

    /// Tell every connected MCP client `why` the service stops (a warning
    /// `notifications/message`, logger `kernel-mcp`), each bounded to a second.
    pub async fn tell_clients(&self, why: &str) {
        #[allow(deprecated)] // rmcp marks the logging types deprecated (SEP-2577)
        let param = rmcp::model::LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Warning,
            Value::String(format!(
                "the kernel-mcp service is stopping ({why}): its sessions end now; a client that reconnects starts a new one"
            )),
        )
        .with_logger("kernel-mcp".to_string());
        let peers: Vec<Peer<RoleServer>> =
            lock(&self.clients).iter().map(|(_, p)| p.clone()).collect();
        let sends = peers.iter().map(|p| {
            let param = param.clone();
            async move {
                #[allow(deprecated)]
                let sent = p.notify_logging_message(param);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), sent).await;
            }
        });
        futures::future::join_all(sends).await;
    }
}

/// Every live session of `registry`, sorted by owner and id.
async fn overview(registry: &Registry) -> Vec<SessionLine> {
    let mut out = Vec::new();
    for (slot, handle) in registry.all_sessions() {
        if let Ok(info) = handle.call(crate::session::cmd::Info).await {
            out.push(SessionLine {
                session_id: slot.name().to_string(),
                owner: slot
                    .principal()
                    .filter(|o| !o.is_process())
                    .map(|o| o.to_string()),
                connection: slot.connection().map(|c| c.get()),
                kernel: info.kernel,
                status: info.status.as_str().to_string(),
                pid: info.pid,
                memory_mib: info.memory_mib,
            });
        }
    }
    out.sort_by(|a, b| (&a.owner, &a.session_id).cmp(&(&b.owner, &b.session_id)));
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The line that asks for `op`.
pub fn request(op: Op) -> Vec<u8> {
    let mut l = serde_json::to_vec(&serde_json::json!({ KEY: { "op": op } })).unwrap_or_default();
    l.push(b'\n');
    l
}

/// The op a connection's first line asks for, if it is a control line.
pub fn parse(line: &[u8]) -> Option<Op> {
    let v: Value = serde_json::from_slice(line).ok()?;
    serde_json::from_value(v.get(KEY)?.get("op")?.clone()).ok()
}

/// An answer line carrying `body` (merged with `"ok": true`).
pub fn answer(body: &impl Serialize) -> Vec<u8> {
    let mut value = serde_json::to_value(body).unwrap_or(Value::Null);
    if let Some(o) = value.as_object_mut() {
        o.insert("ok".into(), Value::Bool(true));
    }
    let mut l = serde_json::to_vec(&serde_json::json!({ KEY: value })).unwrap_or_default();
    l.push(b'\n');
    l
}

/// A refusal line saying `why`.
pub fn refusal(why: &str) -> Vec<u8> {
    let mut l = serde_json::to_vec(&serde_json::json!({ KEY: {"ok": false, "error": why} }))
        .unwrap_or_default();
    l.push(b'\n');
    l
}

/// A refusal read back from an answer line: the service's sentence saying why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The body of an answer line: `Ok(body)` for `"ok": true`, `Err(why)` for a refusal;
/// `None` for a line that is no answer (a service too old to know the control line).
pub fn parse_answer(line: &[u8]) -> Option<Result<Value, Refused>> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let body = v.get(KEY)?;
    match body.get("ok").and_then(Value::as_bool) {
        Some(true) => Some(Ok(body.clone())),
        _ => Some(Err(Refused(
            body.get("error")
                .and_then(Value::as_str)
                .unwrap_or("refused")
                .to_string(),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_line_parses_back_and_mcp_and_a_hello_do_not() {
        for op in [Op::Status, Op::Stop] {
            assert_eq!(parse(&request(op)), Some(op));
        }
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":0,"method":"initialize"}"#),
            None
        );
        assert_eq!(parse(br#"{"kernel-mcp-hello":{"floors":{}}}"#), None);
        assert_eq!(parse(br#"{"kernel-mcp-control":{"op":"reboot"}}"#), None);
    }

    #[test]
    fn an_answer_and_a_refusal_read_back() {
        let ok = parse_answer(&answer(&serde_json::json!({"pid": 7}))).unwrap();
        assert_eq!(ok.unwrap()["pid"], 7);
        let no = parse_answer(&refusal("only uid 0")).unwrap();
        assert_eq!(no.unwrap_err().to_string(), "only uid 0");
        assert!(parse_answer(b"{\"jsonrpc\":\"2.0\"}").is_none());
    }

    #[test]
    fn the_facts_hold_names_and_never_values() {
        let facts = Facts::now(std::path::Path::new("/s.sock"));
        assert!(facts.environment.iter().all(|n| !n.contains('=')));
        assert!(facts.environment.windows(2).all(|w| w[0] < w[1]));
    }
}
