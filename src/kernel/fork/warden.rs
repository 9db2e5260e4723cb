//! The fork's memory limit, enforced by this server: the supervisor's rule (the resident
//! memory of the kernel and every process it started, sampled every 250 ms) and its notice
//! (a line starting with [`MEMORY_LIMIT_MARK`] at the end of the kernel's output, which the
//! session turns into the run's notice), for a kernel no supervisor of ours started.

use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

use crate::kernel::ExitInfo;
use crate::kernel::process::{self, OutputTail};
use crate::kernel::supervise::MEMORY_LIMIT_MARK;

/// How often the fork's memory is sampled (the supervisor's tick).
const TICK: Duration = Duration::from_millis(250);

/// Watch `pid`'s tree until it exits; over `max_memory_mib` (0: no limit), note why in
/// `tail` and SIGKILL its process group and every descendant.
pub(super) fn spawn(
    pid: i32,
    max_memory_mib: u64,
    mut exit: watch::Receiver<Option<ExitInfo>>,
    tail: OutputTail,
) {
    if max_memory_mib == 0 {
        return;
    }
    let limit = max_memory_mib.saturating_mul(1024 * 1024);
    tokio::spawn(async move {
        let mut peak = 0u64;
        loop {
            tokio::select! {
                _ = exit.wait_for(|e| e.is_some()) => return,
                _ = tokio::time::sleep(TICK) => {}
            }
            // Reading /proc for a process tree is blocking work.
            let Ok(rss) = tokio::task::spawn_blocking(move || {
                process::rss_bytes(pid) + process::tree_rss_bytes(pid)
            })
            .await
            else {
                return;
            };
            peak = peak.max(rss);
            if rss > limit {
                process::append_note(
                    &tail,
                    &format!(
                        "{MEMORY_LIMIT_MARK}: the kernel's processes used {} MiB, over the session's limit of {max_memory_mib} MiB; they were stopped",
                        peak / (1024 * 1024)
                    ),
                );
                let tree = process::descendants(pid);
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                for p in tree {
                    let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                }
                return;
            }
        }
    });
}
