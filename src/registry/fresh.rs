//! `execute_file(mode="fresh")`: a run in a short-lived helper kernel of the session's own
//! kind. The helper is a private session actor started from the session's launcher (same
//! kernelspec or interpreter, cwd and env), never listed, never journalled; the calling
//! session's kernel and namespace are not touched.
//!
//! The run is reachable by its run id while it lasts: the run index holds the helper
//! (`get_execution`, `send_input`, `cancel_execution` find it there, for callers who see the
//! calling session), and its timeout is the helper actor's own deadline. One reaper task per
//! run, on the sessions runtime, owns the end: when the run is final — or the caller gave up
//! on it ([`FreshRun::abandon`]: the run is cancelled and given a short grace) — it files the
//! final result in the run index (which keeps the last 32) and shuts the helper kernel down.
//! A helper whose start fails or whose caller goes away before the run is queued ends with
//! its dropped handle.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::runs::{Holder, RunIndex};
use super::scope::key::Slot;
use crate::config::Limits;
use crate::session::cmd;
use crate::session::{ExecuteRequest, RunId, RunStatus, SessionDesc, SessionError, SessionHandle};

/// Helper kernels running at once per server.
pub const MAX_LIVE: usize = 8;
/// How long an abandoned (cancelled) run may take to stop before its kernel is shut down.
const ABANDON_GRACE: Duration = Duration::from_secs(5);
/// Bound on the helper's shutdown ladder, as the registry bounds a destroy.
const REAP_LIMIT: Duration = Duration::from_secs(15);

/// The [`MAX_LIVE`] helper slots of one server: taken from the start of a helper's kernel to
/// its reaping.
#[derive(Default)]
pub struct Helpers {
    taken: AtomicUsize,
}

/// One of the [`MAX_LIVE`] helper slots, given back when dropped.
struct HelperSlot(Arc<Helpers>);

impl HelperSlot {
    /// A slot, if one is free.
    fn take(helpers: &Arc<Helpers>) -> Option<HelperSlot> {
        helpers
            .taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_LIVE).then_some(n + 1)
            })
            .ok()
            .map(|_| HelperSlot(helpers.clone()))
    }
}

impl Drop for HelperSlot {
    fn drop(&mut self) {
        self.0.taken.fetch_sub(1, Ordering::SeqCst);
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

/// Start a helper kernel like `handle`'s (the session in `owner`) on `runtime` and queue
/// `req` in it; the run is filed in `runs` under `owner`.
/// Errors: `LIMIT_EXCEEDED` (too many helpers), `KERNEL_START_FAILED`.
pub async fn start(
    helpers: &Arc<Helpers>,
    runs: &Arc<RunIndex>,
    runtime: &tokio::runtime::Handle,
    limits: &Arc<Limits>,
    owner: Slot,
    handle: &SessionHandle,
    req: ExecuteRequest,
) -> Result<FreshRun, SessionError> {
    let Some(slot) = HelperSlot::take(helpers) else {
        return Err(SessionError::LimitExceeded(format!(
            "{MAX_LIVE} fresh-kernel runs are already under way on this server; wait for one to end or cancel it."
        )));
    };
    let desc = SessionDesc {
        journal_dir: None,
        ..handle.desc().clone()
    };
    let (helper, created) = SessionHandle::spawn(runtime, desc, limits.clone());
    // Dropping `helper` (an error below, or the caller going away) ends the helper actor,
    // which stops a start under way or shuts its kernel down.
    let info = created
        .await
        .unwrap_or_else(|_| Err(SessionError::gone(handle.id())))?
        .info;
    let (run_id, rx) = helper.call(cmd::Submit::new(req)).await?;
    let abandon = CancellationToken::new();
    let (reaped_tx, reaped) = watch::channel(false);
    runs.track(run_id.clone(), owner, Holder::Helper(helper.clone()));
    let run = FreshRun {
        helper: helper.clone(),
        run_id: run_id.clone(),
        rx: rx.clone(),
        pid: info.pid,
        abandon: abandon.clone(),
        reaped,
    };
    let runs = runs.clone();
    let pid = info.pid;
    runtime.spawn(async move {
        reap(helper, run_id, rx, abandon, runs, pid).await;
        drop(slot);
        let _ = reaped_tx.send(true);
    });
    Ok(run)
}

/// Wait for the run to end (or be abandoned), file its result, shut the helper down.
async fn reap(
    helper: SessionHandle,
    run_id: RunId,
    mut rx: watch::Receiver<RunStatus>,
    abandon: CancellationToken,
    runs: Arc<RunIndex>,
    pid: Option<u32>,
) {
    let ended = tokio::select! {
        r = rx.wait_for(|s| s.is_final()) => r.is_ok(),
        _ = abandon.cancelled() => false,
    };
    if !ended {
        let _ = helper
            .call(cmd::Cancel {
                run: run_id.clone(),
            })
            .await;
        let _ = tokio::time::timeout(ABANDON_GRACE, rx.wait_for(|s| s.is_final())).await;
    }
    match helper
        .call(cmd::GetRun {
            run: run_id.clone(),
        })
        .await
    {
        Ok(mut r) => {
            r.notices.push(FreshRun::notice(pid, true));
            runs.finish(&run_id, r);
        }
        Err(_) => runs.forget(&run_id),
    }
    let rung = tokio::time::timeout(REAP_LIMIT, helper.call(cmd::Destroy)).await;
    tracing::debug!(parent: helper.span(), run = %run_id, ?rung, "fresh-run kernel reaped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_live_helpers_hold_a_slot_and_a_dropped_slot_is_free_again() {
        let helpers = Arc::new(Helpers::default());
        let mut held: Vec<HelperSlot> = (0..MAX_LIVE)
            .map(|_| HelperSlot::take(&helpers).expect("a free slot"))
            .collect();
        assert!(HelperSlot::take(&helpers).is_none());
        held.pop();
        assert!(HelperSlot::take(&helpers).is_some());
    }
}
