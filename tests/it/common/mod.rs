//! Test harness: drive the real `kernel-mcp` binary over stdio with the rmcp client,
//! against real ipykernel kernels from the project's `.venv`.
//!
//! Every test starts its own server ([`Server::start`]), talks to it with [`Server::call`]
//! and ends with [`Server::shutdown`], which closes the client (the server sees stdin EOF
//! and shuts its kernels down) and waits for the server process to exit. When a test
//! panics before that, `Drop` prints the server's stderr (logged at `kernel_mcp=debug`) and
//! sends the server SIGTERM so it still cleans up its kernels.
//!
//! Set `KERNEL_MCP_TEST_STDERR=1` to print the server's stderr at every shutdown.
//!
//! Set `KERNEL_MCP_TEST_SHARED=1` to run the same tests in shared mode: each server is then a
//! relay (`serve --shared`) to a service of its own (socket in its temp dir), which
//! [`Server::shutdown`] (or `Drop`) stops after the relay.
//!
//! Deadlines here only turn a hang into a failure: they are generous on purpose. Tests
//! that pin a bound from the acceptance list measure it themselves.

#![allow(dead_code)] // each test crate uses a different subset of the helpers

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// Upper bound for one tool call: proves "answers instead of hanging", nothing more.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The rmcp client type the tests use (`()` = a no-op client handler).
pub type Client = RunningService<RoleClient, ()>;

/// `<crate>/.venv`, the environment `make test` prepares (ipykernel, matplotlib…).
pub fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv")
}

/// Panics with instructions unless `.venv/bin/python` can import ipykernel. Checked once
/// per test binary.
pub fn require_venv() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = CHECKED.get_or_init(|| {
        let python = venv().join("bin").join("python");
        let ok = std::process::Command::new(&python)
            .args(["-c", "import ipykernel"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{} cannot import ipykernel: run `make test` (it creates .venv with ipykernel, \
                 jupyter_client, matplotlib) instead of plain `cargo test`",
                python.display()
            ))
        }
    });
    if let Err(msg) = outcome {
        panic!("{msg}");
    }
}

/// A running `kernel-mcp` with a connected rmcp client.
pub struct Server {
    client: Option<Client>,
    /// Every call's structuredContent is validated against these.
    schemas: schemas::OutputSchemas,
    pid: u32,
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

/// True when the tests run in shared mode (`KERNEL_MCP_TEST_SHARED=1`).
pub fn shared_mode() -> bool {
    std::env::var_os("KERNEL_MCP_TEST_SHARED").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The socket of the shared-mode service of the server in `workdir`.
fn shared_socket(workdir: &Path) -> PathBuf {
    workdir.join("svc").join("service.sock")
}

/// Stop the shared-mode service of the server in `workdir`, if one runs.
fn stop_shared_service(workdir: &Path) {
    if !shared_mode() {
        return;
    }
    for pid in service::service_processes(&shared_socket(workdir)) {
        terminate(pid, Duration::from_secs(10));
    }
}

/// SIGTERM `pid`, wait up to `grace` for it to go, then SIGKILL it. Blocking (for `Drop`).
pub fn terminate(pid: u32, grace: Duration) {
    use nix::sys::signal::{Signal, kill};
    let target = nix::unistd::Pid::from_raw(pid as i32);
    let _ = kill(target, Signal::SIGTERM);
    let start = Instant::now();
    while pid_alive(pid) && start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    if pid_alive(pid) {
        eprintln!("kernel-mcp (pid {pid}) ignored SIGTERM for {grace:?}; sending SIGKILL");
        let _ = kill(target, Signal::SIGKILL);
    }
}

/// The server command: the cargo-built binary, the venv, debug logs, a temp working dir,
/// every tool (`KERNEL_MCP_TOOLS=all`; in shared mode the service gives the relay its
/// default toolset).
pub fn server_command(workdir: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
    cmd.env("VIRTUAL_ENV", venv())
        .env("KERNEL_MCP_LOG", "kernel_mcp=debug")
        .env_remove("CONDA_PREFIX")
        .env_remove("KERNEL_MCP_PYTHON_ENV")
        .env_remove("KERNEL_MCP_TOKEN")
        .env_remove("KERNEL_MCP_GATEWAY_TOKEN")
        // Every tool (the suites call them all); toolsets.rs pins what each set lists with
        // `serve --tools NAME`, which wins over this.
        .env("KERNEL_MCP_TOOLS", "all")
        // History journals go to the test's temp dir, not the user's ~/.local/state.
        .env("XDG_STATE_HOME", workdir.join("state"))
        // Registered environments go there too, never into the user's ~/.config.
        .env("XDG_CONFIG_HOME", workdir.join("config"))
        .current_dir(workdir);
    cmd
}

/// A spawned server process, before the MCP client connects.
pub struct Spawned {
    pub transport: TokioChildProcess,
    pub pid: u32,
    /// Everything the server wrote to stderr so far (drained by a background task).
    pub stderr: Arc<Mutex<Vec<u8>>>,
    pub workdir: tempfile::TempDir,
}

/// Spawn `kernel-mcp` ([`server_command`] in a fresh temp dir, plus `env` and `args`) with
/// its stderr drained into a buffer. Panics (with the reason) when the venv is missing.
pub fn spawn_server(env: &[(&str, &std::ffi::OsStr)], args: &[&str]) -> Spawned {
    spawn_server_limited(env, args, None)
}

/// [`spawn_server`], with the server's file-size limit (RLIMIT_FSIZE, bytes) set when given.
pub fn spawn_server_limited(
    env: &[(&str, &std::ffi::OsStr)],
    args: &[&str],
    fsize: Option<u64>,
) -> Spawned {
    spawn_server_with(env, args, fsize, None)
}

/// [`spawn_server`], with the server's working directory `cwd` instead of its temp dir (the
/// temp dir still holds its state and config).
pub fn spawn_server_in(cwd: &Path, env: &[(&str, &std::ffi::OsStr)], args: &[&str]) -> Spawned {
    spawn_server_with(env, args, None, Some(cwd))
}

fn spawn_server_with(
    env: &[(&str, &std::ffi::OsStr)],
    args: &[&str],
    fsize: Option<u64>,
    cwd: Option<&Path>,
) -> Spawned {
    require_venv();
    let workdir = tempfile::tempdir().expect("create a temp dir for the server");
    let mut cmd = server_command(workdir.path());
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    if let Some(limit) = fsize {
        // SAFETY: setrlimit is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let lim = nix::libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if nix::libc::setrlimit(nix::libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args);
    if shared_mode() && !args.iter().any(|a| *a == "serve" || *a == "service") {
        // `serve`'s options work without the word, so `--shared` joins whatever was given.
        cmd.arg("--shared")
            .env("KERNEL_MCP_SOCKET", shared_socket(workdir.path()))
            .env("XDG_RUNTIME_DIR", workdir.path().join("xdg-run"));
    }
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kernel-mcp");
    let pid = transport.id().expect("server pid");
    let buf = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut stderr) = stderr {
        let buf = buf.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                buf.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
    }
    Spawned {
        transport,
        pid,
        stderr: buf,
        workdir,
    }
}

/// `structuredContent` of a result (panics when absent: every tool sets it).
pub fn structured(r: &CallToolResult) -> Value {
    r.structured_content
        .clone()
        .unwrap_or_else(|| panic!("result has no structuredContent: {}", dump(r)))
}

/// All text content blocks, joined by newlines.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The image content blocks: (mimeType, base64 data).
pub fn images(r: &CallToolResult) -> Vec<(String, String)> {
    r.content
        .iter()
        .filter_map(ContentBlock::as_image)
        .map(|i| (i.mime_type.clone(), i.data.clone()))
        .collect()
}

/// `isError` (absent = false).
pub fn is_error(r: &CallToolResult) -> bool {
    r.is_error.unwrap_or(false)
}

/// The whole result as JSON text (for assertions over everything, and messages).
pub fn dump(r: &CallToolResult) -> String {
    serde_json::to_string(r).unwrap_or_else(|e| format!("<unserializable result: {e}>"))
}

/// True when `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: comm may contain spaces and parentheses, the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// The entries of the runtime directory `dir` that hold a kernel's key or a session's broker
/// socket (connection, endpoint and limit files, `broker-*` directories).
pub fn kernel_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("kernel-mcp-") || n.starts_with("broker-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Live (non-zombie) descendants of `pid`, from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                continue;
            };
            // Fields after the comm: state, ppid, …
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((child, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        for &(c, pp) in &parent_of {
            if pp == p && !found.contains(&c) {
                found.push(c);
            }
        }
        i += 1;
    }
    found.remove(0);
    found.retain(|&p| pid_alive(p));
    found
}

/// Poll `cond` every 100 ms until it holds (true) or `limit` passes (false).
/// Poll `cond` every 100 ms until it holds (true) or `limit` passes (false).
/// [`wait_until`] for a condition that awaits: polls `cond` every 200 ms until it holds or
/// `limit` passes; returns whether it held.
pub async fn wait_until_async<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `result["error"]["ename"]` as a str ("" when absent).
pub fn ename(result: &Value) -> &str {
    result["error"]["ename"].as_str().unwrap_or("")
}

/// `result["status"]` as a str ("" when absent).
pub fn status(result: &Value) -> &str {
    result["status"].as_str().unwrap_or("")
}

pub mod broker;
pub mod cli;
pub mod collab;
pub mod fake;
pub mod gateways;
pub mod history;
pub mod http;
pub mod jupyter;
pub mod kernels;
pub mod oauth;
pub mod person;
pub mod phoenix;
pub mod raw;
pub mod schemas;
pub mod scripted;
pub mod service;
pub mod skip;
pub use skip::skip;
pub mod trust;
