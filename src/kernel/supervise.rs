//! The kernel supervisor: `kernel-mcp supervise [--max-memory-mib N] -- ARGV…`, a small process
//! between the server and each kernel that makes sure nothing the kernel starts outlives it.
//!
//! Why a supervisor: a kernel's children can leave its process group and session
//! (`start_new_session=True`, `setsid`, a double fork), and once the kernel has exited they
//! belong to init, where no sweep finds them. The supervisor is a *child subreaper*
//! (`PR_SET_CHILD_SUBREAPER`): every orphan of the kernel's tree is re-parented to it instead of
//! init, so the whole tree stays its descendants, found through `/proc`. It ends that tree when
//! the kernel exits, when it exceeds its memory limit, and when the server dies by any signal
//! (`PR_SET_PDEATHSIG` gives it SIGTERM, and a parent check every tick backs that up). cgroups
//! would also contain the tree, but they need a delegated hierarchy that containers and CI
//! machines rarely grant, so the subreaper is the mechanism that works everywhere on Linux.
//!
//! Still out of reach: a process the kernel asks *another* long-lived process to start (a
//! system service manager, `at`, a container runtime) is not in its tree, and a process that
//! gets SIGKILL-proof by being traced or stopped in the kernel's D state lingers until it
//! wakes.
//!
//! A forked kernel (`fork_session`) gets a supervisor too, which adopts the kernel instead of
//! spawning it and watches the server instead of its parent; and any supervisor lets go of a
//! subtree the server releases to a supervisor of its own (`supervise_adopt.rs`).
//!
//! The supervisor leads the kernel's process group (the server starts it with `setsid`) and the
//! kernel stays in it, so an interrupt (SIGINT to the group) reaches the kernel; the supervisor
//! ignores it. It mirrors the kernel's exit: the same code, or the same signal raised on itself,
//! so the server sees exactly how the kernel ended.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::process::descendants;
use super::supervise_adopt::{
    RELEASE_SIGNAL, Released, ServerWatch, tree_rss_excluding, wait_signal_info,
};

/// How often the supervisor samples memory and checks that the server is alive.
const TICK: Duration = Duration::from_millis(250);

/// The line the supervisor writes to stderr when it stops a kernel over its memory limit;
/// the session finds it in the kernel's output tail.
pub const MEMORY_LIMIT_MARK: &str = "kernel-mcp: memory limit exceeded";

/// What `supervise` runs.
#[derive(Debug, Clone)]
pub struct SuperviseArgs {
    /// The kernel's argv.
    pub argv: Vec<String>,
    /// Stop the kernel when its whole tree's resident memory goes above this (MiB); 0 = none.
    pub max_memory_mib: u64,
    /// Supervise this child instead of spawning `argv` (a forked kernel, see
    /// `supervise_adopt.rs`).
    pub adopt_child: Option<i32>,
    /// Watch this server instead of the parent (no parent-death signal).
    pub server_pid: Option<i32>,
}

/// Run the supervisor to the kernel's end; the exit mirrors the kernel's.
pub fn run(args: SuperviseArgs) -> ExitCode {
    let parent = nix::unistd::getppid();
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("kernel-mcp supervise: cannot become a child subreaper: {e}");
    }
    // A forked kernel's supervisor has the source kernel as parent: it watches the server.
    let server = args.server_pid.map(ServerWatch::open);
    if server.is_none() {
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
        if nix::unistd::getppid() != parent {
            return ExitCode::from(1); // The server died before we armed the signal.
        }
    }
    let server_pid = server.as_ref().map_or(parent.as_raw(), |s| s.pid());
    let mut watched = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        RELEASE_SIGNAL,
    ] {
        watched.add(s);
    }
    // Blocked here, consumed by `sigtimedwait`; the kernel gets an unblocked mask.
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&watched), None);
    let spawned = match args.adopt_child {
        Some(pid) => super::supervise_adopt::adopt(pid),
        None => spawn_kernel(&args.argv),
    };
    let kernel = match spawned {
        Ok(pid) => pid,
        Err(e) => {
            eprintln!(
                "kernel-mcp supervise: cannot start {}: {e}",
                args.argv.join(" ")
            );
            return ExitCode::from(127);
        }
    };
    let limit = args.max_memory_mib.saturating_mul(1024 * 1024);
    let mut peak = 0u64;
    let mut last_sample = Instant::now() - TICK;
    let mut released = Released::default();
    loop {
        match wait_signal_info(&watched, TICK) {
            Some((Signal::SIGCHLD, _)) | None => {}
            // A subtree with a supervisor of its own (a fork) is no longer ours.
            Some((s, info)) if s == RELEASE_SIGNAL => released.note(&info, server_pid),
            // The server's shutdown ladder signals the whole group: the kernel got it too and
            // decides; only a server that is gone makes us end the tree ourselves.
            Some(_) => {}
        }
        if let Some(status) = reap(kernel) {
            end_tree(&released);
            return mirror(status);
        }
        let server_gone = match &server {
            Some(s) => s.gone(),
            None => nix::unistd::getppid() != parent,
        };
        if server_gone {
            end_tree(&released);
            return ExitCode::from(1);
        }
        if limit > 0 && last_sample.elapsed() >= TICK {
            last_sample = Instant::now();
            let rss = tree_rss_excluding(std::process::id() as i32, &released.excluded());
            peak = peak.max(rss);
            if rss > limit {
                eprintln!(
                    "{MEMORY_LIMIT_MARK}: the kernel's processes used {} MiB, over the session's limit of {} MiB; they were stopped",
                    peak / (1024 * 1024),
                    args.max_memory_mib
                );
                end_tree(&released);
                let _ = reap(kernel);
                return ExitCode::from(137);
            }
        }
    }
}

/// Start the kernel in our process group, with the default signal mask and its own
/// parent-death signal (it must not outlive us either).
fn spawn_kernel(argv: &[String]) -> std::io::Result<Pid> {
    use std::os::unix::process::CommandExt;
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty argv"))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    let me = nix::unistd::getpid();
    // SAFETY: only async-signal-safe calls (sigprocmask, prctl, getppid, _exit) run between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != me {
                nix::libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    Ok(Pid::from_raw(child.id() as i32))
}

/// Reap every exited child; the kernel's status once it has exited.
fn reap(kernel: Pid) -> Option<WaitStatus> {
    let mut kernel_status = None;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return kernel_status,
            Ok(status) => {
                if status.pid() == Some(kernel) {
                    kernel_status = Some(status);
                }
            }
        }
    }
}

/// SIGKILL every descendant (the kernel's whole tree, orphans included) and reap them; a
/// released subtree is left alone.
fn end_tree(released: &Released) {
    let me = std::process::id() as i32;
    let ours = || {
        let excluded = released.excluded();
        let mut all = descendants(me);
        all.retain(|p| !excluded.contains(p));
        all
    };
    for _ in 0..3 {
        let all = ours();
        if all.is_empty() {
            return;
        }
        for pid in &all {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline && !ours().is_empty() {
            let _ = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG));
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Exit as the kernel did: its code, or its signal raised on ourselves.
fn mirror(status: WaitStatus) -> ExitCode {
    match status {
        WaitStatus::Exited(_, code) => ExitCode::from(code.clamp(0, 255) as u8),
        WaitStatus::Signaled(_, sig, _) => {
            // SAFETY: resetting a disposition to the default is always sound.
            unsafe {
                let _ = nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl);
            }
            let mut only = SigSet::empty();
            only.add(sig);
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
            let _ = nix::sys::signal::raise(sig);
            ExitCode::from(128 + sig as u8)
        }
        _ => ExitCode::from(1),
    }
}
