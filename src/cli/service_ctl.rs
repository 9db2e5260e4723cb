//! `kernel-mcp service status | stop | restart`: a person's (or a script's) hold on the
//! running per-user service, through its control line ([`kernel_mcp::service::control`]).
//!
//! Each command connects only after the socket's directory and the listener's uid pass the
//! same checks as every client ([`relay::connect_trusted`]), and never starts a service that
//! is not running. `status` prints what the service says about itself (`--json`: the answer
//! as it is); `stop` asks it to stop and waits until its process is gone (every kernel shut
//! down, its socket removed); `restart` stops it and starts it again with the arguments and
//! working directory it had, in the caller's environment (the point: a service started with
//! a stale `PATH` or license variable gets the current ones).
//!
//! Exit status: 0 done; 1 no service runs on the socket, or it refused (another user's
//! service) or failed, with why on stderr; 2 usage.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kernel_mcp::service::control::{self, Op, Status, Stopping};
use kernel_mcp::service::paths::{ServicePaths, default_socket};
use kernel_mcp::service::relay;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Longest a command waits for the service's answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);
/// Longest `stop` waits for the process to be gone (kernels get 15 s, then the service's own
/// shutdown deadline).
const GONE_DEADLINE: Duration = Duration::from_secs(60);
/// Longest answer line read.
const MAX_ANSWER: u64 = 4 << 20;

/// `kernel-mcp service status | stop | restart`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ServiceCommand {
    /// Show the running service: pid, uptime, socket, floors, the names of the environment
    /// variables it started with (never their values) and its sessions. Exit 1 when none runs.
    Status {
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: Socket,
    },
    /// Stop the running service: clients are told, every kernel is shut down, and its socket
    /// and token file are removed. Exit 1 when none runs.
    Stop {
        #[command(flatten)]
        at: Socket,
    },
    /// Stop the running service and start it again with the same arguments, in this
    /// command's environment. Exit 1 when none runs (nothing is started).
    Restart {
        #[command(flatten)]
        at: Socket,
    },
}

/// The socket of the service a control command talks to.
#[derive(Debug, Clone, clap::Args)]
pub struct Socket {
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// Why a control command failed (all exit 1).
#[derive(Debug, thiserror::Error)]
enum CtlError {
    #[error("no kernel-mcp service runs on {0}")]
    NotRunning(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
}

/// Run `command` against the service on `socket` (the `service` command's own `--socket`
/// when the subcommand names none).
pub fn run(
    command: ServiceCommand,
    socket: Option<PathBuf>,
    rt: &tokio::runtime::Runtime,
) -> ExitCode {
    let (ServiceCommand::Status { at, .. }
    | ServiceCommand::Stop { at }
    | ServiceCommand::Restart { at }) = &command;
    let paths = ServicePaths::new(at.socket.clone().or(socket).unwrap_or_else(default_socket));
    let outcome = rt.block_on(async {
        match command {
            ServiceCommand::Status { json, .. } => status(&paths, json).await,
            ServiceCommand::Stop { .. } => stop(&paths).await.map(|s| {
                super::client::out(&format!(
                    "stopped the kernel-mcp service (pid {}) on {}\n",
                    s.pid,
                    paths.socket.display()
                ));
            }),
            ServiceCommand::Restart { .. } => restart(&paths).await,
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernel-mcp service: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Send `op` to the service of `paths` and read its answer's body.
async fn ask(paths: &ServicePaths, op: Op) -> Result<Value, CtlError> {
    let not_running = || CtlError::NotRunning(paths.socket.display().to_string());
    let mut stream = relay::connect_trusted(paths)
        .await
        .map_err(|e| CtlError::Failed(e.to_string()))?
        .ok_or_else(not_running)?;
    let exchange = async {
        stream.write_all(&control::request(op)).await?;
        let mut line = Vec::new();
        tokio::io::BufReader::new(&mut stream)
            .take(MAX_ANSWER)
            .read_until(b'\n', &mut line)
            .await?;
        Ok::<_, std::io::Error>(line)
    };
    let line = match tokio::time::timeout(ANSWER_DEADLINE, exchange).await {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => return Err(CtlError::Failed(format!("talking to the service: {e}"))),
        Err(_) => {
            return Err(CtlError::Failed(format!(
                "the service did not answer within {} s",
                ANSWER_DEADLINE.as_secs()
            )));
        }
    };
    match control::parse_answer(&line) {
        Some(Ok(body)) => Ok(body),
        Some(Err(control::Refused(why))) => Err(CtlError::Refused(why)),
        None => Err(CtlError::Failed(format!(
            "the service on {} did not understand (it is older than this kernel-mcp: end its process, pid {})",
            paths.socket.display(),
            paths
                .running_pid()
                .map_or("unknown".to_string(), |p| p.to_string())
        ))),
    }
}

/// `status`: print the service's status (as text, or its JSON).
async fn status(paths: &ServicePaths, json: bool) -> Result<(), CtlError> {
    let body = ask(paths, Op::Status).await?;
    let parsed: Status = serde_json::from_value(body.clone())
        .map_err(|e| CtlError::Failed(format!("an answer this kernel-mcp cannot read: {e}")))?;
    let text = match json {
        true => {
            let mut body = body;
            if let Some(o) = body.as_object_mut() {
                o.remove("ok");
            }
            format!("{body}\n")
        }
        false => render(&parsed),
    };
    super::client::out(&text);
    Ok(())
}

/// The status as a person reads it.
fn render(s: &Status) -> String {
    let up = s.uptime_s;
    let mut text = format!(
        "kernel-mcp service {} (pid {}), up {}h{:02}m{:02}s since {}\nsocket:      {}\nfloors:      {}\nconnections: {}\nenvironment: {} variables (names only): {}\nsessions:    {}\n",
        s.version,
        s.pid,
        up / 3600,
        up / 60 % 60,
        up % 60,
        s.started_at,
        s.socket,
        s.floors.describe(),
        s.connections,
        s.environment.len(),
        s.environment.join(" "),
        s.sessions.len(),
    );
    for line in &s.sessions {
        let id = match (&line.owner, line.connection) {
            (Some(o), _) => format!("{o}/{}", line.session_id),
            (None, Some(c)) => format!("{} (connection {c})", line.session_id),
            (None, None) => line.session_id.clone(),
        };
        let pid = line.pid.map_or("-".to_string(), |p| p.to_string());
        let mem = line
            .memory_mib
            .map_or("-".to_string(), |m| format!("{m} MiB"));
        text.push_str(&format!(
            "  {id:<28} {:<12} {:<10} pid {pid:<8} {mem}\n",
            line.kernel, line.status
        ));
    }
    text
}

/// `stop`: ask the service to stop and wait until its process is gone.
async fn stop(paths: &ServicePaths) -> Result<Stopping, CtlError> {
    let body = ask(paths, Op::Stop).await?;
    let stopping: Stopping = serde_json::from_value(body)
        .map_err(|e| CtlError::Failed(format!("an answer this kernel-mcp cannot read: {e}")))?;
    let deadline = Instant::now() + GONE_DEADLINE;
    while running(stopping.pid) || paths.socket.exists() {
        if Instant::now() >= deadline {
            return Err(CtlError::Failed(format!(
                "the service (pid {}) was asked to stop but still runs after {} s; its log may say why",
                stopping.pid,
                GONE_DEADLINE.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(stopping)
}

/// True while process `pid` runs (a zombie, ended but not yet reaped, does not).
fn running(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None).is_err() {
        return false;
    }
    // /proc/PID/stat: "PID (COMM) STATE …"; COMM may hold spaces and parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        })
        .is_none_or(|state| state != 'Z')
}

/// `restart`: stop the service, then start it with its arguments and working directory, in
/// this process's environment.
async fn restart(paths: &ServicePaths) -> Result<(), CtlError> {
    let old = stop(paths).await?;
    let args = with_socket(&old.args, paths);
    let cwd = PathBuf::from(&old.cwd);
    let cwd = cwd.is_dir().then_some(cwd);
    let deadline = Instant::now() + relay::START_DEADLINE;
    let failed = |e: relay::RelayError| CtlError::Failed(format!("stopped, but {e}"));
    let _lock = relay::start_lock(&paths.start_lock, deadline)
        .await
        .map_err(failed)?;
    // A client may have started a new one since the old one stopped: that one is fresh too.
    let started = match relay::connect_trusted(paths).await.map_err(failed)? {
        Some(stream) => stream,
        None => relay::start(paths, &args, cwd.as_deref(), deadline)
            .await
            .map_err(failed)?,
    };
    drop(started);
    let pid = paths
        .running_pid()
        .map_or("unknown".to_string(), |p| p.to_string());
    super::client::out(&format!(
        "restarted the kernel-mcp service on {}: pid {} stopped, pid {pid} started\n",
        paths.socket.display(),
        old.pid
    ));
    Ok(())
}

/// The service's old arguments, with `--socket` added when they named none (it came from its
/// environment, which the new one may not have).
fn with_socket(args: &[String], paths: &ServicePaths) -> Vec<OsString> {
    let mut out: Vec<OsString> = args.iter().map(OsString::from).collect();
    let named = args
        .iter()
        .any(|a| a == "--socket" || a.starts_with("--socket="));
    if !named {
        out.push("--socket".into());
        out.push(paths.socket.clone().into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_names_the_socket_when_the_old_arguments_did_not() {
        let paths = ServicePaths::new("/run/k/service.sock".into());
        let plain = with_socket(
            &["service".into(), "--pool".into(), "python3=0".into()],
            &paths,
        );
        assert_eq!(plain[3..], ["--socket", "/run/k/service.sock"]);
        let named = with_socket(&["service".into(), "--socket=/x.sock".into()], &paths);
        assert_eq!(named.len(), 2);
    }

    #[test]
    fn our_own_process_runs_and_a_reaped_one_does_not() {
        assert!(running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!running(pid));
    }
}
