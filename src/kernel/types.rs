//! The types the kernel layer's modules share and its users name: the channels and events of
//! a kernel connection ([`Channel`], [`KernelEvent`]), how a kernel is launched
//! ([`LaunchOptions`], the [`KernelEnvHook`] that adds to its environment), how its process
//! ended ([`ExitInfo`]), and why a start, a send or an interrupt failed or how a shutdown
//! ended. Plain data, no I/O: every module of `kernel/` may import it, and it imports none of
//! theirs but `sandbox`, `spec` and `iopub`'s error. `kernel/mod.rs` re-exports it for outside
//! users; modules inside `kernel/` import from here.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use super::exit::{ExitCause, ExitInfo, memory_use_words};

use super::iopub::IopubError;
use super::sandbox::{self, Sandbox, SandboxUnavailable};
use super::spec::KernelSpec;
use crate::wire::Message;

/// A Jupyter channel we read from or write to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Shell,
    Control,
    Stdin,
    Iopub,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Channel::Shell => "shell",
            Channel::Control => "control",
            Channel::Stdin => "stdin",
            Channel::Iopub => "iopub",
        })
    }
}

/// What the reader tasks deliver, in arrival order per socket.
// `ChannelClosed` is rare; boxing the common variant would cost an allocation per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum KernelEvent {
    Message(Channel, Message),
    /// A socket's reader stopped (the socket closed or failed).
    ChannelClosed(Channel, SocketError),
    /// The kernel is gone (its process exited, or a remote server says so). Sent once, after
    /// the messages it sent before.
    Exited(ExitInfo),
}

/// Why the kernel's sockets could not be connected, or why a socket's reader stopped.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{0}")]
    Zmq(#[from] zeromq::ZmqError),
    #[error("{0}")]
    Iopub(#[from] IopubError),
}

/// Why a message could not be handed to a kernel ([`super::KernelIo::send`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// iopub is the kernel's broadcast channel: nothing is sent there.
    #[error("cannot send on {0}: the kernel only publishes there")]
    ReadOnlyChannel(Channel),
    /// The message could not be turned into frames.
    #[error("the message could not be framed: {0}")]
    Frame(String),
    /// The socket (or websocket) refused the message.
    #[error("the {channel} socket did not take the message: {reason}")]
    Transport { channel: Channel, reason: String },
    /// The connection has ended: the kernel is gone.
    #[error("the kernel's connection is closed (the kernel is gone)")]
    Closed,
    /// The transport did not take the message within the caller's deadline.
    #[error("the kernel did not take the message on {channel} within {after_s} s")]
    Timeout { channel: Channel, after_s: u64 },
    /// There is no kernel to send to (it is starting, or its start failed).
    #[error("the session has no kernel")]
    NoKernel,
}

/// Why an interrupt could not be delivered ([`super::KernelIo::interrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterruptError {
    /// `interrupt_request` on the control channel could not be sent.
    #[error("interrupt_request not sent: {0}")]
    Send(#[from] SendError),
    /// The gateway's `POST …/interrupt` failed (the message names the gateway, never a token).
    #[error("the gateway did not interrupt the kernel: {0}")]
    Gateway(String),
}

/// Everything needed to start a kernel besides its spec.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Working directory of the kernel process.
    pub cwd: PathBuf,
    /// Extra environment variables (after the kernelspec's own `env`).
    pub env: BTreeMap<String, String>,
    /// The selected Python environment (resolves `python` in argv).
    pub env_prefix: Option<PathBuf>,
    /// Give up waiting for readiness after this long.
    pub startup_timeout: Duration,
    /// The `kernel-mcp` binary to run the kernel under (`kernel-mcp supervise`), so nothing
    /// the kernel starts outlives it (see [`super::supervise`]); `None`: the kernel runs directly.
    pub supervisor: Option<PathBuf>,
    /// The kernel tree's memory limit (MiB) the supervisor enforces; 0 = none.
    pub max_memory_mib: u64,
    /// The sandbox the supervisor applies (see [`super::sandbox`]); needs `supervisor`.
    pub sandbox: Sandbox,
    /// Adds to the environment of each kernel launched (the broker's, see `crate::broker`).
    pub env_hook: Option<KernelEnvHook>,
    /// What no sandbox grant may reach (handed to the supervisor of a sandboxed kernel).
    pub protected: std::sync::Arc<sandbox::rules::Protected>,
}

/// A function that adds variables to one kernel's environment, given its launch (the broker
/// puts its helper on `PYTHONPATH` and names the kernel's endpoint file), and may give the
/// kernel a descriptor to inherit as [`super::process::INHERITED_FD`] (only a supervised kernel
/// gets it). Called once per launch, before the kernel is spawned.
#[derive(Clone)]
pub struct KernelEnvHook(std::sync::Arc<EnvHookFn>);

/// One kernel launch, as a [`KernelEnvHook`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct HookLaunch<'a> {
    pub spec: &'a KernelSpec,
    /// The kernel's connection file.
    pub connection_file: &'a std::path::Path,
    /// A sandboxed kernel's private directory (its connection file's, which it may read but
    /// not write); `None` for a kernel without a sandbox.
    pub private_dir: Option<&'a std::path::Path>,
}

/// See [`KernelEnvHook`].
type EnvHookFn = dyn Fn(&HookLaunch<'_>, &mut BTreeMap<String, String>) -> Option<std::os::fd::OwnedFd>
    + Send
    + Sync;

impl KernelEnvHook {
    pub fn new(
        f: impl Fn(&HookLaunch<'_>, &mut BTreeMap<String, String>) -> Option<std::os::fd::OwnedFd>
        + Send
        + Sync
        + 'static,
    ) -> KernelEnvHook {
        KernelEnvHook(std::sync::Arc::new(f))
    }

    /// Add this hook's variables to `env` for `launch`; the descriptor the kernel is to
    /// inherit, if any.
    pub fn apply(
        &self,
        launch: &HookLaunch<'_>,
        env: &mut BTreeMap<String, String>,
    ) -> Option<std::os::fd::OwnedFd> {
        (self.0)(launch, env)
    }
}

impl std::fmt::Debug for KernelEnvHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KernelEnvHook")
    }
}

/// How a start-up error shows the kernel's output: its tail, or that it printed nothing.
fn said(output_tail: &str) -> String {
    if output_tail.trim().is_empty() {
        "It printed nothing.".into()
    } else {
        format!("Its output ended with:\n{output_tail}")
    }
}

/// Why a kernel could not be started. The messages say what happened and carry the kernel's output.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot launch kernel '{kernel}': {detail}")]
    Launch { kernel: String, detail: String },
    /// The kernel's sockets could not be connected (a start retries this with new ports).
    #[error("cannot launch kernel '{kernel}': connecting to the kernel: {source}")]
    Connect { kernel: String, source: SocketError },
    /// `hint` is empty, or a paragraph (starting with a blank line) saying how to fix it.
    #[error(
        "kernel '{kernel}' exited during start-up ({exit}). {said}{hint}",
        said = said(output_tail)
    )]
    Exited {
        kernel: String,
        exit: ExitInfo,
        output_tail: String,
        hint: String,
    },
    #[error(
        "kernel '{kernel}' did not become ready within {timeout_s} s. {said}",
        said = said(output_tail)
    )]
    Timeout {
        kernel: String,
        timeout_s: f64,
        output_tail: String,
    },
    /// The session's sandbox cannot be enforced here (checked before the launch, and by the
    /// supervisor, which then refuses to start the kernel).
    #[error("kernel '{kernel}' was not started: {reason}")]
    SandboxUnavailable {
        kernel: String,
        reason: SandboxUnavailable,
    },
}

/// Which rung of the shutdown ladder stopped the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ShutdownRung {
    /// It exited after `shutdown_request`.
    Graceful,
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
    /// An adopted kernel: we disconnected and left it running.
    Detached,
}
