//! The runs of one session: the FIFO queue, the one run executing, the side runs executing
//! beside it on a kernel subshell, the finished runs kept for `get_execution`, and the index
//! from an `execute_request`'s `msg_id` to its run. One owner
//! (the session actor), so no locks. Everything here is bounded: the queue by the session's
//! limit, finished runs by count and by stored bytes (oldest forgotten first).
//!
//! Finishing a run costs the same whatever the number of runs kept: the bytes of finished
//! runs are a running sum, and a forgotten run's `msg_id`s are removed by key. A finished
//! run's stored bytes change only by late output (iopub messages for it after it finished),
//! which reaches it through [`RunTable::by_parent`]; such runs are counted again at the next
//! finish.

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

/// One run and what the table keeps about it.
struct Held {
    run: Run,
    /// The `msg_id`s indexed to this run in `by_msg` (removed with it).
    msgs: Vec<MsgId>,
    /// The run's stored bytes as counted in `finished_bytes` (finished runs only).
    counted: usize,
}

/// A session's runs.
pub struct RunTable {
    runs: HashMap<RunId, Held>,
    /// `msg_id` of an execute_request → its run (kept as long as the run is).
    by_msg: HashMap<MsgId, RunId>,
    queue: VecDeque<RunId>,
    current: Option<RunId>,
    /// Runs executing on a subshell beside the current one (never queued), oldest first.
    side: Vec<RunId>,
    /// Finished runs, oldest first.
    finished: VecDeque<RunId>,
    /// The sum of `counted` over finished runs.
    finished_bytes: usize,
    /// Finished runs handed out for late output since they were last counted.
    recount: Vec<RunId>,
    max_queue: usize,
    /// Output bytes kept across finished runs ([`KEPT_FINISHED_BYTES`]).
    byte_cap: usize,
}

impl Held {
    fn new(run: Run) -> Held {
        Held {
            run,
            msgs: Vec::new(),
            counted: 0,
        }
    }
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
            finished_bytes: 0,
            recount: Vec::new(),
            max_queue,
            byte_cap: KEPT_FINISHED_BYTES,
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
        self.runs.insert(run.id.clone(), Held::new(run));
        Ok(())
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    pub fn current_id(&self) -> Option<&RunId> {
        self.current.as_ref()
    }

    pub fn current(&self) -> Option<&Run> {
        self.get(self.current.as_ref()?.as_str())
    }

    pub fn current_mut(&mut self) -> Option<&mut Run> {
        let id = self.current.as_ref()?;
        self.runs.get_mut(id).map(|h| &mut h.run)
    }

    pub fn get(&self, id: &str) -> Option<&Run> {
        self.runs.get(id).map(|h| &h.run)
    }

    /// Run `id`, to change. Not for adding output to a finished run (that goes through
    /// [`Self::by_parent`], which has it counted again).
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Run> {
        self.runs.get_mut(id).map(|h| &mut h.run)
    }

    /// Make the next queued run the current one and return it.
    pub fn start_next(&mut self) -> Option<&mut Run> {
        if self.current.is_some() {
            return None;
        }
        let id = self.queue.pop_front()?;
        self.current = Some(id.clone());
        self.get_mut(id.as_str())
    }

    /// The run that starts next, if any is queued.
    pub fn next_queued(&self) -> Option<&Run> {
        self.get(self.queue.front()?.as_str())
    }

    pub fn next_queued_mut(&mut self) -> Option<&mut Run> {
        let id = self.queue.front()?.clone();
        self.get_mut(id.as_str())
    }

    /// The queued runs, in order.
    pub fn queued(&self) -> impl Iterator<Item = &Run> {
        self.queue.iter().filter_map(|id| self.get(id.as_str()))
    }

    /// Hold `run`, which executes beside the queue (on a subshell), until it is finished.
    pub fn start_side(&mut self, run: Run) {
        self.side.push(run.id.clone());
        self.runs.insert(run.id.clone(), Held::new(run));
    }

    /// The side runs executing, oldest first.
    pub fn side_ids(&self) -> &[RunId] {
        &self.side
    }

    /// Remember that `msg_id` (an execute_request) belongs to run `id`, which must be held
    /// already (queued, current or a side run): the index goes with the run.
    pub fn index_msg(&mut self, msg_id: MsgId, id: RunId) {
        if let Some(held) = self.runs.get_mut(&id) {
            held.msgs.push(msg_id.clone());
            self.by_msg.insert(msg_id, id);
        }
    }

    /// The run whose execute_request `parent` is, and whether it is executing (the current
    /// run, or a side run). A finished run found here may be given late output, so it is
    /// counted again at the next finish.
    pub fn by_parent(&mut self, parent: &str) -> Option<(&mut Run, bool)> {
        let id = self.by_msg.get(parent)?;
        let live = self.current.as_ref() == Some(id) || self.side.contains(id);
        let held = self.runs.get_mut(id)?;
        if !live && held.run.status().is_final() && !self.recount.contains(id) {
            self.recount.push(id.clone());
        }
        Some((&mut held.run, live))
    }

    /// Every run, for display updates that may touch any earlier run (an update replaces a
    /// display's data in place and does not change a run's stored bytes).
    pub fn all_mut(&mut self) -> impl Iterator<Item = &mut Run> {
        self.runs.values_mut().map(|h| &mut h.run)
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

    /// Take the queued runs `take` says yes to out of the queue, returning their ids in
    /// order; the others keep their order.
    pub fn take_queued(&mut self, take: impl Fn(&Run) -> bool) -> Vec<RunId> {
        let mut taken = Vec::new();
        for id in std::mem::take(&mut self.queue) {
            if self.runs.get(&id).is_none_or(|h| take(&h.run)) {
                taken.push(id);
            } else {
                self.queue.push_back(id);
            }
        }
        taken
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
        if self.runs.contains_key(&id) {
            self.recount.push(id.clone());
            self.finished.push_back(id);
        }
        for r in std::mem::take(&mut self.recount) {
            if let Some(h) = self.runs.get_mut(&r) {
                let now = h.run.output.stored_bytes();
                self.finished_bytes = self.finished_bytes - h.counted + now;
                h.counted = now;
            }
        }
        let mut forgotten = Vec::new();
        while self.finished.len() > KEPT_FINISHED_RUNS
            || (self.finished_bytes > self.byte_cap && self.finished.len() > 1)
        {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            if let Some(h) = self.runs.remove(&old) {
                self.finished_bytes -= h.counted;
                // The message ids of a forgotten run go with it.
                for m in &h.msgs {
                    self.by_msg.remove(m);
                }
            }
            forgotten.push(old);
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

    /// Queue, start and finish a run with `bytes` of stdout; its id (also its `msg_id`).
    fn finish_with(t: &mut RunTable, bytes: usize) -> RunId {
        t.enqueue(run()).expect("room");
        let r = t.start_next().expect("next");
        let id = r.id.clone();
        r.output.append_stream(false, &"x".repeat(bytes), false);
        r.set_status(RunStatus::Ok);
        t.index_msg(MsgId::from(id.as_str()), id.clone());
        t.clear_current();
        t.finished(id.clone());
        id
    }

    #[test]
    fn late_output_of_a_finished_run_counts_toward_the_byte_cap() {
        let mut t = RunTable::new(4);
        t.byte_cap = 1000;
        let a = finish_with(&mut t, 400);
        let b = finish_with(&mut t, 400);
        let (late, live) = t.by_parent(a.as_str()).expect("a is kept");
        assert!(!live);
        late.output.append_stream(false, &"y".repeat(400), true);
        let c = finish_with(&mut t, 10);
        assert!(
            t.get(a.as_str()).is_none(),
            "1210 bytes held: the oldest goes"
        );
        assert!(t.by_parent(a.as_str()).is_none(), "with its msg_id");
        assert!(t.get(b.as_str()).is_some() && t.get(c.as_str()).is_some());
        let held: usize = [&b, &c]
            .iter()
            .map(|id| t.get(id.as_str()).expect("kept").output.stored_bytes())
            .sum();
        assert_eq!(
            t.finished_bytes, held,
            "the running sum is the sum of what is held"
        );
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
