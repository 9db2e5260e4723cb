//! What the supervisor tells the server about its kernel: one JSON object per line on a pipe
//! the server hands it (`--report-fd`; never inherited by the kernel). This is the typed side
//! channel across the process boundary: the kernel's pid, where its memory is counted, a
//! refusal to sandbox, a memory-limit stop, the kernel's own exit. The kernel's stdout and
//! stderr stay the kernel's.
//!
//! Lines arrive in this order: `started` (or `refused` / `failed`, then nothing), at most one
//! `memory_limit`, then `exit`. A supervisor that ends without `exit` was killed: the server
//! then ends what is left of the tree itself (see `KernelProcess`). The server's side —
//! reading the lines ([`read_report`]) and the typed cause of an exit ([`cause_of`]) — is
//! here too.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

use crate::kernel::cgroup::Cgroup;
use crate::kernel::types::{ExitCause, ExitInfo};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Longest report line the server reads; longer ones are dropped.
pub const MAX_LINE: usize = 16 * 1024;

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Report {
    /// The kernel runs: its pid, and the cgroup counting its memory (`None`: PSS).
    Started {
        kernel_pid: i32,
        cgroup: Option<Cgroup>,
        /// The sandbox policy applied (`none`: containment only).
        sandbox: String,
        /// Whether Landlock keeps the kernel from signalling processes outside its tree.
        signal_scoped: bool,
    },
    /// The sandbox cannot be enforced here; the kernel was not started.
    Refused { missing: Vec<String> },
    /// The supervisor could not start the kernel.
    Failed { error: String },
    /// The kernel's tree went over its memory limit and is being stopped.
    MemoryLimit { used_mib: u64, limit_mib: u64 },
    /// The kernel exited (the supervisor exits the same way next).
    Exit {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

impl Report {
    /// Parse one line; `None` for anything else (a supervisor of another version).
    pub fn parse(line: &[u8]) -> Option<Report> {
        serde_json::from_slice(line).ok()
    }
}

/// The supervisor's writing end.
pub struct Reporter(Option<std::fs::File>);

impl Reporter {
    /// Take over `fd` (marked close-on-exec, so the kernel never holds it); `None`: reports
    /// go nowhere (a supervisor run by hand).
    pub fn new(fd: Option<i32>) -> Reporter {
        Reporter(fd.and_then(|fd| {
            // SAFETY: F_SETFD on a descriptor number; a bad one fails with EBADF.
            let ok = unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) };
            // SAFETY: the server passed this descriptor to us alone.
            (ok == 0).then(|| std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
        }))
    }

    /// Send one line (best effort: a server that is gone reads nothing anyway).
    pub fn send(&mut self, report: &Report) {
        if let Some(f) = &mut self.0
            && let Ok(mut line) = serde_json::to_vec(report)
        {
            line.push(b'\n');
            let _ = f.write_all(&line);
        }
    }
}

/// What the server learned from a supervisor's report so far.
#[derive(Debug, Clone, Default)]
pub struct ReportState {
    pub kernel_pid: Option<i32>,
    pub cgroup: Option<Cgroup>,
    pub signal_scoped: bool,
    pub refused: Option<Vec<String>>,
    pub failed: Option<String>,
    pub memory_limit: Option<(u64, u64)>,
    /// The kernel's own exit, once reported.
    pub exit: Option<(Option<i32>, Option<i32>)>,
}

impl ReportState {
    /// Fold one report line in.
    pub fn apply(&mut self, report: Report) {
        match report {
            Report::Started {
                kernel_pid,
                cgroup,
                signal_scoped,
                ..
            } => {
                self.kernel_pid = Some(kernel_pid);
                self.cgroup = cgroup;
                self.signal_scoped = signal_scoped;
            }
            Report::Refused { missing } => self.refused = Some(missing),
            Report::Failed { error } => self.failed = Some(error),
            Report::MemoryLimit {
                used_mib,
                limit_mib,
            } => self.memory_limit = Some((used_mib, limit_mib)),
            Report::Exit { code, signal } => self.exit = Some((code, signal)),
        }
    }

    /// The cgroup directory, for the server's clean-up after a lost supervisor.
    pub fn cgroup_path(&self) -> Option<PathBuf> {
        self.cgroup.as_ref().map(|c| c.path.clone())
    }
}

/// The exit of a supervised kernel: the supervisor's status, with the cause its report gives.
pub(crate) fn cause_of(status: ExitInfo, report: &ReportState) -> ExitInfo {
    let cause = if let Some((used_mib, limit_mib)) = report.memory_limit {
        ExitCause::MemoryLimit {
            used_mib,
            limit_mib,
        }
    } else if report.refused.is_some() {
        ExitCause::SandboxRefused
    } else if report.failed.is_some() {
        ExitCause::SupervisorFailed
    } else if report.exit.is_none() {
        ExitCause::SupervisorLost
    } else {
        ExitCause::Kernel
    };
    match (cause, report.exit) {
        // The kernel's own status, where the supervisor reported it.
        (ExitCause::Kernel | ExitCause::MemoryLimit { .. }, Some((code, signal))) => ExitInfo {
            code,
            signal,
            cause,
        },
        _ => ExitInfo { cause, ..status },
    }
}

/// Read the supervisor's report lines into `state` until it closes the pipe.
pub(crate) async fn read_report(
    mut pipe: tokio::net::unix::pipe::Receiver,
    pid: i32,
    state: Arc<Mutex<ReportState>>,
) {
    let mut buf = vec![0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        line.extend_from_slice(&buf[..n]);
        while let Some(end) = line.iter().position(|&b| b == b'\n') {
            let text: Vec<u8> = line.drain(..=end).collect();
            match Report::parse(&text) {
                Some(r) => {
                    tracing::debug!(
                        pid,
                        "supervisor report: {}",
                        String::from_utf8_lossy(&text).trim_end()
                    );
                    lock(&state).apply(r);
                }
                None => tracing::debug!(pid, "unreadable supervisor report line"),
            }
        }
        if line.len() > MAX_LINE {
            line.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_round_trip_and_fold_into_the_state() {
        let lines = [
            Report::Started {
                kernel_pid: 42,
                cgroup: None,
                sandbox: "workspace".into(),
                signal_scoped: true,
            },
            Report::MemoryLimit {
                used_mib: 310,
                limit_mib: 300,
            },
            Report::Exit {
                code: None,
                signal: Some(9),
            },
        ];
        let mut state = ReportState::default();
        for r in lines {
            let text = serde_json::to_vec(&r).unwrap();
            assert_eq!(Report::parse(&text), Some(r.clone()));
            state.apply(r);
        }
        assert_eq!(state.kernel_pid, Some(42));
        assert_eq!(state.memory_limit, Some((310, 300)));
        assert_eq!(state.exit, Some((None, Some(9))));
        assert_eq!(Report::parse(b"kernel-mcp: not json"), None);
    }
}
