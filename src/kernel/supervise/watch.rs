//! The supervisor's watch while the kernel runs: the signals it forwards to the kernel's
//! group or acts on itself (a new memory limit, a released subtree, the server exiting), the
//! memory it samples every tick, and the end — the kernel's exit (mirrored), its memory
//! limit, or the server gone — after which the kernel's tree and files are removed.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::Pid;

use super::adopt::{RELEASE_SIGNAL, Released, ServerWatch, wait_signal_info};
use super::report::{Report, Reporter};
use super::{
    Cleanup, FORWARDED, SERVER_DEATH_SIGNAL, SERVER_EXIT_GRACE, SuperviseArgs, TICK, end_tree,
    exit_report, leftovers, mirror, read_limit, reap, reap_blocking,
};
use crate::kernel::cgroup::Cgroup;

/// The server the supervisor watches: its parent, or (a forked kernel's supervisor) the
/// server it was given.
pub(super) struct Server {
    pub(super) watch: Option<ServerWatch>,
    pub(super) parent: Pid,
}

impl Server {
    fn gone(&self) -> bool {
        match &self.watch {
            Some(s) => s.gone(),
            None => nix::unistd::getppid() != self.parent,
        }
    }

    fn pid(&self) -> i32 {
        self.watch
            .as_ref()
            .map_or(self.parent.as_raw(), |s| s.pid())
    }
}

/// What the supervisor holds while the kernel runs.
pub(super) struct Supervision<'a> {
    pub(super) args: &'a SuperviseArgs,
    pub(super) kernel: Pid,
    pub(super) cgroup: Option<Cgroup>,
    pub(super) server: Server,
    pub(super) cleanup: Cleanup,
    pub(super) reporter: Reporter,
    /// The memory limit in force (MiB; 0 = none).
    pub(super) limit_mib: u64,
    /// The most memory the tree has used (bytes).
    pub(super) peak: u64,
    /// Subtrees released to a supervisor of their own (a fork's).
    pub(super) released: Released,
}

impl Supervision<'_> {
    /// Watch until the kernel's end; the exit code mirrors it.
    pub(super) fn watch(mut self, watched: &SigSet) -> ExitCode {
        loop {
            if let Some((sig, info)) = wait_signal_info(watched, TICK) {
                self.signal(sig, &info);
            }
            if let Some(code) = self.check() {
                return code;
            }
        }
    }

    fn limit(&self) -> u64 {
        self.limit_mib.saturating_mul(1024 * 1024)
    }

    fn signal(&mut self, sig: Signal, info: &nix::libc::siginfo_t) {
        match sig {
            // A subtree with a supervisor of its own (a fork) is no longer ours.
            RELEASE_SIGNAL => self.released.note(info, self.server.pid()),
            Signal::SIGUSR1 => self.change_limit(),
            SERVER_DEATH_SIGNAL => {
                // The server is exiting: the check after ends the tree once it is gone.
                let deadline = Instant::now() + SERVER_EXIT_GRACE;
                while !self.server.gone() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            // The server's interrupt and shutdown ladder: the kernel's group decides.
            sig if FORWARDED.contains(&sig) => {
                let _ = killpg(self.kernel, sig);
            }
            _ => {}
        }
    }

    /// The server wrote a new limit: it applies at once (it may already be exceeded).
    fn change_limit(&mut self) {
        if let Some(mib) = self.args.limit_file.as_deref().and_then(read_limit)
            && mib != self.limit_mib
        {
            self.limit_mib = mib;
            let limit = self.limit();
            if let Some(g) = &self.cgroup
                && let Err(e) = g.change_limit((limit > 0).then_some(limit))
            {
                eprintln!("kernel-mcp supervise: cannot change the cgroup's limit: {e}");
            }
        }
        // The acknowledgement the server waits for: the limit is in force.
        if let Some(file) = &self.args.limit_file {
            let _ = std::fs::remove_file(file);
        }
    }

    /// Reap, sample memory, and end when the kernel exited, went over its limit, or the
    /// server is gone: the exit code then.
    fn check(&mut self) -> Option<ExitCode> {
        let exited = reap(self.kernel);
        let limit = self.limit();
        let used = match &self.cgroup {
            Some(g) => g.peak_bytes().or_else(|| g.usage_bytes()).unwrap_or(0),
            None if limit > 0 => crate::kernel::usage::tree_bytes_except(
                std::process::id() as i32,
                &self.released.excluded(),
            ),
            None => 0,
        };
        self.peak = self.peak.max(used);
        // The kernel's OOM killer acted in the group (it may have killed the kernel itself,
        // or one worker), or the PSS count went over: either way the tree is over its limit.
        let over = limit > 0
            && match &self.cgroup {
                Some(g) => g.oom_kills() > 0,
                None => used > limit,
            };
        if over {
            let used_mib = self.peak.max(limit) / (1024 * 1024);
            eprintln!(
                "kernel-mcp: memory limit exceeded: the kernel's processes {}; they were stopped",
                crate::kernel::types::memory_use_words(used_mib, self.limit_mib)
            );
            self.reporter.send(&Report::MemoryLimit {
                used_mib,
                limit_mib: self.limit_mib,
            });
            end_tree(self.cgroup.as_ref(), &self.released);
            let status = exited.or_else(|| reap_blocking(self.kernel));
            self.reporter.send(&exit_report(status));
            self.finish();
            return Some(ExitCode::from(137));
        }
        if let Some(status) = exited {
            end_tree(self.cgroup.as_ref(), &self.released);
            self.reporter.send(&exit_report(Some(status)));
            self.finish();
            return Some(mirror(status));
        }
        if self.server.gone() {
            end_tree(self.cgroup.as_ref(), &self.released);
            self.finish();
            return Some(ExitCode::from(1));
        }
        None
    }

    /// Remove what the supervisor leaves. Once the server is gone nobody else removes the
    /// kernel's files (a server that ends cleanly removes them itself): whichever way the
    /// kernel then ends, they go with it.
    fn finish(&mut self) {
        self.cleanup.run();
        if let Some(cf) = &self.args.connection_file
            && self.server.gone()
        {
            leftovers::remove(cf);
        }
    }
}
