//! The kernel supervisor: `kernel-mcp supervise [--max-memory-mib N] [--sandbox POLICY
//! [--sandbox-network]] [--connection-file F] [--report-fd FD] [--limit-file F] -- ARGV…`, a small
//! single-threaded process between the server and each local kernel. It owns three promises:
//!
//! 1. **Nothing the kernel starts outlives it.** The supervisor is a *child subreaper*
//!    (`PR_SET_CHILD_SUBREAPER`), so every orphan of the kernel's tree (`start_new_session`,
//!    `setsid`, a double fork) is re-parented to it, and it kills the whole tree — and
//!    everything in the kernel's cgroup — when the kernel exits, goes over its memory limit,
//!    or the server dies (`PR_SET_PDEATHSIG`, and a parent check every tick).
//! 2. **The kernel cannot undo that.** The kernel runs in a session and process group of its
//!    own (so `os.killpg(0, 9)` or `kill -9 0` reach only the kernel's group), and in a
//!    Landlock domain that scopes signals and ptrace to its own tree (ABI ≥ 6), so
//!    `os.kill(os.getppid(), 9)` is refused; a `prlimit` on the supervisor is refused by
//!    seccomp. The server's signals (interrupt, the shutdown ladder) go to the supervisor,
//!    which forwards them to the kernel's group.
//! 3. **Memory counted as used.** A cgroup where one can be created (the kernel's charge,
//!    limit enforced by the kernel: see `cgroup`), else PSS plus shared-memory files
//!    (`usage`), sampled every tick.
//!
//! Under a sandbox policy it also confines the kernel (see `sandbox`): a private tmp,
//! Landlock rules, no capabilities, seccomp filters — applied between `fork` and `exec`, or
//! the kernel is not started at all (`refused` in the report).
//!
//! What it tells the server goes through [`report`]; it mirrors the kernel's exit (the same
//! code, or the same signal raised on itself) so the server sees how the kernel ended. When
//! the server dies first, it also removes the kernel's files the server left ([`leftovers`]).
//!
//! A forked kernel (`fork_session`) gets a supervisor too, which adopts the kernel instead of
//! spawning it, watches the server instead of its parent, and moves it into a cgroup of its
//! own; and any supervisor lets go of a subtree the server releases to a supervisor of its
//! own ([`adopt`]).
//!
//! Still out of reach: a process the kernel asks *another* long-lived process to start (a
//! service manager, `at`, a container runtime), and without Landlock ABI 6 a direct
//! `kill(getppid())` (the kernel's tree then dies with the supervisor, but an orphan that
//! left it escapes unless a cgroup holds it).

pub mod adopt;
mod leftovers;
pub mod report;
mod spawn;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::cgroup::Cgroup;
use super::process::descendants;
use super::sandbox::apply::{ApplyError, Prepared};
use super::sandbox::paths::{Plan, PlanInput};
use super::sandbox::rules::{Protected, Refusal};
use super::sandbox::{HostSupport, Policy, Sandbox};
use adopt::{RELEASE_SIGNAL, Released, ServerWatch};
use report::{Report, Reporter};
use watch::{Server, Supervision};

/// How often the supervisor samples memory and checks that the server is alive.
const TICK: Duration = Duration::from_millis(250);

/// The parent-death signal. It comes when the server's thread that started the supervisor
/// exits, which is at the server's exit but before the whole server is gone (a SIGKILLed
/// server's threads end one by one), so it is not forwarded to the kernel: the supervisor
/// waits (up to [`SERVER_EXIT_GRACE`]) for the server to be gone, then ends the kernel's tree
/// and removes its files ([`leftovers`]).
const SERVER_DEATH_SIGNAL: Signal = Signal::SIGUSR2;

/// How long the supervisor waits for the server to be gone after [`SERVER_DEATH_SIGNAL`].
const SERVER_EXIT_GRACE: Duration = Duration::from_secs(2);

/// The signals the supervisor forwards to the kernel's process group.
const FORWARDED: [Signal; 5] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGCONT,
];

/// What `supervise` runs.
#[derive(Debug, Clone, Default)]
pub struct SuperviseArgs {
    /// The kernel's argv.
    pub argv: Vec<String>,
    /// Stop the kernel when its whole tree's memory goes above this (MiB); 0 = none.
    pub max_memory_mib: u64,
    /// The sandbox policy and network.
    pub sandbox: Sandbox,
    /// The kernel's connection file (its directory becomes readable under a sandbox, its
    /// ports bindable); removed with its siblings should the server die first.
    pub connection_file: Option<PathBuf>,
    /// Where to write the [`report`].
    pub report_fd: Option<i32>,
    /// Where the server can change the memory limit while the kernel runs (a kernel from the
    /// warm pool gets its session's limit so): the file holds the limit in MiB and is read
    /// when SIGUSR1 arrives, then removed once the limit is in force (the server waits for
    /// that); a missing or unreadable file keeps the limit.
    pub limit_file: Option<PathBuf>,
    /// Supervise this child instead of spawning `argv` (a forked kernel, see [`adopt`]); it
    /// keeps the sandbox it inherited from its source.
    pub adopt_child: Option<i32>,
    /// Watch this server instead of the parent (no parent-death signal).
    pub server_pid: Option<i32>,
    /// What no grant may reach ([`Protected`] as JSON, from the server); `None`: this
    /// process's user's (see [`Protected::for_user`]).
    pub protected: Option<String>,
    /// A descriptor the kernel inherits at the same number (a sandboxed kernel's broker
    /// dialer); the supervisor closes its own copy once the kernel runs.
    pub inherit_fd: Option<i32>,
}

/// Run the supervisor to the kernel's end; the exit mirrors the kernel's.
pub fn run(args: SuperviseArgs) -> ExitCode {
    let mut reporter = Reporter::new(args.report_fd);
    let (server, watched) = match arm(&args) {
        Ok(armed) => armed,
        Err(code) => return code,
    };
    let host = HostSupport::detect();
    if let Err(e) = host.check(args.sandbox) {
        eprintln!("kernel-mcp supervise: {e}");
        reporter.send(&Report::Refused { missing: e.missing });
        return ExitCode::from(126);
    }
    let cgroup = memory_cgroup(&args, &host);
    let mut cleanup = Cleanup {
        cgroup: cgroup.clone(),
        tmp: None,
    };
    let started = match args.adopt_child {
        // The fork scopes its own signals (the helper), where the host can.
        Some(pid) => match adopt::adopt(pid, cgroup.as_ref()) {
            Ok(k) => Ok((k, host.signal_scoping)),
            Err(e) => {
                let error = format!("cannot supervise process {pid}: {e}");
                eprintln!("kernel-mcp supervise: {error}");
                cleanup.run();
                reporter.send(&Report::Failed { error });
                Err(ExitCode::from(127))
            }
        },
        None => start(&args, &host, cgroup.as_ref(), &mut cleanup, &mut reporter),
    };
    let (kernel, signal_scoped) = match started {
        Ok(k) => k,
        Err(code) => return code,
    };
    reporter.send(&Report::Started {
        kernel_pid: kernel.as_raw(),
        cgroup: cgroup.clone(),
        sandbox: match args.adopt_child {
            Some(_) => "inherited".into(),
            None => args.sandbox.policy.as_str().into(),
        },
        signal_scoped,
    });
    let supervision = Supervision {
        args: &args,
        kernel,
        cgroup,
        server,
        cleanup,
        reporter,
        limit_mib: args.max_memory_mib,
        peak: 0,
        released: Released::default(),
    };
    supervision.watch(&watched)
}

/// Become the kernel tree's subreaper, watch the server (the parent-death signal, or a
/// forked kernel's server by pid), and block the signals the supervisor waits for.
/// Errors: exit code 1 when the server died before the signal was armed.
fn arm(args: &SuperviseArgs) -> Result<(Server, SigSet), ExitCode> {
    let parent = nix::unistd::getppid();
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("kernel-mcp supervise: cannot become a child subreaper: {e}");
    }
    // A forked kernel's supervisor has the source kernel as parent: it watches the server.
    let watch = args.server_pid.map(ServerWatch::open);
    if watch.is_none() {
        let _ = nix::sys::prctl::set_pdeathsig(SERVER_DEATH_SIGNAL);
        if nix::unistd::getppid() != parent {
            return Err(ExitCode::from(1)); // The server died before we armed the signal.
        }
    }
    let mut watched = SigSet::empty();
    watched.add(Signal::SIGCHLD);
    watched.add(RELEASE_SIGNAL);
    for s in FORWARDED {
        watched.add(s);
    }
    watched.add(Signal::SIGUSR1);
    watched.add(SERVER_DEATH_SIGNAL);
    // Blocked here, consumed by `sigtimedwait`; the kernel gets an unblocked mask.
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&watched), None);
    Ok((Server { watch, parent }, watched))
}

/// The kernel's cgroup, with the memory limit, where the host can make one (beside the
/// supervisor's own for an adopted kernel); `None`: memory is counted as PSS.
fn memory_cgroup(args: &SuperviseArgs, host: &HostSupport) -> Option<Cgroup> {
    host.memory_cgroup?;
    let limit = args.max_memory_mib.saturating_mul(1024 * 1024);
    let create = match args.adopt_child {
        Some(_) => Cgroup::create_beside_own,
        None => Cgroup::create,
    };
    create((limit > 0).then_some(limit))
        .inspect_err(|e| eprintln!("kernel-mcp supervise: no cgroup ({e}); counting memory as PSS"))
        .ok()
}

/// The limit (MiB) in `file`, if it holds a number.
fn read_limit(file: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// Sandbox and spawn the kernel; its pid and whether its signals are scoped. Errors: the exit
/// code, once the refusal or failure is reported and cleaned up.
fn start(
    args: &SuperviseArgs,
    host: &HostSupport,
    cgroup: Option<&Cgroup>,
    cleanup: &mut Cleanup,
    reporter: &mut Reporter,
) -> Result<(Pid, bool), ExitCode> {
    let mut env = Vec::new();
    let prepared = match prepare(args, host, cleanup, &mut env) {
        Ok(p) => p,
        Err(refusal) => {
            eprintln!("kernel-mcp supervise: {refusal}");
            cleanup.run();
            reporter.send(&Report::Refused {
                missing: vec![refusal.to_string()],
            });
            return Err(ExitCode::from(126));
        }
    };
    let signal_scoped = prepared.signal_scoped;
    match spawn::kernel(&args.argv, &env, cgroup, prepared, args.inherit_fd) {
        Ok(pid) => Ok((pid, signal_scoped)),
        Err(e) => {
            let error = format!("cannot start {}: {e}", args.argv.join(" "));
            eprintln!("kernel-mcp supervise: {error}");
            cleanup.run();
            reporter.send(&Report::Failed { error });
            Err(ExitCode::from(127))
        }
    }
}

/// What could not be enforced, so the kernel is not started (reported as `refused`).
#[derive(Debug, thiserror::Error)]
enum PrepareError {
    #[error("containment: {0}")]
    Containment(ApplyError),
    #[error("a sandboxed kernel needs --connection-file")]
    NoConnectionFile,
    #[error("cannot read {}", .0.display())]
    ConnectionFile(PathBuf),
    #[error("the connection file has no directory")]
    ConnectionDir,
    #[error("cannot create the kernel's private tmp: {0}")]
    PrivateTmp(std::io::Error),
    #[error("no working directory: {0}")]
    Cwd(std::io::Error),
    #[error("the server's --protected is not valid: {0}")]
    Protected(serde_json::Error),
    #[error("no sandbox grants {0}")]
    NotGranted(Refusal),
    #[error(transparent)]
    Sandbox(ApplyError),
}

/// Build the kernel's sandbox (or its containment under `none`): the private tmp and the
/// environment that points into it, the plan, the Landlock ruleset and seccomp programs.
/// Errors: what could not be enforced.
fn prepare(
    args: &SuperviseArgs,
    host: &HostSupport,
    cleanup: &mut Cleanup,
    env: &mut Vec<(String, String)>,
) -> Result<Prepared, PrepareError> {
    if args.sandbox.policy == Policy::None {
        return Prepared::containment(host).map_err(PrepareError::Containment);
    }
    let Some(connection_file) = &args.connection_file else {
        return Err(PrepareError::NoConnectionFile);
    };
    let info: super::connection::ConnectionInfo = std::fs::read(connection_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| PrepareError::ConnectionFile(connection_file.clone()))?;
    let connection_dir = connection_file
        .parent()
        .ok_or(PrepareError::ConnectionDir)?;
    let tmp = tempfile::Builder::new()
        .prefix("kernel-mcp-sandbox-")
        .tempdir()
        .map_err(PrepareError::PrivateTmp)?
        .keep();
    cleanup.tmp = Some(tmp.clone());
    for (var, sub) in [
        ("TMPDIR", ""),
        ("TMP", ""),
        ("TEMP", ""),
        ("TEMPDIR", ""),
        ("IPYTHONDIR", "ipython"),
        ("MPLCONFIGDIR", "matplotlib"),
        ("XDG_CACHE_HOME", "cache"),
    ] {
        let dir = tmp.join(sub);
        let _ = std::fs::create_dir_all(&dir);
        env.push((var.into(), dir.display().to_string()));
    }
    seed_matplotlib_cache(&tmp.join("matplotlib"));
    let cwd = std::env::current_dir().map_err(PrepareError::Cwd)?;
    let lookup = |k: &str| std::env::var(k).ok();
    let protected = match &args.protected {
        Some(json) => serde_json::from_str(json).map_err(PrepareError::Protected)?,
        None => Protected::for_user(),
    };
    let plan = Plan::build(&PlanInput {
        policy: args.sandbox.policy,
        cwd: &cwd,
        argv: &args.argv,
        env: &lookup,
        connection_dir,
        private_tmp: &tmp,
        protected: &protected,
    })
    .map_err(PrepareError::NotGranted)?;
    for r in &plan.dropped {
        eprintln!("kernel-mcp supervise: not granted to the sandboxed kernel: {r}");
    }
    let ports = [
        info.shell_port,
        info.iopub_port,
        info.stdin_port,
        info.control_port,
        info.hb_port,
    ];
    Prepared::sandbox(host, &plan, &ports, args.sandbox.network).map_err(PrepareError::Sandbox)
}

/// Copy matplotlib's font list from the user's cache into the private `MPLCONFIGDIR`, so the
/// first plot does not rebuild it (the sandbox cannot read the user's cache).
fn seed_matplotlib_cache(into: &std::path::Path) {
    let mut sources = Vec::new();
    if let Some(d) = std::env::var_os("MPLCONFIGDIR") {
        sources.push(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        sources.push(PathBuf::from(d).join("matplotlib"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        sources.push(PathBuf::from(h).join(".cache/matplotlib"));
    }
    for dir in sources {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with("fontlist") {
                let _ = std::fs::copy(e.path(), into.join(&name));
            }
        }
    }
}

/// What the supervisor leaves behind it: the cgroup and the private tmp.
struct Cleanup {
    cgroup: Option<Cgroup>,
    tmp: Option<PathBuf>,
}

impl Cleanup {
    fn run(&mut self) {
        if let Some(g) = self.cgroup.take() {
            g.kill_all();
            g.remove();
        }
        if let Some(t) = self.tmp.take() {
            let _ = std::fs::remove_dir_all(t);
        }
    }
}

/// The report line for the kernel's exit.
fn exit_report(status: Option<WaitStatus>) -> Report {
    match status {
        Some(WaitStatus::Exited(_, code)) => Report::Exit {
            code: Some(code),
            signal: None,
        },
        Some(WaitStatus::Signaled(_, sig, _)) => Report::Exit {
            code: None,
            signal: Some(sig as i32),
        },
        _ => Report::Exit {
            code: None,
            signal: None,
        },
    }
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

/// The kernel's status after it was killed (bounded: 2 s).
fn reap_blocking(kernel: Pid) -> Option<WaitStatus> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Some(s) = reap(kernel) {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// SIGKILL every descendant (the kernel's whole tree, orphans included) and everything in
/// its cgroup, and reap them; a released subtree (a fork's) is left alone.
fn end_tree(cgroup: Option<&Cgroup>, released: &Released) {
    let me = std::process::id() as i32;
    let ours = || {
        let mut all = descendants(me);
        if !released.is_empty() {
            let excluded = released.excluded();
            all.retain(|p| !excluded.contains(p));
        }
        all
    };
    for _ in 0..3 {
        let all = ours();
        if all.is_empty() {
            break;
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
    if let Some(g) = cgroup {
        // What left our tree another way (a process the kernel moved out of it cannot).
        g.kill_all();
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
