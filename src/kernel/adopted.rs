//! An adopted kernel: one somebody else started (a person's `jupyter console`, a JupyterLab
//! kernel, `python -m ipykernel_launcher -f FILE`), driven through its connection file.
//!
//! kernel-mcp never signals a process it did not start: interrupt goes over control
//! (`interrupt_request`), and there is no pid. Liveness comes from the heartbeat: a REQ
//! socket pings every [`BEAT_EVERY`]; after [`MISSES_UNRESPONSIVE`] missed beats the kernel
//! counts as unresponsive (a stopped or very busy kernel), and when a missed beat finds the
//! shell port closed (connection refused) the kernel is gone: one [`KernelEvent::Exited`],
//! as for a local kernel's exit. Shutting down only disconnects ([`ShutdownRung::Detached`]):
//! the kernel keeps running for whoever started it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use zeromq::{ReqSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use super::channels::Channels;
use super::connection::ConnectionInfo;
use super::seam::{KernelIo, KernelLauncher};
use super::types::ExitInfo;
use super::types::InterruptError;
use super::types::{Channel, KernelEvent};
use super::types::{ShutdownRung, StartError};

/// How often the heartbeat pings.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);
/// How long one ping waits for its echo.
const BEAT_TIMEOUT: Duration = Duration::from_secs(2);
/// Missed beats in a row before the kernel counts as unresponsive.
pub const MISSES_UNRESPONSIVE: u32 = 3;

/// Why a connection file cannot be adopted. The messages name the file.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionFileError {
    #[error("cannot read connection file {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a JSON connection file: {source}", path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{} has no valid {key}", path.display())]
    NoPort { path: PathBuf, key: &'static str },
    #[error("{} uses transport {transport:?}; only tcp kernels can be adopted", path.display())]
    Transport { path: PathBuf, transport: String },
    #[error("{} signs with {scheme}; only hmac-sha256 is supported", path.display())]
    Scheme { path: PathBuf, scheme: String },
}

/// Read a connection file, leniently (only the fields we use are required).
/// Errors: [`ConnectionFileError`], naming the file and what is wrong.
pub fn read_connection_file(path: &Path) -> Result<ConnectionInfo, ConnectionFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConnectionFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|source| ConnectionFileError::NotJson {
        path: path.to_path_buf(),
        source,
    })?;
    let port = |key: &'static str| {
        v[key]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| ConnectionFileError::NoPort {
                path: path.to_path_buf(),
                key,
            })
    };
    let transport = v["transport"].as_str().unwrap_or("tcp").to_string();
    if transport != "tcp" {
        return Err(ConnectionFileError::Transport {
            path: path.to_path_buf(),
            transport,
        });
    }
    let scheme = v["signature_scheme"].as_str().unwrap_or("hmac-sha256");
    if scheme != "hmac-sha256" {
        return Err(ConnectionFileError::Scheme {
            path: path.to_path_buf(),
            scheme: scheme.to_string(),
        });
    }
    Ok(ConnectionInfo {
        transport,
        ip: v["ip"].as_str().unwrap_or("127.0.0.1").to_string(),
        shell_port: port("shell_port")?,
        iopub_port: port("iopub_port")?,
        stdin_port: port("stdin_port")?,
        control_port: port("control_port")?,
        hb_port: port("hb_port")?,
        key: v["key"].as_str().unwrap_or_default().to_string(),
        signature_scheme: scheme.to_string(),
        kernel_name: v["kernel_name"].as_str().unwrap_or_default().to_string(),
    })
}

/// Adopts the kernel of one connection file (each "start" connects anew).
#[derive(Debug, Clone)]
pub struct AdoptLauncher {
    pub connection_file: PathBuf,
    /// How long to wait for the kernel to answer `kernel_info`.
    pub timeout: Duration,
}

impl KernelLauncher for AdoptLauncher {
    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let this = self.clone();
        Box::pin(async move {
            let k = Adopted::attach(&this.connection_file, this.timeout).await?;
            Ok(Box::new(k) as Box<dyn KernelIo>)
        })
    }

    fn adopts(&self) -> bool {
        true
    }
}

/// A live connection to an adopted kernel.
pub struct Adopted {
    info: Value,
    connection_file: PathBuf,
    channels: Channels,
    events: mpsc::UnboundedReceiver<KernelEvent>,
    /// Set by the heartbeat after missed beats; cleared by the next echo.
    unresponsive: Arc<AtomicBool>,
    exit_reported: bool,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Adopted {
    /// Connect to the kernel of `path` and wait (up to `timeout`) until it is ready.
    /// Errors: [`StartError::Launch`] for a bad file, [`StartError::Timeout`] when the kernel
    /// does not answer.
    pub async fn attach(path: &Path, timeout: Duration) -> Result<Adopted, StartError> {
        let name = path.display().to_string();
        let info = read_connection_file(path).map_err(|e| StartError::Launch {
            kernel: name.clone(),
            detail: e.to_string(),
        })?;
        let timed_out = || {
            StartError::Timeout {
            kernel: name.clone(),
            timeout_s: timeout.as_secs_f64(),
            output_tail: "(an adopted kernel's output is not ours to read; check that it runs and that the connection file is current)".into(),
        }
        };
        let (tx, mut events) = mpsc::unbounded_channel();
        let mut channels = tokio::time::timeout(timeout, Channels::connect(&info, tx.clone()))
            .await
            .map_err(|_| timed_out())?
            .map_err(|source| StartError::Connect {
                kernel: name.clone(),
                source,
            })?;
        let kernel_info = tokio::time::timeout(
            timeout,
            super::ready::wait_ready(&mut channels, &mut events),
        )
        .await
        .map_err(|_| timed_out())?;
        let unresponsive = Arc::new(AtomicBool::new(false));
        let gone: OnGone = Box::new(move || {
            tracing::warn!("adopted kernel is gone: its ports are closed");
            let _ = tx.send(KernelEvent::Exited(ExitInfo::unknown()));
        });
        let heartbeat = tokio::spawn(heartbeat(info, unresponsive.clone(), Some(gone)));
        tracing::info!(connection_file = %path.display(), "adopted kernel");
        Ok(Adopted {
            info: kernel_info,
            connection_file: path.to_path_buf(),
            channels,
            events,
            unresponsive,
            exit_reported: false,
            heartbeat,
        })
    }
}

impl Drop for Adopted {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// Ping the kernel of `info` for ever, setting `unresponsive` after missed beats. With
/// `on_gone`, a missed beat that finds the shell port closed calls it and stops: an adopted
/// kernel reports its exit; a local kernel whose process lives on without its sockets is
/// stopped, so its exit comes from the process as any death does.
pub(crate) async fn heartbeat(
    info: ConnectionInfo,
    unresponsive: Arc<AtomicBool>,
    mut on_gone: Option<OnGone>,
) {
    let endpoint = info.endpoint(info.hb_port);
    let mut socket: Option<ReqSocket> = None;
    let mut misses = 0u32;
    loop {
        tokio::time::sleep(BEAT_EVERY).await;
        if socket.is_none() {
            let mut s = ReqSocket::new();
            if let Ok(Ok(())) = tokio::time::timeout(BEAT_TIMEOUT, s.connect(&endpoint)).await {
                socket = Some(s);
            }
        }
        let echoed = match socket.as_mut() {
            Some(s) => tokio::time::timeout(BEAT_TIMEOUT, async {
                s.send(ZmqMessage::from("ping")).await.ok()?;
                s.recv().await.ok()
            })
            .await
            .ok()
            .flatten()
            .is_some(),
            None => false,
        };
        if echoed {
            misses = 0;
            unresponsive.store(false, Ordering::Relaxed);
            continue;
        }
        // A REQ socket whose echo never came cannot send again: start over with a new one.
        socket = None;
        misses += 1;
        if on_gone.is_some() && shell_port_closed(&info).await {
            if let Some(gone) = on_gone.take() {
                gone();
            }
            return;
        }
        if misses >= MISSES_UNRESPONSIVE && !unresponsive.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                misses,
                port = info.hb_port,
                "kernel does not answer its heartbeat"
            );
        }
    }
}

/// What the heartbeat does, once, when a missed beat finds the kernel's shell port closed.
pub(crate) type OnGone = Box<dyn FnOnce() + Send>;

/// True when nothing listens on the kernel's shell port any more.
async fn shell_port_closed(info: &ConnectionInfo) -> bool {
    let addr = format!("{}:{}", info.ip, info.shell_port);
    matches!(
        tokio::time::timeout(BEAT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

impl KernelIo for Adopted {
    fn info(&self) -> &Value {
        &self.info
    }

    fn pid(&self) -> Option<u32> {
        None
    }

    fn connection_file(&self) -> Option<&Path> {
        Some(&self.connection_file)
    }

    fn responsive(&self) -> bool {
        !self.unresponsive.load(Ordering::Relaxed)
    }

    super::channels::channels_io!();

    fn next_event(&mut self) -> BoxFuture<'_, KernelEvent> {
        Box::pin(crate::kernel::seam::next_until_exit(
            &mut self.events,
            &mut self.exit_reported,
        ))
    }

    fn try_next_event(&mut self) -> Option<KernelEvent> {
        self.events.try_recv().ok()
    }

    /// `interrupt_request` on control: we never signal a process we did not start.
    fn interrupt(&mut self) -> BoxFuture<'_, Result<(), InterruptError>> {
        Box::pin(async move {
            let msg = self.channels.request("interrupt_request", json!({}));
            Ok(self.channels.send(Channel::Control, &msg).await?)
        })
    }

    /// Disconnect; the kernel goes on running.
    fn shutdown(self: Box<Self>, _grace: Duration) -> BoxFuture<'static, ShutdownRung> {
        tracing::info!(connection_file = %self.connection_file.display(), "detached from adopted kernel");
        drop(self);
        Box::pin(async { ShutdownRung::Detached })
    }
}
