//! The runs of one session: the FIFO queue, the one run executing, the side runs executing
//! beside it on a kernel subshell, the finished runs kept for `get_execution`, and the index
//! from an `execute_request`'s `msg_id` to its run. One owner
//! (the session actor), so no locks. Everything here is bounded: the queue by the session's
//! limit, finished runs by count and by stored bytes (oldest forgotten first).

use std::collections::{HashMap, VecDeque};

use super::ids::{MsgId, RunId};
use super::run::Run;

/// Finished runs kept for `get_execution` per session (oldest dropped first).
pub const KEPT_FINISHED_RUNS: usize = 256;
/// Output bytes kept across a session's finished runs; the oldest runs are forgotten beyond it.
pub const KEPT_FINISHED_BYTES: usize = 256 * 1024 * 1024;

/// Why a run could not be queued.
#[derive(Debug)]
pub struct QueueFull {
    pub waiting: usize,
}

/// A session's runs.
pub struct RunTable {
    runs: HashMap<RunId, Run>,
    /// `msg_id` of an execute_request → its run (kept as long as the run is).
    by_msg: HashMap<MsgId, RunId>,
    queue: VecDeque<RunId>,
    current: Option<RunId>,
    /// Runs executing on a subshell beside the current one (never queued), oldest first.
    side: Vec<RunId>,
    /// Finished runs, oldest first.
    finished: VecDeque<RunId>,
    max_queue: usize,
}

impl RunTable {
    pub fn new(max_queue: usize) -> RunTable {
        RunTable {
            runs: HashMap::new(),
            by_msg: HashMap::new(),
            queue: VecDeque::new(),
            current: None,
            side: Vec::new(),
            finished: VecDeque::new(),
            max_queue,
        }
    }

    /// Queue `run`. Errors: [`QueueFull`] when the queue is at its limit.
    pub fn enqueue(&mut self, run: Run) -> Result<(), QueueFull> {
        if self.queue.len() >= self.max_queue {
            return Err(QueueFull {
                waiting: self.queue.len(),
            });
        }
        self.queue.push_back(run.id.clone());
        self.runs.insert(run.id.clone(), run);
        Ok(())
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    pub fn current_id(&self) -> Option<&RunId> {
        self.current.as_ref()
    }

    pub fn current(&self) -> Option<&Run> {
        self.runs.get(self.current.as_ref()?)
    }

    pub fn current_mut(&mut self) -> Option<&mut Run> {
        self.runs.get_mut(self.current.as_ref()?)
    }

    pub fn get(&self, id: &str) -> Option<&Run> {
        self.runs.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Run> {
        self.runs.get_mut(id)
    }

    /// Make the next queued run the current one and return it.
    pub fn start_next(&mut self) -> Option<&mut Run> {
        if self.current.is_some() {
            return None;
        }
        let id = self.queue.pop_front()?;
        self.current = Some(id.clone());
        self.runs.get_mut(&id)
    }

    /// Hold `run`, which executes beside the queue (on a subshell), until it is finished.
    pub fn start_side(&mut self, run: Run) {
        self.side.push(run.id.clone());
        self.runs.insert(run.id.clone(), run);
    }

    /// The side runs executing, oldest first.
    pub fn side_ids(&self) -> &[RunId] {
        &self.side
    }

    /// Remember that `msg_id` (an execute_request) belongs to run `id`.
    pub fn index_msg(&mut self, msg_id: MsgId, id: RunId) {
        self.by_msg.insert(msg_id, id);
    }

    /// The run whose execute_request `parent` is, and whether it is executing (the current
    /// run, or a side run).
    pub fn by_parent(&mut self, parent: &str) -> Option<(&mut Run, bool)> {
        let id = self.by_msg.get(parent)?;
        let live = self.current.as_ref() == Some(id) || self.side.contains(id);
        self.runs.get_mut(id).map(|r| (r, live))
    }

    /// Every run (for display updates that may touch any earlier run).
    pub fn all_mut(&mut self) -> impl Iterator<Item = &mut Run> {
        self.runs.values_mut()
    }

    /// Take run `id` out of the queue; false if it was not queued.
    pub fn dequeue(&mut self, id: &str) -> bool {
        let before = self.queue.len();
        self.queue.retain(|r| r.as_str() != id);
        self.queue.len() != before
    }

    /// Empty the queue, returning the ids in order.
    pub fn drain_queue(&mut self) -> Vec<RunId> {
        self.queue.drain(..).collect()
    }

    /// The run is no longer current (it finished, or it was abandoned with its kernel).
    pub fn clear_current(&mut self) -> Option<RunId> {
        self.current.take()
    }

    /// Record run `id` as finished and forget the oldest finished runs beyond the caps
    /// ([`KEPT_FINISHED_RUNS`], [`KEPT_FINISHED_BYTES`]). Returns the ids forgotten.
    pub fn finished(&mut self, id: RunId) -> Vec<RunId> {
        if self.current.as_ref() == Some(&id) {
            self.current = None;
        }
        self.side.retain(|r| r != &id);
        self.finished.push_back(id);
        let mut kept_bytes: usize = self
            .finished
            .iter()
            .filter_map(|r| self.runs.get(r))
            .map(|r| r.output.stored_bytes())
            .sum();
        let mut forgotten = Vec::new();
        while self.finished.len() > KEPT_FINISHED_RUNS
            || (kept_bytes > KEPT_FINISHED_BYTES && self.finished.len() > 1)
        {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            if let Some(run) = self.runs.remove(&old) {
                kept_bytes -= run.output.stored_bytes();
            }
            forgotten.push(old);
        }
        if !forgotten.is_empty() {
            // The message ids of forgotten runs go with them.
            let runs = &self.runs;
            self.by_msg.retain(|_, r| runs.contains_key(r));
        }
        forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::types::RunStatus;

    fn run() -> Run {
        Run::new(RunId::new(), "s".into(), "1".into(), true, None, vec![])
    }

    #[test]
    fn the_queue_is_fifo_and_bounded() {
        let mut t = RunTable::new(2);
        let (a, b) = (run(), run());
        let (ida, idb) = (a.id.clone(), b.id.clone());
        t.enqueue(a).expect("room");
        t.enqueue(b).expect("room");
        assert_eq!(t.enqueue(run()).map_err(|e| e.waiting).err(), Some(2));
        assert_eq!(t.start_next().map(|r| r.id.clone()), Some(ida.clone()));
        assert!(t.start_next().is_none(), "one run at a time");
        t.get_mut(ida.as_str())
            .expect("kept")
            .set_status(RunStatus::Ok);
        t.finished(ida);
        assert_eq!(t.start_next().map(|r| r.id.clone()), Some(idb));
    }

    #[test]
    fn finished_runs_beyond_the_cap_are_forgotten_oldest_first() {
        let mut t = RunTable::new(KEPT_FINISHED_RUNS + 10);
        let mut ids = Vec::new();
        for _ in 0..KEPT_FINISHED_RUNS + 3 {
            let r = run();
            ids.push(r.id.clone());
            t.enqueue(r).expect("room");
            let id = t.start_next().expect("next").id.clone();
            t.index_msg(MsgId::from(id.as_str()), id.clone());
            t.finished(id);
        }
        assert!(t.get(ids[0].as_str()).is_none());
        assert!(t.get(ids[2].as_str()).is_none());
        assert!(t.get(ids[3].as_str()).is_some());
        assert!(
            t.by_parent(ids[0].as_str()).is_none(),
            "its msg_id went too"
        );
        assert_eq!(t.by_msg.len(), KEPT_FINISHED_RUNS);
    }
}
