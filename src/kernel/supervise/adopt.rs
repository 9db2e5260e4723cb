//! What the supervisor needs for `fork_session` (see [`crate::kernel::fork`]): supervising a
//! kernel it did not spawn, watching the server rather than its parent, and letting go of a
//! tree that has a supervisor of its own. Hooked into [`super::run`] in four places.
//!
//! - **Adopting a child** (`--adopt-child PID`). A fork of a live kernel cannot be spawned by
//!   a supervisor: it is a copy of the source kernel's process. So the copy forks once more;
//!   the grandchild is the kernel, and its parent execs `kernel-mcp supervise --adopt-child
//!   <grandchild>`: a supervisor that is its kernel's real parent (exit status, subreaper,
//!   memory limit, end of tree, report — all as for a spawned kernel) without having spawned
//!   it. The kernel keeps the sandbox it inherited from its source (Landlock domains and
//!   seccomp filters survive `fork` and cannot be shed); the helper adds a nested domain that
//!   scopes its signals, so it cannot signal this supervisor nor its source.
//! - **A cgroup of its own** ([`Cgroup::create_beside_own`]). The fork starts in its source
//!   kernel's memory cgroup; its supervisor moves itself to the parent group (where every
//!   supervisor sits), creates the fork's group beside the source's and moves the kernel
//!   into it, so the source's end, which empties the source's group, never reaches the fork.
//! - **Watching the server** (`--server-pid PID`). That supervisor's parent is the source
//!   kernel, whose end must not end the fork: it takes no parent-death signal and instead
//!   polls a pidfd of the server every tick, ending its tree when the server is gone.
//! - **Release** ([`release`], [`Released`]). The fork's supervisor still sits in the source
//!   supervisor's process tree (Linux cannot re-parent a process). The server queues
//!   [`RELEASE_SIGNAL`] to the source's supervisor with the fork supervisor's pid as value;
//!   from then on that pid and its descendants are left out of the source's memory count and
//!   of the tree it ends. The signal's default action is to be ignored, so a supervisor
//!   without this hook simply keeps the fork in its tree (it is then ended with its source).
//!   Only the server's signals count (`si_pid`); the kernels cannot signal a supervisor
//!   (Landlock's signal scoping), so none can forge one.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::sys::signal::Signal;

use crate::kernel::cgroup::Cgroup;
use crate::kernel::process::descendants;

/// The signal a server queues to a supervisor to release a subtree (value: its root's pid).
/// Ignored by default, so it is harmless to a supervisor that does not know it.
pub const RELEASE_SIGNAL: Signal = Signal::SIGWINCH;

/// A pidfd of the server, for a supervisor whose parent is not the server.
pub struct ServerWatch {
    pid: i32,
    pidfd: Option<OwnedFd>,
}

impl ServerWatch {
    /// Watch `pid` (through a pidfd where the kernel has them, else by `kill(pid, 0)`).
    pub fn open(pid: i32) -> ServerWatch {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a non-negative result is a new descriptor nothing else owns.
        let pidfd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) });
        ServerWatch { pid, pidfd }
    }

    /// The server's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// True once the server has exited.
    pub fn gone(&self) -> bool {
        match &self.pidfd {
            Some(fd) => {
                let mut p = nix::libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: nix::libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no wait.
                let n = unsafe { nix::libc::poll(&mut p, 1, 0) };
                n > 0 && p.revents != 0
            }
            None => nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), None).is_err(),
        }
    }
}

/// `pid` as the kernel to supervise, if it is this process's child, moved into `cgroup`.
/// Errors: it is not (a supervisor can only reap and mirror its own child), or the move was
/// refused.
pub fn adopt(pid: i32, cgroup: Option<&Cgroup>) -> std::io::Result<nix::unistd::Pid> {
    let me = std::process::id() as i32;
    let parent = crate::kernel::proc_tree::parent_pid(pid);
    if parent == Some(me) {
        if let Some(g) = cgroup {
            g.join(pid)?;
        }
        Ok(nix::unistd::Pid::from_raw(pid))
    } else {
        Err(std::io::Error::other(format!(
            "process {pid} is not a child of this supervisor (pid {me})"
        )))
    }
}

/// Subtrees a supervisor has let go of (their roots' pids).
#[derive(Debug, Default)]
pub struct Released(Vec<i32>);

impl Released {
    /// Take note of a [`RELEASE_SIGNAL`] if `server` queued it.
    pub fn note(&mut self, info: &nix::libc::siginfo_t, server: i32) {
        // SAFETY: si_pid and si_value are valid for a signal queued with sigqueue (SI_QUEUE).
        let (from, value) = unsafe { (info.si_pid(), info.si_value().sival_ptr as usize) };
        if info.si_code == nix::libc::SI_QUEUE && from == server && value > 0 {
            self.0.push(value as i32);
        }
    }

    /// True when nothing was released (the common case: no scan needed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The released roots and every descendant of theirs, now.
    pub fn excluded(&self) -> HashSet<i32> {
        let mut out = HashSet::new();
        for &root in &self.0 {
            out.insert(root);
            out.extend(descendants(root));
        }
        out
    }
}

/// Queue the release of `root`'s subtree to `supervisor` (the server's side).
/// Errors: the signal could not be queued (the supervisor is gone).
pub fn release(supervisor: i32, root: i32) -> std::io::Result<()> {
    let value = nix::libc::sigval {
        sival_ptr: root as usize as *mut nix::libc::c_void,
    };
    // SAFETY: sigqueue takes a pid, a signal number and a value.
    let rc = unsafe { nix::libc::sigqueue(supervisor, RELEASE_SIGNAL as i32, value) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Wait up to `timeout` for one of `set`, with its siginfo.
pub fn wait_signal_info(
    set: &nix::sys::signal::SigSet,
    timeout: std::time::Duration,
) -> Option<(Signal, nix::libc::siginfo_t)> {
    let ts = nix::libc::timespec {
        tv_sec: timeout.as_secs() as nix::libc::time_t,
        tv_nsec: timeout.subsec_nanos() as nix::libc::c_long,
    };
    // SAFETY: siginfo_t is plain data; zeroed is a valid value to be overwritten.
    let mut info: nix::libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t and `info` a writable siginfo_t.
    let n = unsafe { nix::libc::sigtimedwait(set.as_ref(), &mut info, &ts) };
    Signal::try_from(n).ok().map(|s| (s, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_reaches_only_a_live_process_and_an_unsent_signal_counts_for_nothing() {
        // A pid that cannot exist (above the kernel's pid_max).
        assert!(release(i32::MAX - 1, 42).is_err());
        // SAFETY: a zeroed siginfo_t is a valid (empty) value.
        let info: nix::libc::siginfo_t = unsafe { std::mem::zeroed() };
        let mut released = Released::default();
        released.note(&info, 0);
        assert!(released.is_empty());
        assert!(released.excluded().is_empty());
    }

    #[test]
    fn the_server_watch_sees_a_live_server_and_a_gone_one() {
        assert!(!ServerWatch::open(std::process::id() as i32).gone());
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id() as i32;
        let watch = ServerWatch::open(pid);
        child.wait().expect("wait");
        assert!(watch.gone());
    }
}
