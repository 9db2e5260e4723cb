//! The least an MCP client can do over stdio, for the turns row: JSON-RPC lines written to the
//! server's stdin and read from its stdout, each parsed once as a `serde_json::Value`. It is to
//! MCP what the raw client is to the Jupyter protocol, so the ratio between the two counts the
//! server's cost alone, where the rmcp client's row adds rmcp's own client decoding (typed,
//! untagged enums) on the bench's side of the pipe.
//!
//! Spec: <https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#stdio>

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::Res;

/// A kernel-mcp server driven by JSON lines.
pub struct LineClient {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl LineClient {
    /// Start `bin` and complete the MCP handshake (`initialize`, `notifications/initialized`).
    pub async fn spawn(bin: &Path) -> Res<LineClient> {
        let mut child = Command::new(bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut c = LineClient {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
        };
        let version = serde_json::to_value(rmcp::model::ProtocolVersion::LATEST)?;
        c.request(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "kernel-mcp-bench-line-client", "version": "0"},
            }),
        )
        .await?;
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(c)
    }

    async fn send(&mut self, message: &Value) -> Res<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        Ok(())
    }

    /// One request; its `result`. Errors: a JSON-RPC error, or the server's stdout ended.
    async fn request(&mut self, method: &str, params: Value) -> Res<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let line = self
                .lines
                .next_line()
                .await?
                .ok_or("the server closed its stdout")?;
            let mut message: Value = serde_json::from_str(&line)?;
            // Notifications (logging, list changes) have no id; answers to others are not ours.
            if message["id"].as_u64() != Some(id) {
                continue;
            }
            if let Some(e) = message.get("error") {
                return Err(format!("{method}: {e}").into());
            }
            return Ok(message["result"].take());
        }
    }

    /// `tools/call name(arguments)`; the result's `structuredContent`. Errors: a JSON-RPC
    /// error or a tool error (`isError`).
    pub async fn call(&mut self, name: &str, arguments: Value) -> Res<Value> {
        let mut r = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        if r["isError"] == true {
            return Err(format!("{name}: {}", r["content"]).into());
        }
        Ok(r["structuredContent"].take())
    }

    /// `create_session` of `kernel`, then wait (up to 120 s) until it is idle.
    pub async fn create(&mut self, session: &str, kernel: &str) -> Res<()> {
        self.call(
            "create_session",
            json!({"session_id": session, "kernel": kernel}),
        )
        .await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let info = self
                .call("get_session", json!({"session_id": session}))
                .await?;
            if info["status"] == "idle" {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("session {session} not idle after 120 s: {info}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `execute 1+1` in `session`, checked to answer `2`.
    pub async fn execute_1p1(&mut self, session: &str) -> Res<()> {
        let s = self
            .call("execute", json!({"session_id": session, "code": "1+1"}))
            .await?;
        if s["status"] != "ok" || s["result"] != "2" {
            return Err(format!("execute 1+1 (line client): {s}").into());
        }
        Ok(())
    }

    /// Close stdin (the server then shuts its kernels down and exits); kill it after 30 s.
    pub async fn close(self) {
        let LineClient {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        if tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}
