//! A raw JSON-RPC client over the server's stdio: lines are written exactly when and in the
//! order the test says (the rmcp client sends each message from its own task, so its wire
//! order is not the call order), and responses are matched by id in any order.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::server_command;

/// A `kernel-mcp` driven with raw JSON-RPC lines.
pub struct RawClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// Responses read ahead of the one being waited for.
    seen: HashMap<i64, Value>,
    /// Notifications from the server, in arrival order.
    notifications: Vec<Value>,
    _workdir: tempfile::TempDir,
}

/// One `tools/call` request line (with its newline).
pub fn call_line(id: i64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
    .to_string()
        + "\n"
}

/// A 2026-07-28 `tools/call` line (no `initialize`: protocol version and capabilities in
/// `_meta`), with `extra` entries in `_meta` (a `traceparent`…).
pub fn stateless_call_line(id: i64, tool: &str, args: Value, extra: Value) -> String {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"}});
    if let (Some(m), Value::Object(x)) = (meta.as_object_mut(), extra) {
        m.extend(x);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args, "_meta": meta}})
    .to_string()
        + "\n"
}

impl RawClient {
    /// Spawn the server, `initialize` (id 0) and send `notifications/initialized`.
    pub async fn start() -> RawClient {
        RawClient::start_with(&[], &[]).await
    }

    /// [`RawClient::start`] with extra environment variables and arguments for the server
    /// (e.g. a relay to a test's service: `serve --shared` and its environment).
    pub async fn start_with(env: &[(&str, &std::ffi::OsStr)], args: &[&str]) -> RawClient {
        let mut client = RawClient::spawn(env, args);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"}}});
        client.write(&format!("{init}\n")).await;
        client.read(0).await;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        client.write(&format!("{initialized}\n")).await;
        client
    }

    /// The server, not initialized: a 2026-07-28 client sends each request with its `_meta`
    /// (see [`stateless_call_line`]).
    pub fn spawn(env: &[(&str, &std::ffi::OsStr)], args: &[&str]) -> RawClient {
        let workdir = tempfile::tempdir().unwrap();
        let mut cmd = server_command(workdir.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kernel-mcp");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        RawClient {
            child,
            stdin,
            lines,
            seen: HashMap::new(),
            notifications: Vec::new(),
            _workdir: workdir,
        }
    }

    /// The server's working directory (a fresh temp dir).
    pub fn workdir(&self) -> &std::path::Path {
        self._workdir.path()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or_default()
    }

    /// Write `text` (one or more complete lines) in one write.
    pub async fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(text.as_bytes())
            .await
            .expect("write to the server");
    }

    /// The response with `id` (waiting up to 60 s for each line).
    pub async fn read(&mut self, id: i64) -> Value {
        loop {
            if let Some(msg) = self.seen.remove(&id) {
                return msg;
            }
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("a response within 60 s")
                .expect("read stdout")
                .expect("server still running");
            let msg: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if let Some(n) = msg["id"].as_i64() {
                self.seen.insert(n, msg);
            } else if msg.get("method").is_some() {
                self.notifications.push(msg);
            }
        }
    }

    /// The first notification (seen so far or arriving within `limit`) that `pred` accepts.
    pub async fn notification(
        &mut self,
        limit: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(i) = self.notifications.iter().position(&pred) {
                return Some(self.notifications.remove(i));
            }
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .ok()?
                .ok()??;
            let msg: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if let Some(n) = msg["id"].as_i64() {
                self.seen.insert(n, msg);
            } else if msg.get("method").is_some() {
                self.notifications.push(msg);
            }
        }
    }

    /// Every notification seen so far (in arrival order), after reading what arrives within
    /// `limit`.
    pub async fn notifications_within(&mut self, limit: Duration) -> Vec<Value> {
        let _ = self.notification(limit, |_| false).await;
        self.notifications.clone()
    }

    /// Close stdin and wait (bounded) for the server to exit; true if it did.
    pub async fn close(mut self) -> bool {
        drop(self.stdin.take());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_ok()
    }
}
