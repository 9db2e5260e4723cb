//! The commands for people (`kernel-mcp exec`, `sessions`, `session`, `history`, `console`)
//! run as real processes against a [`TestService`] of the test's own: its socket, state dir
//! and runtime dir in the service's temp dir, the project's `.venv` for the kernels, and a
//! working directory of its own.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::service::TestService;
use super::{require_venv, venv};

/// Longest one short command may take: proves "no hang", nothing more.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

/// What a finished command left.
#[derive(Debug)]
pub struct Output {
    /// Exit status (None: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// `kernel-mcp ARGS` pointed at `svc`, run in `cwd`.
pub fn command(svc: &TestService, cwd: &Path) -> std::process::Command {
    require_venv();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
    cmd.env("VIRTUAL_ENV", venv())
        .env("XDG_CONFIG_HOME", cwd.join("config"))
        .env("NO_COLOR", "1")
        .env_remove("CONDA_PREFIX")
        .env_remove("KERNEL_MCP_PYTHON_ENV")
        .env_remove("KERNEL_MCP_TOOLS")
        .current_dir(cwd);
    for (k, v) in svc.env() {
        cmd.env(k, v);
    }
    cmd
}

/// Run `kernel-mcp ARGS` to its end with `stdin` as its input, within `deadline`.
pub async fn run_with(
    svc: &TestService,
    cwd: &Path,
    args: &[&str],
    stdin: Option<&str>,
    deadline: Duration,
) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut cmd: tokio::process::Command = command(svc, cwd).into();
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn kernel-mcp");
    if let Some(input) = stdin {
        let mut w = child.stdin.take().expect("stdin");
        w.write_all(input.as_bytes()).await.expect("write stdin");
        drop(w);
    }
    let out = tokio::time::timeout(deadline, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("kernel-mcp {args:?} did not finish within {deadline:?}"))
        .expect("wait for kernel-mcp");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `kernel-mcp ARGS` with no input, within [`COMMAND_DEADLINE`].
pub async fn run(svc: &TestService, cwd: &Path, args: &[&str]) -> Output {
    run_with(svc, cwd, args, None, COMMAND_DEADLINE).await
}
