//! The one run index: a run id resolves here, and only here, to the session that holds it,
//! the helper kernel of a fresh-mode run while it lasts, or the final record of a fresh run
//! whose helper is gone. Each entry remembers the [`Slot`] of the session the run was asked
//! of, so a lookup answers only a viewer that sees that session (another connection's
//! `default` run is unknown to it, exactly like a run that never existed).
//!
//! Bounded: at most [`MAX_TRACKED_RUNS`] ids (the oldest are forgotten first; a session keeps
//! only its last 256 finished runs anyway) and [`KEEP_FINISHED`] fresh-run records. One
//! `std::sync::Mutex`, never held across an await: every critical section is a map update.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::scope::key::{Slot, Viewer};
use crate::session::{ExecutionResult, RunId, SessionHandle};

/// Run ids remembered across all sessions before the oldest are forgotten.
pub const MAX_TRACKED_RUNS: usize = 100_000;
/// Finished fresh runs whose results stay readable with `get_execution`.
pub const KEEP_FINISHED: usize = 32;

/// Who holds a run now.
#[derive(Clone)]
pub enum Holder {
    /// The session in the entry's slot (its actor keeps the run's record).
    Session,
    /// The helper kernel of a fresh-mode run, while it runs.
    Helper(SessionHandle),
    /// A fresh-mode run whose helper is gone: its final record.
    Finished(Arc<ExecutionResult>),
}

/// A run's entry: the session it was asked of, and who holds it.
#[derive(Clone)]
pub struct Entry {
    pub owner: Slot,
    pub holder: Holder,
}

/// See the module docs.
#[derive(Default)]
pub struct RunIndex {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<RunId, Entry>,
    /// Every tracked id, oldest first (to forget the oldest).
    order: VecDeque<RunId>,
    /// Ids of finished fresh runs, oldest first (to keep only [`KEEP_FINISHED`]).
    finished: VecDeque<RunId>,
}

impl RunIndex {
    /// Remember that `run` was asked of the session in `owner` and is held by `holder`.
    pub fn track(&self, run: RunId, owner: Slot, holder: Holder) {
        let mut inner = lock(&self.inner);
        if inner
            .by_id
            .insert(run.clone(), Entry { owner, holder })
            .is_none()
        {
            inner.order.push_back(run);
        }
        while inner.order.len() > MAX_TRACKED_RUNS {
            if let Some(old) = inner.order.pop_front() {
                inner.by_id.remove(&old);
            }
        }
    }

    /// The entry of `run` if `viewer` sees the session it was asked of; `None` otherwise,
    /// exactly as for a run that does not exist.
    pub fn get(&self, run: &RunId, viewer: &Viewer) -> Option<Entry> {
        lock(&self.inner)
            .by_id
            .get(run)
            .filter(|e| viewer.sees(&e.owner))
            .cloned()
    }

    /// A fresh run's helper is gone: keep `record` as the run's final result (the oldest
    /// finished fresh runs beyond [`KEEP_FINISHED`] are forgotten).
    pub fn finish(&self, run: &RunId, record: ExecutionResult) {
        let mut inner = lock(&self.inner);
        let Some(entry) = inner.by_id.get_mut(run) else {
            return;
        };
        entry.holder = Holder::Finished(Arc::new(record));
        inner.finished.push_back(run.clone());
        while inner.finished.len() > KEEP_FINISHED {
            if let Some(old) = inner.finished.pop_front() {
                inner.by_id.remove(&old);
            }
        }
        prune_order(&mut inner);
    }

    /// A fresh run whose helper ended without a record: forget it.
    pub fn forget(&self, run: &RunId) {
        let mut inner = lock(&self.inner);
        inner.by_id.remove(run);
        prune_order(&mut inner);
    }

    /// The session in `owner` is gone: forget the runs it held (fresh runs keep their entries
    /// until their helper ends).
    pub fn forget_session(&self, owner: &Slot) {
        let mut inner = lock(&self.inner);
        inner
            .by_id
            .retain(|_, e| !(e.owner == *owner && matches!(e.holder, Holder::Session)));
        prune_order(&mut inner);
    }

    /// Every live helper, forgotten (server exit: the caller destroys them).
    pub fn drain_helpers(&self) -> Vec<SessionHandle> {
        let mut inner = lock(&self.inner);
        let mut helpers = Vec::new();
        inner.by_id.retain(|_, e| match &e.holder {
            Holder::Helper(h) => {
                helpers.push(h.clone());
                false
            }
            _ => true,
        });
        prune_order(&mut inner);
        helpers
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.inner).by_id.len()
    }
}

/// Drop ids from `order` and `finished` that `by_id` no longer holds.
fn prune_order(inner: &mut Inner) {
    let Inner {
        by_id,
        order,
        finished,
    } = inner;
    order.retain(|r| by_id.contains_key(r));
    finished.retain(|r| by_id.contains_key(r));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::registry::scope::key::ConnectionId;
    use crate::session::RunStatus;

    /// A final record of run `run` (status ok, no output).
    pub(in crate::registry) fn record(run: &str) -> ExecutionResult {
        ExecutionResult {
            run_id: run.into(),
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
            queued_date: None,
            finished_date: None,
        }
    }

    fn standalone() -> Viewer {
        Viewer::standalone()
    }
    fn one() -> Viewer {
        Viewer::of_connection(1)
    }
    fn two() -> Viewer {
        Viewer::of_connection(2)
    }
    fn conn(n: u64) -> ConnectionId {
        ConnectionId::for_test(n)
    }

    #[test]
    fn a_run_of_a_connections_default_is_unknown_to_every_other_connection() {
        let runs = RunIndex::default();
        let mine = RunId::from("run-mine");
        let shared = RunId::from("run-shared");
        runs.track(mine.clone(), Slot::Default(conn(1)), Holder::Session);
        runs.track(shared.clone(), Slot::named("s"), Holder::Session);
        assert!(runs.get(&mine, &one()).is_some());
        assert!(runs.get(&mine, &two()).is_none());
        assert!(runs.get(&mine, &standalone()).is_none());
        for viewer in [one(), two(), standalone()] {
            assert!(runs.get(&shared, &viewer).is_some());
        }
    }

    #[test]
    fn a_finished_fresh_run_keeps_its_owner_and_only_the_last_records_are_kept() {
        let runs = RunIndex::default();
        for i in 0..KEEP_FINISHED + 3 {
            let id = RunId::from(format!("run-{i}"));
            runs.track(id.clone(), Slot::Default(conn(1)), Holder::Session);
            runs.finish(&id, record(id.as_str()));
        }
        assert!(runs.get(&RunId::from("run-0"), &one()).is_none());
        let last = RunId::from(format!("run-{}", KEEP_FINISHED + 2));
        assert!(matches!(
            runs.get(&last, &one()).map(|e| e.holder),
            Some(Holder::Finished(_))
        ));
        assert!(runs.get(&last, &two()).is_none());
        assert_eq!(runs.len(), KEEP_FINISHED);
    }

    #[test]
    fn forgetting_a_session_forgets_its_runs_only() {
        let runs = RunIndex::default();
        runs.track(RunId::from("a"), Slot::named("a"), Holder::Session);
        runs.track(RunId::from("b"), Slot::named("b"), Holder::Session);
        runs.forget_session(&Slot::named("a"));
        assert!(runs.get(&RunId::from("a"), &standalone()).is_none());
        assert!(runs.get(&RunId::from("b"), &standalone()).is_some());
    }

    #[test]
    fn the_index_is_bounded() {
        let runs = RunIndex::default();
        for i in 0..MAX_TRACKED_RUNS + 5 {
            runs.track(
                RunId::from(format!("r{i}")),
                Slot::named("s"),
                Holder::Session,
            );
        }
        assert_eq!(runs.len(), MAX_TRACKED_RUNS);
        assert!(runs.get(&RunId::from("r0"), &standalone()).is_none());
    }
}
