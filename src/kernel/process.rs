//! The kernel's OS process: spawn in its own process group, capture its output, watch its exit,
//! signal it, and sweep descendants.
//!
//! The kernel never inherits our stdout (in stdio mode that is the MCP stream): its stdout and
//! stderr are piped into a bounded ring buffer and `tracing` at debug level. stdin is null.
//! `JPY_PARENT_PID` is set (ipykernel exits when we go) and, on Linux, `PR_SET_PDEATHSIG` makes
//! the kernel get SIGKILL when the thread that spawned it exits, so no kernel outlives a
//! SIGKILLed server.
//!
//! A supervised kernel (`kernel-mcp supervise`, see [`super::supervise`]) is the supervisor's
//! child in a process group of its own: signals go to the supervisor, which forwards them, and
//! the supervisor's [`report`](super::supervise::report) (a pipe on fd [`REPORT_FD`]) gives
//! the kernel's pid, the cgroup that counts its memory and the typed cause of its end
//! ([`ExitCause`]).

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

pub use super::proc_tree::{any_reads_terminal, descendants, first_child, rss_bytes};

use super::cgroup::Cgroup;
use super::supervise::report::{ReportState, cause_of, read_report};
use super::types::{ExitCause, ExitInfo};

/// The variable that tells ipykernel our pid, so it exits when we go (set for every kernel).
pub const PARENT_PID_ENV: &str = "JPY_PARENT_PID";

/// Bytes of the kernel's stdout+stderr kept for error reports.
const OUTPUT_TAIL_BYTES: usize = 16 * 1024;
/// How long after the kernel exits we wait for its pipes to drain before reporting the exit.
const PIPE_DRAIN_GRACE: Duration = Duration::from_millis(300);
/// The descriptor a supervisor writes its report to (`supervise --report-fd 3`).
pub const REPORT_FD: i32 = 3;
/// The descriptor a kernel inherits from its launch hook, if any (`supervise --inherit-fd 4`:
/// the broker's dialer of a sandboxed kernel).
pub const INHERITED_FD: i32 = 4;

/// `fd` moved to a descriptor number of at least 10 (close-on-exec), above [`REPORT_FD`] and
/// [`INHERITED_FD`].
fn above_fixed_fds(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() >= 10 {
        return Ok(fd);
    }
    let moved = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))?;
    // SAFETY: fcntl returned a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(moved) })
}

/// A running (or exited) kernel process. Dropping it SIGKILLs the kernel's tree.
pub struct KernelProcess {
    /// The process we started: the kernel, or its supervisor.
    pid: i32,
    /// Whether `pid` is a supervisor (then the kernel is its child).
    supervised: bool,
    /// The kernel's own pid once known.
    kernel: std::sync::OnceLock<i32>,
    exit: watch::Receiver<Option<ExitInfo>>,
    output_tail: Arc<Mutex<VecDeque<u8>>>,
    /// What the supervisor reported.
    report: Arc<Mutex<ReportState>>,
    /// Set once we SIGKILLed the tree ourselves (then a silent supervisor is no surprise).
    killed: Arc<std::sync::atomic::AtomicBool>,
    reaped: bool,
}

impl KernelProcess {
    /// Spawn `argv` with `env` added to our environment less its secrets
    /// ([`crate::secrets::scrub`]), in `cwd`, as the leader of a new session and process
    /// group. A supervised `argv` gets the report pipe on [`REPORT_FD`], and `inherit` on
    /// [`INHERITED_FD`]. Errors: the program cannot be executed.
    pub fn spawn(
        argv: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
        supervised: bool,
        inherit: Option<OwnedFd>,
    ) -> std::io::Result<KernelProcess> {
        let pipe: Option<(OwnedFd, OwnedFd)> = if supervised {
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
            Some((r, above_fixed_fds(w)?))
        } else {
            None
        };
        // Above the fixed numbers, so that placing one never overwrites the other.
        let inherit = match inherit.filter(|_| supervised) {
            Some(fd) => Some(above_fixed_fds(fd)?),
            None => None,
        };
        let report_w = pipe.as_ref().map(|(_, w)| w.as_raw_fd());
        let inherit_fd = inherit.as_ref().map(AsRawFd::as_raw_fd);
        let mut cmd = command(argv, env, cwd, report_w, inherit_fd)?;
        let mut child = cmd.spawn()?;
        drop(inherit); // the supervisor holds it now
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let output_tail = Arc::new(Mutex::new(VecDeque::new()));
        let report = Arc::new(Mutex::new(ReportState::default()));
        let mut drains = Vec::new();
        if let Some(out) = child.stdout.take() {
            drains.push(tokio::spawn(drain_output(
                out,
                "stdout",
                pid,
                output_tail.clone(),
            )));
        }
        if let Some(err) = child.stderr.take() {
            drains.push(tokio::spawn(drain_output(
                err,
                "stderr",
                pid,
                output_tail.clone(),
            )));
        }
        if let Some((r, w)) = pipe {
            drop(w); // the supervisor holds the only writer now: EOF means it is gone
            match tokio::net::unix::pipe::Receiver::from_owned_fd(r) {
                Ok(r) => drains.push(tokio::spawn(read_report(r, pid, report.clone()))),
                Err(e) => tracing::warn!(pid, "the supervisor's report is unreadable: {e}"),
            }
        }
        let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let rx = watch_exit(child, drains, supervised, report.clone(), killed.clone());
        Ok(KernelProcess::assembled(
            pid,
            supervised,
            rx,
            output_tail,
            report,
            killed,
        ))
    }

    /// A running process this server did not spawn (a fork of a kernel, see
    /// [`super::fork`]) that leads its own process group: the kernel, or its supervisor
    /// (`supervised`, whose report comes on `report`). `exited` resolves once it is gone (a
    /// pidfd: only its parent may reap it, so its own status is what the report says);
    /// `stdout` and `stderr` are its output pipes. Signals, the exit's cause and the final
    /// sweep work as for a spawned kernel; dropping it SIGKILLs its group and tree.
    pub(crate) fn adopted(
        pid: i32,
        supervised: bool,
        exited: futures::future::BoxFuture<'static, ()>,
        stdout: impl AsyncRead + Unpin + Send + 'static,
        stderr: impl AsyncRead + Unpin + Send + 'static,
        report_pipe: Option<tokio::net::unix::pipe::Receiver>,
    ) -> KernelProcess {
        let output_tail = Arc::new(Mutex::new(VecDeque::new()));
        let report = Arc::new(Mutex::new(ReportState::default()));
        let mut drains = vec![
            tokio::spawn(drain_output(stdout, "stdout", pid, output_tail.clone())),
            tokio::spawn(drain_output(stderr, "stderr", pid, output_tail.clone())),
        ];
        if let Some(r) = report_pipe {
            drains.push(tokio::spawn(read_report(r, pid, report.clone())));
        }
        let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = watch::channel(None);
        let (state, killed_by_us) = (report.clone(), killed.clone());
        tokio::spawn(async move {
            exited.await;
            let _ = tokio::time::timeout(PIPE_DRAIN_GRACE, futures::future::join_all(drains)).await;
            let _ = tx.send(Some(exit_cause(
                pid,
                supervised,
                ExitInfo::unknown(),
                &state,
                &killed_by_us,
            )));
        });
        KernelProcess::assembled(pid, supervised, rx, output_tail, report, killed)
    }

    /// The process of `pid` once its pipes are drained and its exit is watched (`exit`).
    fn assembled(
        pid: i32,
        supervised: bool,
        exit: watch::Receiver<Option<ExitInfo>>,
        output_tail: Arc<Mutex<VecDeque<u8>>>,
        report: Arc<Mutex<ReportState>>,
        killed: Arc<std::sync::atomic::AtomicBool>,
    ) -> KernelProcess {
        KernelProcess {
            pid,
            supervised,
            kernel: std::sync::OnceLock::new(),
            exit,
            output_tail,
            report,
            killed,
            reaped: false,
        }
    }

    /// The process we started (the supervisor when supervised).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// The kernel's own pid: the supervisor's child when supervised, else [`Self::pid`].
    pub fn kernel_pid(&self) -> u32 {
        if !self.supervised {
            return self.pid as u32;
        }
        if let Some(k) = self.kernel.get() {
            return *k as u32;
        }
        let known = lock(&self.report)
            .kernel_pid
            .or_else(|| first_child(self.pid));
        match known {
            Some(k) => *self.kernel.get_or_init(|| k) as u32,
            None => self.pid as u32,
        }
    }

    /// What the supervisor reported so far (empty for an unsupervised kernel).
    pub fn report(&self) -> ReportState {
        lock(&self.report).clone()
    }

    /// `Some` once the process has exited.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// A receiver that changes to `Some` when the process exits.
    pub fn exit_watch(&self) -> watch::Receiver<Option<ExitInfo>> {
        self.exit.clone()
    }

    /// Wait up to `timeout` for the process to exit.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitInfo> {
        let mut rx = self.exit.clone();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|e| e.is_some()))
            .await
            .map(|r| r.map(|v| *v));
        match waited {
            Ok(Ok(v)) => v,
            _ => self.exit_info(),
        }
    }

    /// The last few KiB the kernel wrote to its stdout/stderr (lossy UTF-8).
    pub fn output_tail(&self) -> String {
        let buf = self.output_tail.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = buf.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Send `signal` to the kernel: to its supervisor, which forwards it to the kernel's
    /// process group; unsupervised, to the group directly (falling back to the process).
    pub fn signal(&self, signal: Signal) {
        if self.pid <= 0 || self.exit_info().is_some() && signal != Signal::SIGKILL {
            return;
        }
        signal_kernel(self.pid, self.supervised, signal);
    }

    /// Send `signal` to the process itself only (not its group), while it runs: the
    /// supervisor's SIGUSR1, which the kernel must not get.
    pub fn signal_leader(&self, signal: Signal) {
        if self.pid > 0 && self.exit_info().is_none() {
            let _ = kill(Pid::from_raw(self.pid), signal);
        }
    }

    /// A callback that stops this process although it has not exited: `note` goes to the end
    /// of [`Self::output_tail`] (so the death notice says why), then SIGTERM goes to the
    /// kernel, and SIGKILL to its whole tree 3 s later if it is still there. For a kernel
    /// that closed its sockets but lives on: its exit then arrives as any death does.
    pub fn stopper(&self, note: &'static str) -> impl FnOnce() + Send + 'static {
        let (pid, tail, exit) = (self.pid, self.output_tail.clone(), self.exit.clone());
        let (supervised, report) = (self.supervised, self.report.clone());
        let killed = self.killed.clone();
        move || {
            if pid <= 0 || exit.borrow().is_some() {
                return;
            }
            {
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.extend(b"\n".iter().chain(note.as_bytes()).chain(b"\n"));
                let excess = t.len().saturating_sub(OUTPUT_TAIL_BYTES);
                t.drain(..excess);
            }
            signal_kernel(pid, supervised, Signal::SIGTERM);
            signal_kernel(pid, supervised, Signal::SIGCONT);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                if exit.borrow().is_none() {
                    killed.store(true, std::sync::atomic::Ordering::Relaxed);
                    let cgroup = lock(&report).cgroup.clone();
                    kill_tree(pid, cgroup);
                }
            });
        }
    }

    /// SIGKILL the kernel, every descendant found in /proc (processes that left its group
    /// with `setsid`), its supervisor and everything in its cgroup; then mark the process as
    /// cleaned up.
    pub fn kill_all(&mut self) {
        if self.pid <= 0 || self.reaped {
            return;
        }
        self.killed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let cgroup = lock(&self.report).cgroup.clone();
        kill_tree(self.pid, cgroup);
        self.reaped = true;
    }
}

impl Drop for KernelProcess {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// How the kernel process `pid` ended, given its `status`: for a supervised one, the cause its
/// supervisor reported; a supervisor lost without a report has the rest of its tree ended.
fn exit_cause(
    pid: i32,
    supervised: bool,
    status: ExitInfo,
    report: &Mutex<ReportState>,
    killed_by_us: &std::sync::atomic::AtomicBool,
) -> ExitInfo {
    let info = if supervised {
        let state = lock(report).clone();
        let mut info = cause_of(status, &state);
        if info.cause == ExitCause::SupervisorLost
            && killed_by_us.load(std::sync::atomic::Ordering::Relaxed)
        {
            info.cause = ExitCause::Kernel;
        } else if info.cause == ExitCause::SupervisorLost {
            tracing::warn!(
                pid,
                "the kernel's supervisor was killed; ending the rest of its tree"
            );
            sweep_lost(pid, state.cgroup.clone());
        }
        info
    } else {
        status
    };
    tracing::debug!(pid, "kernel process ended: {info}");
    info
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `signal` to the supervisor `pid` (which forwards it), or to an unsupervised kernel's group.
fn signal_kernel(pid: i32, supervised: bool, signal: Signal) {
    let target = Pid::from_raw(pid);
    // Unsupervised: the group, falling back to the process. Supervised: the supervisor only.
    if supervised || killpg(target, signal).is_err() {
        let _ = kill(target, signal);
    }
}

/// SIGKILL `root`'s descendants (twice, for what forked meanwhile), then `root` and its
/// group, then what is left in `cgroup` — which a thread of its own empties and removes,
/// so a caller on the runtime never waits.
fn kill_tree(root: i32, cgroup: Option<Cgroup>) {
    for _ in 0..2 {
        for pid in descendants(root) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    let _ = killpg(Pid::from_raw(root), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(root), Signal::SIGKILL);
    if let Some(g) = cgroup {
        for pid in g.pids() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = std::thread::Builder::new()
            .name("kernel-mcp-cgroup".into())
            .spawn(move || {
                g.kill_all();
                g.remove();
            });
    }
}

/// After a supervisor died without reporting: its orphans are init's now, but a cgroup still
/// holds them.
fn sweep_lost(pid: i32, cgroup: Option<Cgroup>) {
    kill_tree(pid, cgroup);
}

/// The command of [`KernelProcess::spawn`]: `argv` with `env` added to our environment less
/// its secrets, in `cwd`, output piped, a new session and process group, killed with us
/// (`PR_SET_PDEATHSIG`); `report_w` (the supervisor's report pipe) lands on [`REPORT_FD`] and
/// `inherit_fd` on [`INHERITED_FD`].
fn command(
    argv: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    report_w: Option<RawFd>,
    inherit_fd: Option<RawFd>,
) -> std::io::Result<tokio::process::Command> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("kernelspec argv is empty"))?;
    let mut cmd = tokio::process::Command::new(program);
    // Our secrets stay here; what the caller passes in `env` is the kernel's.
    crate::secrets::scrub(cmd.as_std_mut());
    cmd.args(args)
        .envs(env)
        .env(PARENT_PID_ENV, std::process::id().to_string())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let parent = nix::unistd::getpid();
    // SAFETY: only async-signal-safe calls (setsid, dup2, fcntl, prctl, getppid, _exit)
    // run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // dup2 clears close-on-exec on the copy (the numbers differ: see the caller).
            if let Some(w) = report_w
                && nix::libc::dup2(w, REPORT_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = inherit_fd
                && nix::libc::dup2(fd, INHERITED_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
                // The parent may have died between fork and prctl.
                if nix::unistd::getppid() != parent {
                    nix::libc::_exit(1);
                }
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// Wait for `child` in a task of its own; the receiver gets its exit once its last words
/// are in the tail and the report is read (`drains` done, within [`PIPE_DRAIN_GRACE`]: children
/// of the kernel may hold the pipes open), with the cause the report gives.
fn watch_exit(
    mut child: tokio::process::Child,
    drains: Vec<tokio::task::JoinHandle<()>>,
    supervised: bool,
    report: Arc<Mutex<ReportState>>,
    killed: Arc<std::sync::atomic::AtomicBool>,
) -> watch::Receiver<Option<ExitInfo>> {
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let status = match child.wait().await {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                ExitInfo {
                    code: status.code(),
                    signal: status.signal(),
                    cause: ExitCause::Kernel,
                }
            }
            Err(e) => {
                tracing::warn!(pid, "waiting for kernel failed: {e}");
                ExitInfo::unknown()
            }
        };
        // Announce the exit once its last words are in the tail and the report is read
        // (bounded: children of the kernel may hold the pipes open).
        let _ = tokio::time::timeout(PIPE_DRAIN_GRACE, futures::future::join_all(drains)).await;
        let info = exit_cause(pid, supervised, status, &report, &killed);
        let _ = tx.send(Some(info));
    });
    rx
}

/// Read a child pipe to its end into the shared tail buffer, logging whole lines.
async fn drain_output(
    mut pipe: impl AsyncRead + Unpin,
    name: &'static str,
    pid: i32,
    tail: Arc<Mutex<VecDeque<u8>>>,
) {
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
            t.extend(&buf[..n]);
            let excess = t.len().saturating_sub(OUTPUT_TAIL_BYTES);
            t.drain(..excess);
        }
        line.extend_from_slice(&buf[..n]);
        while let Some(end) = line.iter().position(|&b| b == b'\n') {
            let text: Vec<u8> = line.drain(..=end).collect();
            tracing::debug!(
                pid,
                "kernel {name}: {}",
                String::from_utf8_lossy(&text).trim_end()
            );
        }
        if line.len() > OUTPUT_TAIL_BYTES {
            tracing::debug!(pid, "kernel {name}: {}", String::from_utf8_lossy(&line));
            line.clear();
        }
    }
    if !line.is_empty() {
        tracing::debug!(
            pid,
            "kernel {name}: {}",
            String::from_utf8_lossy(&line).trim_end()
        );
    }
}
