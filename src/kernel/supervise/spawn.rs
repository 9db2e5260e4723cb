//! Starting the kernel under the supervisor: between `fork` and `exec` the child unblocks
//! signals, leaves the supervisor's session and process group (`setsid`: a `killpg(0)` in
//! the kernel stops at the kernel's own group), arms its own parent-death signal, joins the
//! cgroup (before it can fork, so its whole tree is counted), and enters its sandbox.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::unistd::Pid;

use crate::kernel::cgroup::Cgroup;
use crate::kernel::sandbox::apply::Prepared;

/// Spawn `argv` with `env` added, in `cgroup`, inside `prepared`; the kernel inherits
/// descriptor `inherit` (closed here afterwards, whatever happens).
/// Errors: the program cannot be run, or a step of the child's set-up failed.
pub fn kernel(
    argv: &[String],
    env: &[(String, String)],
    cgroup: Option<&Cgroup>,
    prepared: Prepared,
    inherit: Option<i32>,
) -> std::io::Result<Pid> {
    // SAFETY: the server passed this descriptor to us alone; it is closed when dropped.
    let held = inherit.map(|fd| unsafe { <OwnedFd as FromRawFd>::from_raw_fd(fd) });
    if let Some(fd) = &held {
        // Only the kernel's exec keeps it (the child clears the flag).
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )?;
    }
    let pid = spawn(argv, env, cgroup, prepared, inherit);
    drop(held);
    pid
}

fn spawn(
    argv: &[String],
    env: &[(String, String)],
    cgroup: Option<&Cgroup>,
    mut prepared: Prepared,
    inherit: Option<i32>,
) -> std::io::Result<Pid> {
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty argv"))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Opened here, written by the child: `cgroup.procs` takes the writer's own pid as "0".
    let procs = match cgroup {
        Some(g) => Some(
            std::fs::OpenOptions::new()
                .write(true)
                .open(g.procs_file())?,
        ),
        None => None,
    };
    let me = nix::unistd::getpid();
    // SAFETY: the supervisor is single-threaded, so allocation in the child cannot deadlock;
    // everything else here is a plain system call.
    unsafe {
        cmd.pre_exec(move || {
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != me {
                nix::libc::_exit(1);
            }
            if let Some(f) = &procs {
                let mut f: &std::fs::File = f;
                f.write_all(b"0")?;
            }
            if let Some(fd) = inherit
                && nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            prepared.enter()
        });
    }
    let child = cmd.spawn()?;
    Ok(Pid::from_raw(child.id() as i32))
}
