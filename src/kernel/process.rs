//! The kernel's OS process: spawn in its own process group, capture its output, watch its exit,
//! signal the group, and sweep descendants.
//!
//! The kernel never inherits our stdout (in stdio mode that is the MCP stream): its stdout and
//! stderr are piped into a bounded ring buffer and `tracing` at debug level. stdin is null.
//! `JPY_PARENT_PID` is set (ipykernel exits when we go) and, on Linux, `PR_SET_PDEATHSIG` makes
//! the kernel get SIGKILL when the thread that spawned it exits, so no kernel outlives a
//! SIGKILLed server.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

/// Bytes of the kernel's stdout+stderr kept for error reports.
const OUTPUT_TAIL_BYTES: usize = 16 * 1024;
/// How long after the kernel exits we wait for its pipes to drain before reporting the exit.
const PIPE_DRAIN_GRACE: Duration = Duration::from_millis(300);

/// How a kernel process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code when it exited normally.
    pub code: Option<i32>,
    /// Signal number when it was killed by a signal.
    pub signal: Option<i32>,
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit status {code}"),
            (None, Some(sig)) => match Signal::try_from(sig) {
                Ok(s) => write!(f, "killed by signal {sig} ({})", s.as_str()),
                Err(_) => write!(f, "killed by signal {sig}"),
            },
            (None, None) => write!(f, "exited (status unknown)"),
        }
    }
}

/// A running (or exited) kernel process. Dropping it SIGKILLs the process group.
pub struct KernelProcess {
    /// The process we started: the kernel, or its supervisor.
    pid: i32,
    /// Whether `pid` is a supervisor (then the kernel is its child).
    supervised: bool,
    /// The kernel's own pid once known.
    kernel: std::sync::OnceLock<i32>,
    exit: watch::Receiver<Option<ExitInfo>>,
    output_tail: Arc<Mutex<VecDeque<u8>>>,
    reaped: bool,
}

impl KernelProcess {
    /// Spawn `argv` with `env` added to our environment, in `cwd`, as the leader of a new session
    /// and process group. Errors: the program cannot be executed.
    pub fn spawn(
        argv: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
        supervised: bool,
    ) -> std::io::Result<KernelProcess> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("kernelspec argv is empty"))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .envs(env)
            .env("JPY_PARENT_PID", std::process::id().to_string())
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        let parent = nix::unistd::getpid();
        // SAFETY: only async-signal-safe calls (setsid, prctl, getppid, _exit) run between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                #[cfg(target_os = "linux")]
                {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                        .map_err(std::io::Error::from)?;
                    // The parent may have died between fork and prctl.
                    if nix::unistd::getppid() != parent {
                        nix::libc::_exit(1);
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let output_tail = Arc::new(Mutex::new(VecDeque::new()));
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
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let info = match child.wait().await {
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    ExitInfo {
                        code: status.code(),
                        signal: status.signal(),
                    }
                }
                Err(e) => {
                    tracing::warn!(pid, "waiting for kernel failed: {e}");
                    ExitInfo {
                        code: None,
                        signal: None,
                    }
                }
            };
            // Announce the exit once its last words are in the tail (bounded: children of the
            // kernel may hold the pipes open).
            let _ = tokio::time::timeout(PIPE_DRAIN_GRACE, futures::future::join_all(drains)).await;
            tracing::debug!(pid, "kernel process ended: {info}");
            let _ = tx.send(Some(info));
        });
        Ok(KernelProcess {
            pid,
            supervised,
            kernel: std::sync::OnceLock::new(),
            exit: rx,
            output_tail,
            reaped: false,
        })
    }

    /// A running process this server did not spawn (a fork of a kernel, see
    /// [`super::fork`]) that leads its own process group: the kernel, or its supervisor
    /// (`supervised`). `exit` turns `Some` once it is gone, and `output_tail` is fed by its
    /// output pipes (see [`drain_pipes`]). Signals and the final sweep work as for a spawned
    /// kernel; dropping it SIGKILLs its group and tree.
    pub(crate) fn adopted(
        pid: i32,
        supervised: bool,
        exit: watch::Receiver<Option<ExitInfo>>,
        output_tail: OutputTail,
    ) -> KernelProcess {
        KernelProcess {
            pid,
            supervised,
            kernel: std::sync::OnceLock::new(),
            exit,
            output_tail,
            reaped: false,
        }
    }

    /// The kernel's process id (also its process group id).
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
        match first_child(self.pid) {
            Some(k) => *self.kernel.get_or_init(|| k) as u32,
            None => self.pid as u32,
        }
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

    /// Send `signal` to the process group, falling back to the process.
    pub fn signal(&self, signal: Signal) {
        if self.pid <= 0 || self.exit_info().is_some() && signal != Signal::SIGKILL {
            return;
        }
        if killpg(Pid::from_raw(self.pid), signal).is_err() {
            let _ = kill(Pid::from_raw(self.pid), signal);
        }
    }

    /// A callback that stops this process although it has not exited: `note` goes to the end
    /// of [`Self::output_tail`] (so the death notice says why), then SIGTERM goes to the
    /// group, and SIGKILL 3 s later if it is still there. For a kernel that closed its sockets
    /// but lives on: its exit then arrives as any death does.
    pub fn stopper(&self, note: &'static str) -> impl FnOnce() + Send + 'static {
        let (pid, tail, exit) = (self.pid, self.output_tail.clone(), self.exit.clone());
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
            let group = Pid::from_raw(pid);
            let _ = killpg(group, Signal::SIGTERM);
            let _ = killpg(group, Signal::SIGCONT);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                if exit.borrow().is_none() {
                    let _ = killpg(group, Signal::SIGKILL);
                }
            });
        }
    }

    /// SIGKILL the process group and every descendant found in /proc (processes that left the
    /// group with `setsid`), then mark the process as cleaned up.
    pub fn kill_all(&mut self) {
        if self.pid <= 0 || self.reaped {
            return;
        }
        let descendants = descendants(self.pid);
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        for pid in descendants {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        self.reaped = true;
    }
}

impl Drop for KernelProcess {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The last bytes a kernel wrote, shared by the tasks that read its pipes.
pub(crate) type OutputTail = Arc<Mutex<VecDeque<u8>>>;

/// Read `stdout` and `stderr` (pipes of process `pid`) into a new tail, as a spawned kernel's
/// are; the tasks end at EOF.
pub(crate) fn drain_pipes(
    pid: i32,
    stdout: impl AsyncRead + Unpin + Send + 'static,
    stderr: impl AsyncRead + Unpin + Send + 'static,
) -> (OutputTail, Vec<tokio::task::JoinHandle<()>>) {
    let tail: OutputTail = Arc::new(Mutex::new(VecDeque::new()));
    let drains = vec![
        tokio::spawn(drain_output(stdout, "stdout", pid, tail.clone())),
        tokio::spawn(drain_output(stderr, "stderr", pid, tail.clone())),
    ];
    (tail, drains)
}

/// Append `line` to `tail` (bounded like the pipes' bytes), e.g. why we stopped a kernel.
pub(crate) fn append_note(tail: &OutputTail, line: &str) {
    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
    t.extend(b"\n".iter().chain(line.as_bytes()).chain(b"\n"));
    let excess = t.len().saturating_sub(OUTPUT_TAIL_BYTES);
    t.drain(..excess);
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

/// True if one of `pids` is blocked in `read(0, …)` on a terminal: code waiting for input that
/// a pexpect-driven kernel will never deliver. (pexpect gives the shell its own session, so
/// callers pass the kernel's descendants, not its process group.) Linux only (/proc).
pub fn any_reads_terminal(pids: &[i32]) -> bool {
    pids.iter().any(|pid| {
        let path = std::path::PathBuf::from(format!("/proc/{pid}"));
        // `/proc/<pid>/syscall`: number then arguments; read(2) is 0 on x86_64, 63 on aarch64.
        let reading_fd0 = std::fs::read_to_string(path.join("syscall"))
            .ok()
            .is_some_and(|s| {
                let mut parts = s.split_whitespace();
                let nr = parts.next();
                let fd = parts.next();
                matches!(nr, Some("0") | Some("63")) && fd == Some("0x0")
            });
        reading_fd0
            && std::fs::read_link(path.join("fd/0"))
                .is_ok_and(|t| t.starts_with("/dev/pts") || t.starts_with("/dev/tty"))
    })
}

/// The resident memory (bytes) of `root`'s descendants, from `/proc/<pid>/statm` (Linux; 0
/// elsewhere). Processes that vanish while being read count as 0.
pub fn tree_rss_bytes(root: i32) -> u64 {
    descendants(root).into_iter().map(rss_bytes).sum()
}

/// The resident memory (bytes) of one process, from `/proc/<pid>/statm`; 0 when unknown.
pub fn rss_bytes(pid: i32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) }.max(4096) as u64;
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}

/// The first child of `pid` (the kernel under its supervisor), from
/// `/proc/<pid>/task/<pid>/children`.
pub fn first_child(pid: i32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// All live descendants of `root`, from the ppid links in /proc (Linux; empty elsewhere).
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parent_of = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Format: pid (comm) state ppid ...; comm may contain spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<i32>().ok())
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}
