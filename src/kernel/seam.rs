//! The kernel seam: the one interface between a session actor and a kernel.
//!
//! A session's policy (queue, deadlines, interrupts, escalation, death) lives in `session/`
//! and talks to its kernel only through [`KernelIo`]; a new kernel (first start, restart,
//! recovery) comes from a [`KernelLauncher`]. Today's implementation is the local ZeroMQ
//! kernel ([`super::local::Kernel`], started by [`super::seam_local::LocalLauncher`]); an adopted kernel (a connection
//! file someone else started) or a kernel on a Jupyter gateway plugs in here, and the session
//! tests drive the actor through a scripted in-process fake.
//!
//! The seam is honest about what differs between kernels: a remote kernel has no pid
//! ([`KernelIo::pid`] is `None`), cannot be signalled (interrupt goes however the
//! implementation can), and has no local terminal to probe ([`KernelIo::reads_terminal`]).
//! Sending only hands a message to the transport; the actor bounds every send with a
//! deadline of its own, so an implementation need not.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use super::types::{Channel, KernelEvent};
use super::types::{InterruptError, LaunchOptions, SendError, ShutdownRung, StartError};
use crate::wire::Message;

/// One live kernel connection, as the session actor sees it.
///
/// Events arrive through [`KernelIo::next_event`]: messages from every channel in arrival
/// order per channel, and exactly one [`KernelEvent::Exited`] when the kernel is gone (after
/// the messages it sent before dying). After that it pends for ever.
pub trait KernelIo: Send {
    /// The `kernel_info_reply` content the kernel answered at start-up (implementation,
    /// language_info, protocol_version, banner…).
    fn info(&self) -> &Value;

    /// The kernel's process id, where there is a local process.
    fn pid(&self) -> Option<u32>;

    /// A new request message in this connection's client session.
    fn request(&self, msg_type: &str, content: Value) -> Message;

    /// A reply to a kernel message (e.g. `input_reply` to an `input_request`).
    fn reply(&self, parent: &Message, msg_type: &str, content: Value) -> Message;

    /// Sign and send `msg` on `channel` (not iopub). `Ok` means handed to the transport.
    /// Errors: [`SendError`] saying why it could not be sent.
    fn send<'a>(
        &'a mut self,
        channel: Channel,
        msg: &'a Message,
    ) -> BoxFuture<'a, Result<(), SendError>>;

    /// The next event. Cancel-safe: dropping the future loses nothing.
    fn next_event(&mut self) -> BoxFuture<'_, KernelEvent>;

    /// An event already received, without waiting.
    fn try_next_event(&mut self) -> Option<KernelEvent>;

    /// Interrupt the running code the way this kernel is interrupted (a signal to the
    /// process group, or `interrupt_request` on control). Best effort: the caller watches
    /// the run's reply and repeats or escalates. Errors: [`InterruptError`].
    fn interrupt(&mut self) -> BoxFuture<'_, Result<(), InterruptError>>;

    /// Stop the kernel within about `2 × grace` (more only where a remote server is slow)
    /// and report the rung of the shutdown ladder that stopped it.
    fn shutdown(self: Box<Self>, grace: Duration) -> BoxFuture<'static, ShutdownRung>;

    /// The kernel's id on a Jupyter server (`/api/kernels/{id}`), for a remote kernel.
    fn kernel_id(&self) -> Option<&str> {
        None
    }

    /// The connection file a person can attach with (`jupyter console --existing FILE`),
    /// where the kernel has a local one.
    fn connection_file(&self) -> Option<&std::path::Path> {
        None
    }

    /// False while the kernel misses its heartbeat (status `unresponsive`; not a death).
    fn responsive(&self) -> bool {
        true
    }

    /// The last few KiB of the kernel's own stdout/stderr, where we have them.
    fn output_tail(&self) -> String {
        String::new()
    }

    /// Messages from the kernel that were dropped as malformed or badly signed.
    fn dropped_messages(&self) -> u64 {
        0
    }

    /// Memory the kernel and every process it started use (bytes), where it can be
    /// measured: the charge of its cgroup, else the sum of their PSS plus the shared memory
    /// they hold.
    fn memory_bytes(&self) -> Option<u64> {
        None
    }

    /// The sandbox the kernel runs in (`none` for kernels kernel-mcp did not start).
    fn sandbox(&self) -> crate::kernel::sandbox::Sandbox {
        crate::kernel::sandbox::Sandbox::NONE
    }

    /// True while code in the kernel blocks reading its terminal (a kernel that never sends
    /// `input_request`, such as bash_kernel). Only a local process can be probed.
    fn reads_terminal(&self) -> bool {
        false
    }
}

/// Starts kernels of one kind for one session: the first one, and each replacement.
pub trait KernelLauncher: Send + Sync {
    /// Start a kernel and wait until it is ready.
    /// Errors: [`StartError`] with the exit status and output tail when it dies during start.
    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>>;

    /// True when the kernels are someone else's (adopted): they cannot be restarted.
    fn adopts(&self) -> bool {
        false
    }

    /// Where the kernels run: `"local"`, or the name of the gateway.
    fn location(&self) -> &str {
        "local"
    }

    /// How local kernels are launched (cwd, env, memory limit…), where this launcher starts
    /// them from a kernelspec.
    fn launch_options(&self) -> Option<&LaunchOptions> {
        None
    }

    /// The session whose kernel this launcher's first kernel was forked from (`fork_session`).
    fn forked_from(&self) -> Option<&str> {
        None
    }

    /// The sandbox every kernel of this launcher runs in.
    fn sandbox(&self) -> crate::kernel::sandbox::Sandbox {
        crate::kernel::sandbox::Sandbox::NONE
    }

    /// Replace `old` by a fresh kernel (restart), as [`replace_own`](KernelLauncher::replace_own)
    /// does. A launcher that [`adopts`](KernelLauncher::adopts) refuses: the kernel is someone
    /// else's (the session decides this first; this is the backstop).
    /// Errors: [`StartError`] from the start, or the refusal.
    fn replace(
        &self,
        old: Box<dyn KernelIo>,
        grace: Duration,
    ) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        if self.adopts() {
            return refuse_replace(old);
        }
        self.replace_own(old, grace)
    }

    /// Replace `old`, a kernel kernel-mcp started, by a fresh one: by default shut it down
    /// within about `2 × grace` and [`start`](KernelLauncher::start) another; a remote kernel
    /// restarts in place over REST. Errors: [`StartError`] from the start.
    fn replace_own(
        &self,
        old: Box<dyn KernelIo>,
        grace: Duration,
    ) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let start = self.start();
        Box::pin(async move {
            old.shutdown(grace).await;
            start.await
        })
    }
}

/// What [`KernelLauncher::replace`] answers for a kernel someone else started: `old` is let go
/// of (dropping an adopted kernel's connection only disconnects from it), and the error says
/// kernel-mcp never replaces such a kernel.
fn refuse_replace(
    old: Box<dyn KernelIo>,
) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
    drop(old);
    Box::pin(std::future::ready(Err(StartError::Launch {
        kernel: "adopted kernel".into(),
        detail: "kernel-mcp did not start this kernel, so it never restarts or replaces it".into(),
    })))
}

/// The next of `events`, until an [`KernelEvent::Exited`] has been handed out; then pending
/// for ever (a kernel's event stream ends with its exit). `exit_reported` is the caller's
/// record of that.
pub(crate) async fn next_until_exit(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<KernelEvent>,
    exit_reported: &mut bool,
) -> KernelEvent {
    if *exit_reported {
        return std::future::pending().await;
    }
    match events.recv().await {
        Some(ev) => {
            if matches!(ev, KernelEvent::Exited(_)) {
                *exit_reported = true;
            }
            ev
        }
        None => std::future::pending().await,
    }
}
