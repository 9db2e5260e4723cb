//! The [`Server`] a test talks to: a running `kernel-mcp` with a connected rmcp client,
//! its tool calls bounded by [`CALL_TIMEOUT`] and their structured results checked against
//! the tools' output schemas, and its end (`shutdown`, or `Drop` after a panic) that leaves
//! no server, kernel or shared-mode service behind.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::spawn::stop_shared_service;
use super::{
    Spawned, is_error, pid_alive, schemas, spawn_server, structured, terminate, text, wait_until,
};

/// Upper bound for one tool call: proves "answers instead of hanging", nothing more.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The rmcp client type the tests use (`()` = a no-op client handler).
pub type Client = RunningService<RoleClient, ()>;

/// A running `kernel-mcp` with a connected rmcp client.
pub struct Server {
    /// `None` once shut down (`history::kill_server` takes it after a SIGKILL).
    pub(super) client: Option<Client>,
    /// Every call's structuredContent is validated against these.
    schemas: schemas::OutputSchemas,
    pub(super) pid: u32,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The server's (and so the kernels' default) working directory; removed on drop.
    workdir: tempfile::TempDir,
}

impl Server {
    /// Spawn the server with `VIRTUAL_ENV=<crate>/.venv` and debug logging, and initialize.
    pub async fn start() -> Server {
        Server::start_with_args(&[]).await
    }

    /// Like [`Server::start`], with extra command-line arguments for the server.
    pub async fn start_with_args(args: &[&str]) -> Server {
        Server::start_with(&[], args).await
    }

    /// Like [`Server::start`], with extra environment variables and arguments for the server.
    pub async fn start_with(env: &[(&str, &std::ffi::OsStr)], args: &[&str]) -> Server {
        Server::start_spawned(spawn_server(env, args)).await
    }

    /// Initialize a client on an already spawned server.
    pub async fn start_spawned(spawned: Spawned) -> Server {
        let buf = spawned.stderr.clone();
        let client = match tokio::time::timeout(CALL_TIMEOUT, ().serve(spawned.transport)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => panic!(
                "MCP initialize failed: {e}\n--- server stderr ---\n{}",
                String::from_utf8_lossy(&buf.lock().unwrap())
            ),
            Err(_) => panic!(
                "MCP initialize timed out\n--- server stderr ---\n{}",
                String::from_utf8_lossy(&buf.lock().unwrap())
            ),
        };
        let tools = match tokio::time::timeout(CALL_TIMEOUT, client.list_all_tools()).await {
            Ok(Ok(t)) => t,
            other => panic!(
                "tools/list failed: {other:?}\n--- server stderr ---\n{}",
                String::from_utf8_lossy(&buf.lock().unwrap())
            ),
        };
        Server {
            client: Some(client),
            schemas: schemas::OutputSchemas::compile(&tools),
            pid: spawned.pid,
            stderr: buf,
            workdir: spawned.workdir,
        }
    }

    /// The server process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's working directory (a fresh temp dir).
    pub fn workdir(&self) -> &Path {
        self.workdir.path()
    }

    /// The connected client (for `peer_info`, `list_all_tools`…).
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("server already shut down")
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Call a tool; a JSON-RPC error or a hang (> [`CALL_TIMEOUT`]) fails the test.
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        match self.try_call(tool, args.clone()).await {
            Ok(r) => r,
            Err(e) => panic!(
                "{tool}({args}) failed with a JSON-RPC/transport error: {e}\n--- server stderr ---\n{}",
                self.stderr_tail()
            ),
        }
    }

    /// Call a tool and return the JSON-RPC outcome; only a hang, or a structuredContent that
    /// does not match the tool's outputSchema, fails the test.
    pub async fn try_call(&self, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        let Value::Object(map) = args else {
            panic!("tool arguments must be a JSON object, got {args}");
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(map.clone());
        match tokio::time::timeout(CALL_TIMEOUT, self.client().call_tool(params)).await {
            Ok(r) => {
                if let Ok(result) = &r {
                    self.schemas.check(tool, result);
                }
                r
            }
            Err(_) => panic!(
                "{tool}({}) did not answer within {CALL_TIMEOUT:?}\n--- server stderr ---\n{}",
                Value::Object(map),
                self.stderr_tail()
            ),
        }
    }

    /// `execute` in `session` and return the structured result.
    pub async fn exec(&self, session: &str, code: &str) -> Value {
        let r = self
            .call("execute", json!({"session_id": session, "code": code}))
            .await;
        structured(&r)
    }

    /// `create_session` with this id (default kernel); returns SessionInfo, panics on error.
    pub async fn create_session(&self, session: &str) -> Value {
        self.create_session_with(json!({"session_id": session}))
            .await
    }

    /// `create_session` on kernelspec `kernel`; panics (with the server's words) when it fails.
    pub async fn create_session_on(&self, session: &str, kernel: &str) -> Value {
        self.create_session_with(json!({"session_id": session, "kernel": kernel}))
            .await
    }

    async fn create_session_with(&self, args: Value) -> Value {
        let r = self.call("create_session", args.clone()).await;
        assert!(
            !is_error(&r),
            "create_session({args}) failed: {}\n--- server stderr ---\n{}",
            text(&r),
            self.stderr_tail()
        );
        structured(&r)
    }

    /// The kernel pid of a session, from `get_session`.
    pub async fn kernel_pid(&self, session: &str) -> u32 {
        let info = structured(
            &self
                .call("get_session", json!({"session_id": session}))
                .await,
        );
        info["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("get_session({session}) has no pid: {info}")) as u32
    }

    /// `destroy_session`, asserting it succeeded.
    pub async fn destroy(&self, session: &str) {
        let r = self
            .call("destroy_session", json!({"session_id": session}))
            .await;
        assert!(!is_error(&r), "destroy_session({session}): {}", text(&r));
    }

    /// The last ~8 KiB of the server's stderr (for failure messages).
    pub fn stderr_tail(&self) -> String {
        let s = self.stderr();
        let start = s.len().saturating_sub(8192);
        let start = (start..=s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_string()
    }

    /// Close the client (the server sees stdin EOF, shuts its kernels down and exits) and
    /// wait for the server process to be gone. rmcp's transport close waits 3 s, then
    /// SIGTERMs, waits 3 s, then kills.
    pub async fn shutdown(mut self) {
        if std::env::var_os("KERNEL_MCP_TEST_STDERR").is_some() {
            eprintln!(
                "--- kernel-mcp (pid {}) stderr ---\n{}",
                self.pid,
                self.stderr()
            );
        }
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(CALL_TIMEOUT, client.cancel()).await;
        }
        let pid = self.pid;
        if !wait_until(Duration::from_secs(15), || !pid_alive(pid)).await {
            let tail = self.stderr_tail();
            terminate(pid, Duration::from_secs(2));
            panic!(
                "kernel-mcp (pid {pid}) still alive 15 s after its stdin closed\n--- server stderr ---\n{tail}"
            );
        }
        stop_shared_service(self.workdir.path());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.client.is_none() {
            return; // shut down properly
        }
        if std::thread::panicking() {
            eprintln!(
                "--- kernel-mcp (pid {}) stderr ---\n{}\n--- end of kernel-mcp stderr ---",
                self.pid,
                self.stderr()
            );
        }
        // The test ended without shutdown(): let the server clean its kernels up itself,
        // and kill it if it cannot (a wedged server must not outlive the test run; its
        // kernels then die of their parent-death signal).
        terminate(self.pid, Duration::from_secs(5));
        stop_shared_service(self.workdir.path());
    }
}
