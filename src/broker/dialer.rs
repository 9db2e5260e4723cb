//! How a sandboxed kernel reaches its session's broker. Its seccomp filter refuses
//! `socket(AF_UNIX)` — Landlock cannot guard the path of a Unix socket, and ssh-agent, D-Bus
//! and kernel-mcp's own service listen on them — so it cannot connect to the endpoint's
//! socket. Instead it inherits one end of a socket pair, the *dialer*, on descriptor
//! [`DIALER_FD`] (named by [`DIALER_ENV`]): for each byte it writes there, the broker makes a
//! new socket pair, serves one end as a connection of the session's endpoint (the same
//! requests, key and limits as the socket's), and hands the other end back over the dialer
//! (`SCM_RIGHTS`). The kernel can reach nothing else this way: only its own session's broker.
//!
//! The dialer is made when the kernel is launched ([`Dialers::make`], from the broker's launch
//! hook), before any session may own the kernel, and waits in [`Dialers`] under the kernel's
//! connection file until the session's endpoint takes it when the kernel is ready
//! ([`Dialers::take`]); a request written before that waits in the socket.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream as StdStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, Interest};
use tokio::net::UnixStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::lock;
use super::shared::Shared;

/// The descriptor a sandboxed kernel finds its dialer on.
pub const DIALER_FD: i32 = crate::kernel::process::INHERITED_FD;
/// The variable naming [`DIALER_FD`] in a sandboxed Python kernel's environment.
pub const DIALER_ENV: &str = "KERNEL_MCP_BROKER_FD";
/// Dialers waiting for their kernel's session at most.
const MAX_PENDING: usize = 256;
/// A dialer whose connection file is gone (its kernel failed to start) is dropped after this
/// (the file is written just after the dialer is made).
const PENDING_GRACE: Duration = Duration::from_secs(60);

/// The broker's ends of the dialers of kernels launched but not yet taken by a session.
#[derive(Default)]
pub struct Dialers {
    pending: Mutex<HashMap<PathBuf, (Instant, StdStream)>>,
}

impl Dialers {
    /// A new dialer for the kernel whose connection file is `connection_file`: the broker's
    /// end waits here, the kernel's end is returned (to be inherited as [`DIALER_FD`]).
    /// Errors: no socket pair could be made.
    pub fn make(&self, connection_file: &Path) -> std::io::Result<OwnedFd> {
        let (ours, theirs) = StdStream::pair()?;
        let mut pending = lock(&self.pending);
        // A kernel that never became ready (a failed start) leaves no connection file.
        pending.retain(|cf, (made, _)| made.elapsed() < PENDING_GRACE || cf.exists());
        if pending.len() >= MAX_PENDING {
            return Err(std::io::Error::other(
                "too many kernels are starting with a broker at once",
            ));
        }
        pending.insert(connection_file.to_path_buf(), (Instant::now(), ours));
        Ok(theirs.into())
    }

    /// The broker's end of the dialer of the kernel with `connection_file`, if it has one.
    pub fn take(&self, connection_file: &Path) -> Option<StdStream> {
        lock(&self.pending).remove(connection_file).map(|(_, s)| s)
    }
}

/// Serve `dialer` for the session of `shared` until the kernel closes it or `stop`: each
/// byte read is answered with a new connection, served within the session's `slots`.
pub async fn serve(
    dialer: StdStream,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    stop: CancellationToken,
) {
    let mut dialer = match dialer
        .set_nonblocking(true)
        .and_then(|()| UnixStream::from_std(dialer))
    {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(session = %shared.session, "the kernel's broker dialer is unusable: {e}");
            return;
        }
    };
    let mut byte = [0u8; 1];
    loop {
        let read = tokio::select! {
            _ = stop.cancelled() => return,
            r = dialer.read(&mut byte) => r,
        };
        match read {
            Ok(0) | Err(_) => return, // the kernel is gone
            Ok(_) => {}
        }
        let (ours, theirs) = match StdStream::pair() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(session = %shared.session, "no connection for the kernel's broker call: {e}");
                return;
            }
        };
        if let Err(e) = hand_over(&dialer, &theirs).await {
            tracing::debug!(session = %shared.session, "the kernel's dialer closed: {e}");
            return;
        }
        drop(theirs);
        let stream = match ours
            .set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(ours))
        {
            Ok(s) => s,
            Err(_) => continue,
        };
        super::conn::accept(stream, &shared, &slots, &stop).await;
    }
}

/// Send `conn`'s descriptor over `dialer` with one byte.
async fn hand_over(dialer: &UnixStream, conn: &StdStream) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds = [conn.as_raw_fd()];
    dialer
        .async_io(Interest::WRITABLE, || {
            let iov = [std::io::IoSlice::new(b"c")];
            let cmsg = [ControlMessage::ScmRights(&fds)];
            sendmsg::<()>(dialer.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
                .map(|_| ())
                .map_err(std::io::Error::from)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dialer_waits_for_its_kernel_and_is_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let cf = dir.path().join("kernel-mcp-x.json");
        let dialers = Dialers::default();
        let _kernel_end = dialers.make(&cf).unwrap();
        let _other = dialers.make(&dir.path().join("kernel-mcp-y.json")).unwrap();
        assert!(
            dialers.take(&cf).is_some(),
            "kept while its file is being written"
        );
        assert!(dialers.take(&cf).is_none());
    }
}
