//! `execute_file(mode="fresh")`: a run in a short-lived helper kernel of the session's own
//! kind. The helper is a private session actor started from the session's launcher (same
//! kernelspec or interpreter, cwd and env), never listed, never journalled; the calling
//! session's kernel and namespace are not touched.
//!
//! The run is reachable by its run id while it lasts (`get_execution`, `send_input`,
//! `cancel_execution` find the helper through [`FreshRuns::live`]), and its timeout is the
//! helper actor's own deadline. One reaper task per run, on the sessions runtime, owns the
//! end: when the run is final — or the caller gave up on it ([`FreshRun::abandon`]: the run is
//! cancelled and given a short grace) — it keeps the final result ([`FreshRuns::finished`],
//! the last [`KEEP_FINISHED`]) and shuts the helper kernel down. A helper whose start fails
//! or whose caller goes away before the run is queued ends with its dropped handle.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Registry;
use crate::session::{
    ExecuteRequest, ExecutionResult, RunId, RunStatus, SessionDesc, SessionError, SessionHandle,
};

/// Finished fresh runs whose results stay readable with `get_execution`.
pub const KEEP_FINISHED: usize = 32;
/// Helper kernels running at once per server.
pub const MAX_LIVE: usize = 8;
/// How long an abandoned (cancelled) run may take to stop before its kernel is shut down.
const ABANDON_GRACE: Duration = Duration::from_secs(5);
/// Bound on the helper's shutdown ladder, as the registry bounds a destroy.
const REAP_LIMIT: Duration = Duration::from_secs(15);

/// Live helpers by run id, and the results of finished fresh runs.
#[derive(Default)]
pub struct FreshRuns {
    live: Mutex<HashMap<RunId, SessionHandle>>,
    finished: Mutex<VecDeque<ExecutionResult>>,
    /// Helpers from the start of their kernel to their reaping (at most [`MAX_LIVE`]).
    slots: AtomicUsize,
}

/// One of the [`MAX_LIVE`] helper slots, given back when dropped.
struct Slot(Arc<FreshRuns>);

impl Slot {
    /// A slot, if one is free.
    fn take(runs: &Arc<FreshRuns>) -> Option<Slot> {
        runs.slots
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_LIVE).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(runs.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.slots.fetch_sub(1, Ordering::SeqCst);
    }
}

impl FreshRuns {
    /// The helper session running `run`, while it runs.
    pub fn live(&self, run: &RunId) -> Option<SessionHandle> {
        lock(&self.live).get(run).cloned()
    }

    /// The final result of a fresh run whose helper is gone.
    pub fn finished(&self, run: &RunId) -> Option<ExecutionResult> {
        lock(&self.finished)
            .iter()
            .find(|r| r.run_id == run.as_str())
            .cloned()
    }

    /// Every live helper, forgotten (server exit: the caller destroys them).
    pub fn drain_live(&self) -> Vec<SessionHandle> {
        lock(&self.live).drain().map(|(_, h)| h).collect()
    }

    fn remember(&self, r: ExecutionResult) {
        let mut done = lock(&self.finished);
        done.push_back(r);
        while done.len() > KEEP_FINISHED {
            done.pop_front();
        }
    }
}

/// A fresh run under way.
pub struct FreshRun {
    /// The helper session (its id is the calling session's, so results name that session).
    pub helper: SessionHandle,
    pub run_id: RunId,
    pub rx: watch::Receiver<RunStatus>,
    /// The helper kernel's pid.
    pub pid: Option<u32>,
    abandon: CancellationToken,
    reaped: watch::Receiver<bool>,
}

impl FreshRun {
    /// The caller gives up on the run: cancel it; the reaper shuts the kernel down.
    pub fn abandon(&self) {
        self.abandon.cancel();
    }

    /// Wait (bounded) until the helper kernel has been shut down.
    pub async fn reaped(&mut self) {
        let _ =
            tokio::time::timeout(REAP_LIMIT + ABANDON_GRACE, self.reaped.wait_for(|r| *r)).await;
    }

    /// The sentence a result of this run carries.
    pub fn notice(pid: Option<u32>, finished: bool) -> String {
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        if finished {
            format!(
                "Ran in a fresh kernel{pid} of this session's kind, cwd and env, which is now shut down; the session's own namespace was not touched."
            )
        } else {
            format!(
                "Runs in a fresh kernel{pid} of this session's kind, cwd and env; it is shut down when the run ends. get_execution(run_id) follows the run, cancel_execution stops it; the session's own namespace is not touched."
            )
        }
    }
}

impl Registry {
    /// Start a helper kernel like `handle`'s and queue `req` in it.
    /// Errors: `LIMIT_EXCEEDED` (too many helpers), `KERNEL_START_FAILED`.
    pub async fn start_fresh(
        &self,
        handle: &SessionHandle,
        req: ExecuteRequest,
    ) -> Result<FreshRun, SessionError> {
        let Some(slot) = Slot::take(&self.fresh) else {
            return Err(SessionError::LimitExceeded(format!(
                "{MAX_LIVE} fresh-kernel runs are already under way on this server; wait for one to end or cancel it."
            )));
        };
        let desc = SessionDesc {
            journal_dir: None,
            ..handle.desc().clone()
        };
        let (helper, created) =
            SessionHandle::spawn(&self.sessions_runtime, desc, self.limits.clone());
        // Dropping `helper` (an error below, or the caller going away) ends the helper actor,
        // which stops a start under way or shuts its kernel down.
        let info = created
            .await
            .unwrap_or_else(|_| Err(SessionError::gone(handle.id())))?;
        let (run_id, rx) = helper.submit(req).await?;
        let abandon = CancellationToken::new();
        let (reaped_tx, reaped) = watch::channel(false);
        lock(&self.fresh.live).insert(run_id.clone(), helper.clone());
        let run = FreshRun {
            helper: helper.clone(),
            run_id: run_id.clone(),
            rx: rx.clone(),
            pid: info.pid,
            abandon: abandon.clone(),
            reaped,
        };
        let runs = self.fresh.clone();
        let pid = info.pid;
        self.sessions_runtime.spawn(async move {
            reap(helper, run_id, rx, abandon, runs, pid).await;
            drop(slot);
            let _ = reaped_tx.send(true);
        });
        Ok(run)
    }
}

/// Wait for the run to end (or be abandoned), keep its result, shut the helper down.
async fn reap(
    helper: SessionHandle,
    run_id: RunId,
    mut rx: watch::Receiver<RunStatus>,
    abandon: CancellationToken,
    runs: Arc<FreshRuns>,
    pid: Option<u32>,
) {
    let ended = tokio::select! {
        r = rx.wait_for(|s| s.is_final()) => r.is_ok(),
        _ = abandon.cancelled() => false,
    };
    if !ended {
        let _ = helper.cancel(&run_id).await;
        let _ = tokio::time::timeout(ABANDON_GRACE, rx.wait_for(|s| s.is_final())).await;
    }
    if let Ok(mut r) = helper.get_run(&run_id).await {
        r.notices.push(FreshRun::notice(pid, true));
        runs.remember(r);
    }
    let rung = tokio::time::timeout(REAP_LIMIT, helper.destroy()).await;
    lock(&runs.live).remove(&run_id);
    tracing::debug!(session = %helper.id(), run = %run_id, ?rung, "fresh-run kernel reaped");
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_live_helpers_hold_a_slot_and_a_dropped_slot_is_free_again() {
        let runs = Arc::new(FreshRuns::default());
        let mut held: Vec<Slot> = (0..MAX_LIVE)
            .map(|_| Slot::take(&runs).expect("a free slot"))
            .collect();
        assert!(Slot::take(&runs).is_none());
        held.pop();
        assert!(Slot::take(&runs).is_some());
    }

    #[test]
    fn only_the_last_finished_results_are_kept() {
        let runs = FreshRuns::default();
        let result = |i: usize| ExecutionResult {
            run_id: format!("run-{i}"),
            session_id: "s".into(),
            generation: 1,
            state_reset: false,
            status: RunStatus::Ok,
            execution_count: None,
            stdout: String::new(),
            stderr: String::new(),
            result: None,
            outputs: vec![],
            error: None,
            prompt: None,
            truncated: None,
            late_output: 0,
            queued_ms: 0,
            elapsed_ms: 0,
            notices: vec![],
        };
        for i in 0..KEEP_FINISHED + 3 {
            runs.remember(result(i));
        }
        assert!(runs.finished(&RunId::from("run-0")).is_none());
        assert!(
            runs.finished(&RunId::from(format!("run-{}", KEEP_FINISHED + 2)))
                .is_some()
        );
    }
}
