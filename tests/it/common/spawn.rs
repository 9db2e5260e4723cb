//! The server process: the command every test server runs (the cargo-built binary, the
//! project's venv, debug logs, state and config in a temp dir), spawned with its stderr
//! drained into a buffer, and in shared mode (`KERNEL_MCP_TEST_SHARED=1`) turned into a
//! relay to a service of its own, which [`stop_shared_service`] stops.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use tokio::io::AsyncReadExt;

use super::{require_venv, service, terminate, venv};

/// True when the tests run in shared mode (`KERNEL_MCP_TEST_SHARED=1`).
pub fn shared_mode() -> bool {
    std::env::var_os("KERNEL_MCP_TEST_SHARED").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The socket of the shared-mode service of the server in `workdir`.
fn shared_socket(workdir: &Path) -> PathBuf {
    workdir.join("svc").join("service.sock")
}

/// Stop the shared-mode service of the server in `workdir`, if one runs.
pub(super) fn stop_shared_service(workdir: &Path) {
    if !shared_mode() {
        return;
    }
    for pid in service::service_processes(&shared_socket(workdir)) {
        terminate(pid, Duration::from_secs(10));
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
