//! `kernel-mcp serve --shared`: the stdio entry point as a byte relay to the per-user service.
//!
//! It connects to the service's socket only after checking that the socket's directory is
//! ours and not writable by others, and sends nothing until the peer's uid (`SO_PEERCRED`) is
//! ours too ([`crate::trust`]): a listener planted by another user is refused with the reason.
//! When nobody listens it starts the service detached (its own session via `setsid`, stdio on
//! /dev/null, logging to its file) and waits for the socket. A start lock (flock) around "connect, else start and wait" makes relays started
//! together start one service; the service itself replaces a stale socket file. Then bytes
//! flow both ways untouched (but for the toolset the relay's `--tools` asks for, added to the
//! client's `initialize` and to each 2026-07-28 request's capabilities: see [`relay`]). When the client closes stdin the relay half-closes the socket,
//! lets the service answer what is in flight, and exits 0; when the service goes away first it
//! exits non-zero and says why on stderr (the only thing it ever writes there).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use super::paths::{DirError, ServicePaths};
use crate::trust::{self, TrustError};

/// Longest a relay waits for a service it started (or for another relay's start) to listen.
pub const START_DEADLINE: Duration = Duration::from_secs(30);
/// Longest the relay waits for the service's last answers after the client closed stdin.
const DRAIN_DEADLINE: Duration = Duration::from_secs(5);
/// Longest first line the relay reads to add a toolset to (a longer one passes untouched).
const MAX_INITIALIZE_BYTES: u64 = 1 << 20;

/// Why the relay stopped working.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("cannot start the kernel-mcp service: {0}")]
    Start(String),
    #[error("refusing to talk to the kernel-mcp service at {socket}: {source}")]
    Untrusted {
        socket: String,
        #[source]
        source: TrustError,
    },
    #[error("cannot start the kernel-mcp service: {0}")]
    Dir(#[from] DirError),
    #[error(
        "the kernel-mcp service at {socket} closed the connection (it exited or was killed; see {log}); restart the MCP client to reconnect"
    )]
    ServiceGone { socket: String, log: String },
    #[error("kernel-mcp --shared: {0}")]
    Floors(#[from] super::hello::HelloError),
    #[error("relaying to the kernel-mcp service failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The arguments (after the executable) that start the service of `paths` with the caller's
/// kernelspec directories, Python environment and gateway flags, for [`connect_or_start`].
pub fn service_args(
    paths: &ServicePaths,
    kernelspec_dirs: &[std::path::PathBuf],
    python_env: Option<&Path>,
    gateway_flags: &[OsString],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "service".into(),
        "--socket".into(),
        paths.socket.clone().into(),
    ];
    for d in kernelspec_dirs {
        args.push("--kernelspec-dir".into());
        args.push(d.into());
    }
    if let Some(p) = python_env {
        args.push("--python-env".into());
        args.push(p.into());
    }
    // Global flags: they go before the subcommand.
    let mut all: Vec<OsString> = gateway_flags.to_vec();
    all.append(&mut args);
    all
}

/// Connect to the service of `paths`, starting it with `service_args` (the arguments after
/// the executable, e.g. `service --socket PATH`) when none listens. Every connection is
/// checked with [`connect_trusted`] before it is returned.
///
/// # Errors
/// [`RelayError::Untrusted`] for a socket directory or a listener that is not ours (nothing
/// was sent); [`RelayError::Start`] / [`RelayError::Dir`] when no service could be started.
pub async fn connect_or_start(
    paths: &ServicePaths,
    service_args: &[OsString],
) -> Result<UnixStream, RelayError> {
    if let Some(s) = connect_trusted(paths).await? {
        return Ok(s);
    }
    paths.prepare_dir()?;
    let deadline = Instant::now() + START_DEADLINE;
    let _start = start_lock(&paths.start_lock, deadline).await?;
    // Another relay may have started it while we waited for the lock.
    if let Some(s) = connect_trusted(paths).await? {
        return Ok(s);
    }
    start(paths, service_args, None, deadline).await
}

/// Start the service of `paths` detached (`service_args` after our own executable; in
/// `cwd`, else ours; with our environment) and wait until `deadline` for it to listen; the
/// caller holds the start lock or knows no service runs. Returns a trusted connection.
///
/// # Errors
/// [`RelayError::Start`] when it cannot run, exits at once or does not listen in time;
/// [`RelayError::Untrusted`] as for [`connect_trusted`].
pub async fn start(
    paths: &ServicePaths,
    service_args: &[OsString],
    cwd: Option<&Path>,
    deadline: Instant,
) -> Result<UnixStream, RelayError> {
    let exe = std::env::current_exe()
        .map_err(|e| RelayError::Start(format!("cannot find our own executable: {e}")))?;
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(service_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    // SAFETY: only setsid (async-signal-safe) runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RelayError::Start(format!("cannot run {}: {e}", exe.display())))?;
    loop {
        if let Some(s) = connect_trusted(paths).await? {
            // Reap it in the background should it exit while we relay (no zombie for long).
            std::thread::spawn(move || child.wait());
            return Ok(s);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(RelayError::Start(format!(
                "it exited at once ({status}); its log is {}",
                log_name()
            )));
        }
        if Instant::now() >= deadline {
            return Err(RelayError::Start(format!(
                "it did not listen on {} within {} s; its log is {}",
                paths.socket.display(),
                START_DEADLINE.as_secs(),
                log_name()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Connect to the socket of `paths` if its directory passes [`trust::check_dir`] and the
/// listener's uid is ours (or the one `KERNEL_MCP_SERVICE_UID` names, [`trust::service_uid`]); `Ok(None)` when no service listens (no directory, no socket, or
/// nobody accepting). Nothing is written to the stream here.
///
/// # Errors
/// [`RelayError::Untrusted`]: the directory or the listener is not ours.
pub async fn connect_trusted(paths: &ServicePaths) -> Result<Option<UnixStream>, RelayError> {
    let untrusted = |source| RelayError::Untrusted {
        socket: paths.socket.display().to_string(),
        source,
    };
    let owner = trust::service_uid();
    if !paths.check_dir_of(owner).map_err(untrusted)? {
        return Ok(None);
    }
    let Ok(stream) = UnixStream::connect(&paths.socket).await else {
        return Ok(None);
    };
    trust::check_peer_is(&stream, &paths.socket, owner).map_err(untrusted)?;
    Ok(Some(stream))
}

/// Take the start lock of a socket (`ServicePaths::start_lock`), waiting until `deadline`.
pub async fn start_lock(
    path: &Path,
    deadline: Instant,
) -> Result<Flock<std::fs::File>, RelayError> {
    let mut file = super::paths::open_lock_file(path)
        .map_err(|e| RelayError::Start(format!("cannot open {}: {e}", path.display())))?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((f, _)) if Instant::now() < deadline => {
                file = f;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err((_, e)) => {
                return Err(RelayError::Start(format!(
                    "another relay held {} for {} s ({e})",
                    path.display(),
                    START_DEADLINE.as_secs()
                )));
            }
        }
    }
}

/// The service log's path, for messages.
fn log_name() -> String {
    super::paths::log_file()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "not written (neither XDG_STATE_HOME nor HOME is set)".into())
}

/// Relay stdin → socket and socket → stdout until one side ends. When stdin and stdout are
/// pipes (as MCP clients start servers) they are read and written non-blocking on the event
/// loop, not through tokio's blocking pool: that saves two thread handoffs each way per
/// message (rmcp's `stdio_pipes`, the same transport the stdio server uses).
///
/// `ask_tools` (the relay's own `--tools`, when not the default) goes into the client's
/// `initialize`, and into the capabilities each 2026-07-28 request carries in its `_meta`
/// (such a client sends no `initialize`), as the experimental capability the service reads a connection's toolset from
/// ([`crate::mcp::toolset::CAPABILITY`]), unless the client asks for one itself: so
/// `kernel-mcp --shared --tools minimal` lists what it says, whatever the running service
/// was started with.
/// Errors: [`RelayError::ServiceGone`] when the service hangs up while the client is still there.
pub async fn relay(
    stream: UnixStream,
    socket: &Path,
    ask_tools: Option<String>,
) -> Result<(), RelayError> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let (mut from_service, mut to_service) = stream.into_split();
    let (stdin, mut stdout) = rmcp::transport::stdio_pipes();
    let mut stdin = tokio::io::BufReader::new(stdin);
    let up = async {
        let r = match &ask_tools {
            // Every message may carry its capabilities (2026-07-28: in each request's
            // `_meta`), so each is looked at; one longer than the bound passes in pieces.
            Some(tools) => loop {
                let mut line = Vec::new();
                match (&mut stdin)
                    .take(MAX_INITIALIZE_BYTES)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) => break Ok(0),
                    Ok(_) => {}
                    Err(e) => break Err(e),
                }
                let line = ask_for_toolset(&line, tools).unwrap_or(line);
                if let Err(e) = to_service.write_all(&line).await {
                    break Err(e);
                }
            },
            None => tokio::io::copy(&mut stdin, &mut to_service).await,
        };
        let _ = to_service.shutdown().await;
        r
    };
    let down = async {
        let r = tokio::io::copy(&mut from_service, &mut stdout).await;
        let _ = stdout.flush().await;
        r
    };
    tokio::pin!(down);
    tokio::select! {
        _ = up => {
            // The client is done: let the service answer what is in flight, then go.
            let _ = tokio::time::timeout(DRAIN_DEADLINE, &mut down).await;
            Ok(())
        }
        r = &mut down => match r {
            // stdout is gone: the client went away.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            _ => Err(RelayError::ServiceGone {
                socket: socket.display().to_string(),
                log: log_name(),
            }),
        },
    }
}

/// The key of a 2026-07-28 request's capabilities in its `params._meta`.
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// `line` (one JSON-RPC message and its newline) with `tools` asked for in its capabilities
/// — an `initialize` request's, or a 2026-07-28 request's in `params._meta` — when it asks
/// for no toolset itself; `None` leaves it as it is.
fn ask_for_toolset(line: &[u8], tools: &str) -> Option<Vec<u8>> {
    use crate::mcp::toolset::CAPABILITY;
    let finder = |needle: &str| memchr::memmem::find(line, needle.as_bytes()).is_some();
    if !finder("\"initialize\"") && !finder(META_CAPABILITIES) {
        return None;
    }
    let mut message: serde_json::Value = serde_json::from_slice(line).ok()?;
    let initialize = message.get("method")?.as_str()? == "initialize";
    let params = message.get_mut("params")?.as_object_mut()?;
    let capabilities = if initialize {
        params.entry("capabilities")
    } else {
        params
            .get_mut("_meta")?
            .as_object_mut()?
            .entry(META_CAPABILITIES)
    };
    let capabilities = capabilities
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    let experimental = capabilities
        .entry("experimental")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    let ours = experimental
        .entry(CAPABILITY)
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    if ours.contains_key("tools") {
        return None;
    }
    ours.insert("tools".into(), tools.into());
    let mut out = serde_json::to_vec(&message).ok()?;
    out.push(b'\n');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relays_toolset_goes_into_initialize_and_each_2026_requests_meta_unless_the_client_asks_for_one()
     {
        let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
"#;
        let out = ask_for_toolset(init, "minimal").expect("rewritten");
        assert!(out.ends_with(b"\n"));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["params"]["capabilities"]["experimental"]["kernel-mcp"]["tools"],
            "minimal"
        );
        assert_eq!(v["params"]["clientInfo"]["name"], "c");

        let asks = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"experimental":{"kernel-mcp":{"tools":"all"}}}}}
"#;
        assert!(
            ask_for_toolset(asks, "minimal").is_none(),
            "the client's own ask wins"
        );
        let other = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}
"#;
        assert!(ask_for_toolset(other, "minimal").is_none());
        let modern = br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
"#;
        let out = ask_for_toolset(modern, "all").expect("a 2026-07-28 request's capabilities");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["experimental"]["kernel-mcp"]
                ["tools"],
            "all"
        );
        assert!(ask_for_toolset(b"not json\n", "minimal").is_none());
    }

    #[test]
    fn the_service_is_started_with_the_callers_gateways_kernelspecs_and_environment() {
        let paths = ServicePaths::new("/run/x/kernel-mcp.sock".into());
        let gw: Vec<OsString> = ["--gateway", "lab=http://h:8888"]
            .iter()
            .map(Into::into)
            .collect();
        let args = service_args(&paths, &["/k".into()], Some(Path::new("/venv")), &gw);
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "--gateway",
                "lab=http://h:8888",
                "service",
                "--socket",
                "/run/x/kernel-mcp.sock",
                "--kernelspec-dir",
                "/k",
                "--python-env",
                "/venv"
            ]
        );
    }
}
