//! Helpers for the execution-trust tests (issue 3): a client that counts progress
//! notifications, stream paging, and temporary kernelspecs.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::{CALL_TIMEOUT, Server, pid_alive, spawn_server, structured, terminate};

/// A client handler that records every `notifications/progress` it receives.
#[derive(Clone, Default)]
pub struct Counting {
    pub progress: Arc<AtomicUsize>,
    pub messages: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Counting {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.progress.fetch_add(1, Ordering::SeqCst);
        self.messages
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
        std::future::ready(())
    }
}

/// A running `kernel-mcp` whose client is a [`Counting`] handler.
pub struct ProgressServer {
    client: Option<RunningService<RoleClient, Counting>>,
    pub handler: Counting,
    pid: u32,
    stderr: Arc<Mutex<Vec<u8>>>,
    _workdir: tempfile::TempDir,
}

impl ProgressServer {
    pub async fn start() -> ProgressServer {
        let spawned = spawn_server(&[], &[]);
        let (transport, pid, buf, workdir) = (
            spawned.transport,
            spawned.pid,
            spawned.stderr,
            spawned.workdir,
        );
        let handler = Counting::default();
        let client = tokio::time::timeout(CALL_TIMEOUT, handler.clone().serve(transport))
            .await
            .expect("MCP initialize timed out")
            .expect("MCP initialize failed");
        ProgressServer {
            client: Some(client),
            handler,
            pid,
            stderr: buf,
            _workdir: workdir,
        }
    }

    pub fn stderr_tail(&self) -> String {
        let s = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
        let start = s.len().saturating_sub(8192);
        let start = (start..=s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_string()
    }

    pub fn progress_count(&self) -> usize {
        self.handler.progress.load(Ordering::SeqCst)
    }

    /// Call a tool through `call_tool` (the rmcp client attaches a progress token to every
    /// request it sends).
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(map) = args else {
            panic!("tool arguments must be a JSON object");
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(map);
        let client = self.client.as_ref().expect("shut down");
        match tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => panic!(
                "{tool} failed: {e}\n--- server stderr ---\n{}",
                self.stderr_tail()
            ),
            Err(_) => panic!("{tool} hung\n--- server stderr ---\n{}", self.stderr_tail()),
        }
    }

    pub async fn shutdown(mut self) {
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(CALL_TIMEOUT, client.cancel()).await;
        }
        let pid = self.pid;
        if !super::wait_until(Duration::from_secs(15), || !pid_alive(pid)).await {
            terminate(pid, Duration::from_secs(2));
            panic!("kernel-mcp (pid {pid}) still alive 15 s after its stdin closed");
        }
    }
}

impl Drop for ProgressServer {
    fn drop(&mut self) {
        if self.client.is_none() {
            return;
        }
        if std::thread::panicking() {
            eprintln!("--- kernel-mcp stderr ---\n{}", self.stderr_tail());
        }
        terminate(self.pid, Duration::from_secs(5));
    }
}

/// Read a whole stream of a run through `get_execution(run_id, stream, offset, limit)`.
/// Returns the concatenated text, the number of pages and the reported `total_bytes`.
pub async fn page_all(
    server: &Server,
    run_id: &str,
    stream: &str,
    limit: usize,
) -> (String, usize, u64) {
    let mut text = String::new();
    let mut offset = 0u64;
    let mut pages = 0;
    let mut total: u64;
    loop {
        let r = server
            .call(
                "get_execution",
                json!({"run_id": run_id, "stream": stream, "offset": offset, "limit": limit}),
            )
            .await;
        let v = structured(&r);
        let chunk = v["text"]
            .as_str()
            .unwrap_or_else(|| panic!("page without text: {v}"));
        total = v["total_bytes"].as_u64().unwrap_or(0);
        if chunk.is_empty() {
            break;
        }
        assert!(
            chunk.len() <= limit,
            "page of {} bytes exceeds limit {limit}",
            chunk.len()
        );
        text.push_str(chunk);
        pages += 1;
        let next = v["next_offset"]
            .as_u64()
            .unwrap_or_else(|| panic!("page without next_offset: {v}"));
        assert!(
            next > offset,
            "next_offset does not advance: {offset} -> {next}"
        );
        offset = next;
        assert!(pages < 10_000, "paging does not end");
    }
    (text, pages, total)
}

/// Write `<dir>/<name>/kernel.json` with this argv (language python).
pub fn write_kernelspec(dir: &Path, name: &str, argv: &[&str]) {
    let spec_dir = dir.join(name);
    std::fs::create_dir_all(&spec_dir).expect("create kernelspec dir");
    let spec = json!({"argv": argv, "display_name": name, "language": "python"});
    std::fs::write(spec_dir.join("kernel.json"), spec.to_string()).expect("write kernel.json");
}
