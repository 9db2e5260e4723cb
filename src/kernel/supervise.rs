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
//! The supervisor leads the kernel's process group (the server starts it with `setsid`) and the
//! kernel stays in it, so an interrupt (SIGINT to the group) reaches the kernel; the supervisor
//! ignores it. It mirrors the kernel's exit: the same code, or the same signal raised on itself,
//! so the server sees exactly how the kernel ended.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::process::{descendants, tree_rss_bytes};

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
    /// Where the server can change that limit while the kernel runs (a kernel from the warm
    /// pool gets its session's limit so): the file holds the limit in MiB and is read when
    /// SIGUSR1 arrives and on each tick; a missing or unreadable file keeps the limit.
    pub limit_file: Option<std::path::PathBuf>,
}

/// Run the supervisor to the kernel's end; the exit mirrors the kernel's.
pub fn run(args: SuperviseArgs) -> ExitCode {
    let parent = nix::unistd::getppid();
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("kernel-mcp supervise: cannot become a child subreaper: {e}");
    }
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
    if nix::unistd::getppid() != parent {
        return ExitCode::from(1); // The server died before we armed the signal.
    }
    let mut watched = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
    ] {
        watched.add(s);
    }
    // Blocked here, consumed by `sigtimedwait`; the kernel gets an unblocked mask.
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&watched), None);
    let kernel = match spawn_kernel(&args.argv) {
        Ok(pid) => pid,
        Err(e) => {
            eprintln!(
                "kernel-mcp supervise: cannot start {}: {e}",
                args.argv.join(" ")
            );
            return ExitCode::from(127);
        }
    };
    let mut limit_mib = args.max_memory_mib;
    let mut peak = 0u64;
    let mut last_sample = Instant::now() - TICK;
    loop {
        match wait_signal(&watched, TICK) {
            Some(Signal::SIGCHLD) | None => {}
            // The server's shutdown ladder signals the whole group: the kernel got it too and
            // decides; only a server that is gone makes us end the tree ourselves.
            Some(_) => {}
        }
        if let Some(status) = reap(kernel) {
            end_tree();
            return mirror(status);
        }
        if nix::unistd::getppid() != parent {
            end_tree();
            return ExitCode::from(1);
        }
        // A new limit applies at once (it may already be exceeded).
        let changed = args
            .limit_file
            .as_deref()
            .and_then(read_limit)
            .filter(|&mib| mib != limit_mib);
        if let Some(mib) = changed {
            limit_mib = mib;
            last_sample = Instant::now() - TICK;
        }
        let limit = limit_mib.saturating_mul(1024 * 1024);
        if limit > 0 && last_sample.elapsed() >= TICK {
            last_sample = Instant::now();
            let rss = tree_rss_bytes(std::process::id() as i32);
            peak = peak.max(rss);
            if rss > limit {
                eprintln!(
                    "{MEMORY_LIMIT_MARK}: the kernel's processes used {} MiB, over the session's limit of {} MiB; they were stopped",
                    peak / (1024 * 1024),
                    limit_mib
                );
                end_tree();
                let _ = reap(kernel);
                return ExitCode::from(137);
            }
        }
    }
}

/// The limit (MiB) in `file`, if it holds a number.
fn read_limit(file: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
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

/// Wait up to `timeout` for one of `set`.
fn wait_signal(set: &SigSet, timeout: Duration) -> Option<Signal> {
    let ts = nix::libc::timespec {
        tv_sec: timeout.as_secs() as nix::libc::time_t,
        tv_nsec: timeout.subsec_nanos() as nix::libc::c_long,
    };
    // SAFETY: `set` is a valid sigset_t; a null siginfo pointer is allowed.
    let n = unsafe { nix::libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
    Signal::try_from(n).ok()
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

/// SIGKILL every descendant (the kernel's whole tree, orphans included) and reap them.
fn end_tree() {
    let me = std::process::id() as i32;
    for _ in 0..3 {
        let all = descendants(me);
        if all.is_empty() {
            return;
        }
        for pid in &all {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline && !descendants(me).is_empty() {
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
