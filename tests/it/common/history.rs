//! Helpers for the history, export and session-tool tests (`tests/it/history_files.rs`,
//! `tests/it/history_export.rs`, `tests/it/session_tools/`): a server whose history journal
//! lives in a per-test `XDG_STATE_HOME`, killing a server with SIGKILL, running the project's
//! Python on exported files, and temp directories.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::*;

/// A temp `XDG_STATE_HOME` (journals under `<dir>/kernel-mcp/history/`), so tests neither
/// write into `~` nor see each other's journals. Keep it alive as long as its servers.
pub struct StateHome {
    dir: tempfile::TempDir,
}

impl StateHome {
    pub fn new() -> StateHome {
        StateHome {
            dir: tempfile::tempdir().expect("temp dir for XDG_STATE_HOME"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where the server writes its journals.
    pub fn journal_dir(&self) -> PathBuf {
        self.path().join("kernel-mcp").join("history")
    }

    /// The journal files written so far.
    pub fn journals(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.journal_dir())
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// Start a server with `XDG_STATE_HOME` set to this dir.
    pub async fn start_server(&self) -> Server {
        start_with_env(&[("XDG_STATE_HOME", self.path().as_os_str())], &[]).await
    }
}

impl Default for StateHome {
    fn default() -> Self {
        StateHome::new()
    }
}

/// Like [`Server::start_with_args`], with extra environment variables for the server.
pub async fn start_with_env(env: &[(&str, &OsStr)], args: &[&str]) -> Server {
    Server::start_with(env, args).await
}

/// SIGKILL the server (no cleanup of its own: its kernels must die of their parent-death
/// signal) and wait until the process is gone. Returns the server's stderr.
pub async fn kill_server(mut server: Server) -> String {
    use nix::sys::signal::{Signal, kill};
    let pid = server.pid;
    let _ = kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    let gone = wait_until(Duration::from_secs(10), || !pid_alive(pid)).await;
    let stderr = server.stderr();
    // Dropping the client reaps the child; `Drop for Server` then has nothing left to do.
    drop(server.client.take());
    assert!(gone, "kernel-mcp (pid {pid}) survived SIGKILL for 10 s");
    stderr
}

/// `<crate>/.venv/bin/python`.
pub fn venv_python() -> PathBuf {
    venv().join("bin").join("python")
}

/// Run `.venv/bin/python args…` in `cwd`; returns (success, stdout, stderr).
pub fn run_python(args: &[&OsStr], cwd: &Path) -> (bool, String, String) {
    let out = std::process::Command::new(venv_python())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run .venv/bin/python");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `nbformat.validate` the notebook at `path` with the project's Python; panics with
/// nbformat's complaint when it is invalid.
pub fn assert_valid_notebook(path: &Path) {
    let code = "import sys, nbformat\n\
                nb = nbformat.read(sys.argv[1], as_version=4)\n\
                nbformat.validate(nb)\n\
                print('valid', nb.nbformat, nb.nbformat_minor, len(nb.cells))";
    let (ok, out, err) = run_python(
        &[OsStr::new("-c"), OsStr::new(code), path.as_os_str()],
        path.parent().unwrap_or(Path::new("/")),
    );
    assert!(
        ok && out.starts_with("valid 4"),
        "nbformat.validate rejected {}:\nstdout: {out}\nstderr: {err}\n--- notebook ---\n{}",
        path.display(),
        std::fs::read_to_string(path).unwrap_or_default()
    );
}

/// The `error_code` of a tool error result ("" when it is not one).
pub fn error_code(r: &CallToolResult) -> String {
    if !is_error(r) {
        return String::new();
    }
    r.structured_content
        .as_ref()
        .and_then(|v| v["error_code"].as_str())
        .unwrap_or("")
        .to_string()
}

/// `create_session` with arbitrary arguments; panics (with the server's words) on error.
pub async fn create_session_with(server: &Server, args: Value) -> Value {
    let r = server.call("create_session", args.clone()).await;
    assert!(
        !is_error(&r),
        "create_session({args}) failed: {}\n--- server stderr ---\n{}",
        text(&r),
        server.stderr_tail()
    );
    structured(&r)
}

/// `execute` that must end `ok`; returns the structured result.
pub async fn exec_ok(server: &Server, session: &str, code: &str) -> Value {
    let r = server.exec(session, code).await;
    assert_eq!(
        status(&r),
        "ok",
        "execute({code:?}) in {session} did not end ok: {r}"
    );
    r
}

/// `get_history` with optional start/end; returns (structured, text), panics on a tool error.
pub async fn history(
    server: &Server,
    session: &str,
    start: Option<i64>,
    end: Option<i64>,
) -> (Value, String) {
    let mut args = json!({"session_id": session});
    if let Some(s) = start {
        args["start"] = json!(s);
    }
    if let Some(e) = end {
        args["end"] = json!(e);
    }
    let r = server.call("get_history", args.clone()).await;
    assert!(
        !is_error(&r),
        "get_history({args}) failed: {}\n--- server stderr ---\n{}",
        text(&r),
        server.stderr_tail()
    );
    (structured(&r), text(&r))
}

/// The `code` of each entry of a `get_history` result.
pub fn codes(history: &Value) -> Vec<String> {
    history["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("get_history has no entries[]: {history}"))
        .iter()
        .map(|e| e["code"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The `index` of each entry of a `get_history` result.
pub fn indices(history: &Value) -> Vec<i64> {
    history["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("get_history has no entries[]: {history}"))
        .iter()
        .map(|e| e["index"].as_i64().unwrap_or(-1))
        .collect()
}

/// A fresh temp directory (removed when dropped).
pub fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The JSON document at `path`.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{text}", path.display()))
}

/// The notebook's outputs, per cell, as `output_type` strings.
pub fn output_types(nb: &Value) -> Vec<Vec<String>> {
    nb["cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no cells: {nb}"))
        .iter()
        .map(|c| {
            c["outputs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| o["output_type"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .collect()
}
