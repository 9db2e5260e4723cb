//! How a kernel process ended: its exit status or signal and the typed cause kernel-mcp knows
//! beyond it (a memory limit, a supervisor lost or failed), and the words that tell a person.
//! Made by [`super::process`] from `waitpid` and the supervisor's report.

use std::fmt;

use nix::sys::signal::Signal;

/// Why a kernel process ended, as far as kernel-mcp knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCause {
    /// The kernel ended on its own, or by a signal from outside kernel-mcp.
    Kernel,
    /// Its supervisor stopped the kernel's tree over its memory limit.
    MemoryLimit { used_mib: u64, limit_mib: u64 },
    /// Its supervisor refused to start it: the sandbox cannot be enforced on this host.
    SandboxRefused,
    /// Its supervisor could not start it (the program could not be executed…).
    SupervisorFailed,
    /// Its supervisor ended without reporting the kernel's end (it was killed); the server
    /// ended what was left of the tree.
    SupervisorLost,
}

/// What a tree stopped over its memory limit used, in words: "used 210 MiB, over the
/// session's limit of 200 MiB", or "reached the session's limit of 200 MiB" when the count
/// does not exceed it in whole MiB (the kernel's OOM killer acts at the limit).
pub fn memory_use_words(used_mib: u64, limit_mib: u64) -> String {
    if used_mib > limit_mib {
        format!("used {used_mib} MiB, over the session's limit of {limit_mib} MiB")
    } else {
        format!("reached the session's limit of {limit_mib} MiB")
    }
}

/// How a kernel process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code when it exited normally.
    pub code: Option<i32>,
    /// Signal number when it was killed by a signal.
    pub signal: Option<i32>,
    /// Why, beyond the status.
    pub cause: ExitCause,
}

impl ExitInfo {
    /// A kernel that exited with `code`.
    pub fn exited(code: i32) -> ExitInfo {
        ExitInfo {
            code: Some(code),
            signal: None,
            cause: ExitCause::Kernel,
        }
    }

    /// A kernel killed by signal `sig`.
    pub fn signaled(sig: i32) -> ExitInfo {
        ExitInfo {
            code: None,
            signal: Some(sig),
            cause: ExitCause::Kernel,
        }
    }

    /// A kernel whose status is unknown (a remote kernel gone, a failed wait).
    pub fn unknown() -> ExitInfo {
        ExitInfo {
            code: None,
            signal: None,
            cause: ExitCause::Kernel,
        }
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ExitCause::MemoryLimit {
            used_mib,
            limit_mib,
        } = self.cause
        {
            return write!(
                f,
                "stopped over its memory limit: its processes {}",
                memory_use_words(used_mib, limit_mib)
            );
        }
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit status {code}")?,
            (None, Some(sig)) => match Signal::try_from(sig) {
                Ok(s) => write!(f, "killed by signal {sig} ({})", s.as_str())?,
                Err(_) => write!(f, "killed by signal {sig}")?,
            },
            (None, None) => write!(f, "exited (status unknown)")?,
        }
        match self.cause {
            ExitCause::SupervisorLost => {
                write!(f, "; its supervisor was killed, kernel-mcp ended the rest")
            }
            ExitCause::SupervisorFailed => write!(f, "; its supervisor could not start it"),
            _ => Ok(()),
        }
    }
}
