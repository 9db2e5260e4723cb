//! `execute_cells`' runs: the chosen code cells of a bound notebook, run one after another in
//! its session, each cell's outputs and execution count written back as it finishes (while the
//! next cell runs: one write in flight, the batch done only once the last is in), the way
//! Jupyter's own run of a notebook does. The next cell waits in the session's queue while one
//! runs (with `stop_on_error`, to run only if that one ends `ok`), so the kernel goes from
//! cell to cell without waiting on this task.
//!
//! A batch runs in a task of its own, so the tool call that started it can return after its
//! `wait_s` while the cells go on; [`BatchState`] (a watch) says at any moment which cell runs
//! and how each ended. The sources are those of the cells when the batch starts (what the
//! agent asked to run); outputs go back through [`Doc::finish`], so a person's edits in
//! between are merged, and a cell the person deleted meanwhile just loses its outputs (a
//! notice says so). In a collaboration room the cell shows running from the start and its
//! outputs follow the run's every [`STREAM_EVERY`] (streams grow, displays appear, an
//! updated display changes in place, `clear_output` clears), so the person watches them as
//! they come; the end writes the run's outputs over them, the same ones in the same place.
//! With `stop_on_error` the first cell that does not end `ok` stops the batch; the cells
//! after it are `skipped`. Each cell is an ordinary run of the session: its run id answers
//! `get_execution`, `cancel_execution` stops it, and it is in the history. The batch itself
//! has one handle ([`BatchHandle`], its id `cells-…`): cancelling it cancels the running
//! cell's run and skips the cells after it, as `stop_on_error` does.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{Notify, watch};

use super::doc::Doc;
use crate::ops::export::{cell_outputs, execution_count};
use crate::registry::Registry;
use crate::registry::scope::key::SessionKey;
use crate::session::cmd;
use crate::session::history::HistoryEntry;
use crate::session::{ExecuteRequest, Follows, RunId, RunStatus, SessionError, SessionHandle};

/// How often a running cell's new outputs are shown in a collaboration room.
pub const STREAM_EVERY: Duration = Duration::from_millis(200);
/// How often, at most, a running cell's long stream (cut at the output bound, so no longer
/// growing at its end) is rewritten in a room.
const REWRITE_EVERY: Duration = Duration::from_secs(1);

/// Where one cell of a batch is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    /// Waiting for the cells before it.
    Pending,
    /// Submitted: its run's status (queued, running, awaiting_input, or final).
    Run { run_id: RunId, status: RunStatus },
    /// Not run: an earlier cell failed (stop_on_error), or the batch could not go on.
    Skipped { reason: String },
}

/// One cell of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BatchCell {
    pub id: String,
    #[serde(flatten)]
    pub state: CellState,
}

/// A batch as it stands: its cells in run order, notices (a deleted cell, a failed write),
/// and whether it is over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BatchState {
    pub cells: Vec<BatchCell>,
    pub notices: Vec<String>,
    pub done: bool,
    /// True when the batch was cancelled (`cancel_execution` or `tasks/cancel` on its id):
    /// the cell that ran was cancelled, the cells after it are skipped.
    pub cancelled: bool,
}

impl BatchState {
    /// The run of the cell that is running or queued now, if any.
    pub fn current_run(&self) -> Option<&RunId> {
        self.cells.iter().find_map(|c| match &c.state {
            CellState::Run { run_id, status } if !status.is_final() => Some(run_id),
            _ => None,
        })
    }
}

/// What a batch runs: the cells' ids and sources (code cells only), in order.
pub struct Batch {
    pub cells: Vec<(String, String)>,
    pub stop_on_error: bool,
}

/// What a batch's handle id starts with (run ids never do), so `get_execution`,
/// `cancel_execution` and the tasks extension tell it from a run's.
pub const BATCH_PREFIX: &str = "cells-";

/// Why the cells after a cancelled batch's running one were not run.
const CANCELLED: &str = "the batch was cancelled";

/// A started batch: its id (one handle for the whole batch), a receiver following it, and
/// the way to stop it.
#[derive(Clone)]
pub struct BatchHandle {
    pub id: String,
    pub rx: watch::Receiver<BatchState>,
    /// When it started.
    pub started: chrono::DateTime<chrono::Utc>,
    ended: Arc<OnceLock<chrono::DateTime<chrono::Utc>>>,
    stop: Arc<Stop>,
}

/// A request to stop a batch: set once, and the running cell told at once.
#[derive(Default)]
struct Stop {
    asked: AtomicBool,
    wake: Notify,
}

impl Stop {
    fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }
}

impl BatchHandle {
    /// Stop the batch: its running cell's run is cancelled (interrupted), the cells after it
    /// are skipped. A batch that is over stays as it ended.
    pub fn cancel(&self) {
        self.stop.asked.store(true, Ordering::SeqCst);
        self.stop.wake.notify_one();
    }

    /// When it ended, once it has.
    pub fn ended(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.ended.get().copied()
    }

    /// True for an id of this shape (a batch's, not a run's).
    pub fn is_batch_id(id: &str) -> bool {
        id.starts_with(BATCH_PREFIX)
    }
}

/// What the batch's task works with.
struct Ctx<'a> {
    registry: &'a Registry,
    key: &'a SessionKey,
    doc: &'a Doc,
    tx: &'a watch::Sender<BatchState>,
    stop: &'a Stop,
}

/// Start `batch` in the session of `key`; the handle follows it to its end and stops it.
pub fn start(registry: Arc<Registry>, key: SessionKey, doc: Doc, batch: Batch) -> BatchHandle {
    let initial = BatchState {
        cells: batch
            .cells
            .iter()
            .map(|(id, _)| BatchCell {
                id: id.clone(),
                state: CellState::Pending,
            })
            .collect(),
        notices: Vec::new(),
        done: batch.cells.is_empty(),
        cancelled: false,
    };
    let (tx, rx) = watch::channel(initial);
    let stop = Arc::new(Stop::default());
    let ended = Arc::new(OnceLock::new());
    let handle = BatchHandle {
        id: format!("{BATCH_PREFIX}{}", uuid::Uuid::new_v4().simple()),
        rx,
        started: chrono::Utc::now(),
        ended: ended.clone(),
        stop: stop.clone(),
    };
    tokio::spawn(async move {
        let ctx = Ctx {
            registry: &registry,
            key: &key,
            doc: &doc,
            tx: &tx,
            stop: &stop,
        };
        run(&ctx, batch).await;
        let _ = ended.set(chrono::Utc::now());
        tx.send_modify(|s| s.done = true);
    });
    handle
}

/// A finished cell's outputs on their way into the notebook, while the next cell runs.
type Writing<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

async fn run(ctx: &Ctx<'_>, batch: Batch) {
    let mut writing = None;
    run_cells(ctx, batch, &mut writing).await;
    if let Some(w) = writing {
        w.await;
    }
}

/// Run the batch's cells in order; each cell's outputs are written while the next one runs
/// (one write in flight; the caller awaits the last), as nbclient's per-cell save is not.
async fn run_cells<'a>(ctx: &'a Ctx<'a>, batch: Batch, writing: &mut Option<Writing<'a>>) {
    let (tx, n, stop_on_error) = (ctx.tx, batch.cells.len(), batch.stop_on_error);
    let mut cells = batch.cells.into_iter().enumerate().peekable();
    let mut ahead: Option<Queued> = None;
    while let Some((i, (id, source))) = cells.next() {
        if ctx.stop.asked() {
            withdraw(ahead).await;
            return cancelled(tx, i);
        }
        let current = match ahead.take() {
            Some(q) => q,
            None => match submit(ctx, source, None).await {
                Ok(q) => q,
                Err(e) => return skip_rest(tx, i, &e.to_string()),
            },
        };
        if let Some((_, (_, next))) = cells.peek() {
            let follows = Follows {
                run: current.run.clone(),
                only_if_ok: stop_on_error,
            };
            // A refusal (a full queue) is met again, and said, when that cell's turn comes.
            ahead = submit(ctx, next.clone(), Some(follows)).await.ok();
        }
        let cell = follow_cell(ctx, i, &id, &current, ahead.as_ref());
        let status = match writing.take() {
            Some(w) => tokio::join!(cell, w).0,
            None => cell.await,
        };
        *writing = Some(Box::pin(write_cell(ctx, id.clone(), current)));
        // Asked as the last cell ended well: nothing was stopped, the batch just ended.
        if ctx.stop.asked() && (i + 1 < n || status != RunStatus::Ok) {
            withdraw(ahead).await;
            return cancelled(tx, i + 1);
        }
        if stop_on_error && status != RunStatus::Ok {
            // The session already ends the queued next cell without running it (`only_if_ok`).
            withdraw(ahead).await;
            let reason = format!("cell {id} ended {}", status.as_str());
            return skip_rest(tx, i + 1, &reason);
        }
    }
}

fn cancelled(tx: &watch::Sender<BatchState>, from: usize) {
    tx.send_modify(|s| s.cancelled = true);
    skip_rest(tx, from, CANCELLED);
}

/// A cell's run in the session's queue (or running): its session, run id and status.
struct Queued {
    handle: SessionHandle,
    run: RunId,
    status: watch::Receiver<RunStatus>,
}

/// Queue `source` in the batch's session, following the cell before it when `follows`
/// says so. Errors: the session is gone, its queue is full.
async fn submit(
    ctx: &Ctx<'_>,
    source: String,
    follows: Option<Follows>,
) -> Result<Queued, SessionError> {
    let req = ExecuteRequest {
        follows,
        ..ExecuteRequest::new(source)
    };
    let (handle, (run, status)) = ctx.registry.submit(ctx.key, req).await?;
    Ok(Queued {
        handle,
        run,
        status,
    })
}

/// Take the next cell, queued ahead, back out of the session's queue (it never ran; its cell
/// stays `pending` in the batch until skipped).
async fn withdraw(ahead: Option<Queued>) {
    if let Some(q) = ahead {
        let _ = q.handle.call(cmd::Cancel { run: q.run }).await;
    }
}

/// Follow cell `id`'s run to its final status, showing it in a room as it goes; a cancel of
/// the batch cancels it (the cell queued `ahead` of it first, so that one never starts).
async fn follow_cell(
    ctx: &Ctx<'_>,
    index: usize,
    id: &str,
    cell: &Queued,
    ahead: Option<&Queued>,
) -> RunStatus {
    let (doc, tx) = (ctx.doc, ctx.tx);
    if let Err(e) = doc.begin_run(id) {
        notice(tx, format!("Cell {id} could not be shown running: {e}"));
    }
    let (handle, run_id, mut rx) = (&cell.handle, &cell.run, cell.status.clone());
    let mut live = Live::default();
    let mut stopping = false;
    loop {
        let status = *rx.borrow_and_update();
        let state = CellState::Run {
            run_id: run_id.clone(),
            status,
        };
        tx.send_modify(|s| s.cells[index].state = state);
        if status.is_final() {
            break;
        }
        if ctx.stop.asked() && !std::mem::replace(&mut stopping, true) {
            // A cancel before or while the cell runs: its run is cancelled like any run.
            if let Some(a) = ahead {
                let _ = a.handle.call(cmd::Cancel { run: a.run.clone() }).await;
            }
            let _ = handle
                .call(cmd::Cancel {
                    run: run_id.clone(),
                })
                .await;
        }
        // Awaiting input is answered with send_input by the agent; keep following.
        let every = if doc.is_live() {
            STREAM_EVERY
        } else {
            Duration::MAX
        };
        tokio::select! {
            changed = tokio::time::timeout(every, rx.changed()) => match changed {
                Ok(Err(_)) => break,
                Ok(Ok(())) => {}
                Err(_) => live.show_new(handle, run_id, doc, id).await,
            },
            _ = ctx.stop.wake.notified(), if !stopping => {}
        }
    }
    *rx.borrow()
}

/// Write the outputs and execution count of cell `id`'s finished run into the notebook.
async fn write_cell(ctx: &Ctx<'_>, id: String, cell: Queued) {
    let (doc, tx, handle, run_id) = (ctx.doc, ctx.tx, cell.handle, cell.run);
    match entry_of(&handle, &run_id).await {
        Some(entry) => write_outputs(doc, &id, &entry, tx).await,
        None => notice(
            tx,
            format!(
                "Cell {id}'s run {run_id} left no history entry; its outputs were not written."
            ),
        ),
    }
}

/// What a running cell's outputs show in a room so far.
#[derive(Default)]
struct Live {
    /// The run's output count last shown (see [`cmd::RunEntry`]).
    seen: u64,
    /// When a long stream cut at the output bound was last allowed to be rewritten.
    rewritten: Option<Instant>,
    /// A long stream waits for its rewrite.
    waiting: bool,
    /// Showing failed once (the cell was deleted, the room is lost): the end writes all.
    stopped: bool,
}

impl Live {
    /// Bring the cell's outputs in the room to the run's, when they changed: streams grow,
    /// displays appear, updates and clears apply, as the run's end will write them.
    async fn show_new(&mut self, handle: &SessionHandle, run: &RunId, doc: &Doc, id: &str) {
        if self.stopped {
            return;
        }
        let whole = self.rewritten.is_none_or(|t| t.elapsed() >= REWRITE_EVERY);
        // Unchanged outputs with a stream waiting are asked for again once it may go.
        let seen = match self.waiting && whole {
            true => u64::MAX,
            false => self.seen,
        };
        let request = cmd::RunEntry {
            run: run.clone(),
            seen,
        };
        let Ok(Some((now, entry))) = handle.call(request).await else {
            return;
        };
        self.seen = now;
        match doc.show(id, &cell_outputs(&entry), whole) {
            Ok(waiting) => self.waiting = waiting,
            Err(_) => self.stopped = true,
        }
        if whole {
            self.rewritten = Some(Instant::now());
        }
    }
}

/// The history entry of `run` (near the end of the history, where a run that just finished
/// is).
async fn entry_of(handle: &SessionHandle, run: &RunId) -> Option<HistoryEntry> {
    for start in [Some(-16), None] {
        let cmd::HistoryPage { entries, .. } =
            handle.call(cmd::History { start, end: None }).await.ok()?;
        if let Some((_, e)) = entries
            .into_iter()
            .rev()
            .find(|(_, e)| e.run_id == run.as_str())
        {
            return Some(e);
        }
    }
    None
}

async fn write_outputs(doc: &Doc, id: &str, entry: &HistoryEntry, tx: &watch::Sender<BatchState>) {
    let outputs = cell_outputs(entry);
    let count = execution_count(entry);
    match doc.finish(id, outputs, count).await {
        Ok(true) => {}
        Ok(false) => notice(
            tx,
            format!(
                "Cell {id} was deleted from the notebook while it ran; its outputs were not written."
            ),
        ),
        Err(e) => notice(tx, format!("Cell {id}'s outputs could not be written: {e}")),
    }
}

fn notice(tx: &watch::Sender<BatchState>, text: String) {
    tx.send_modify(|s| s.notices.push(text));
}

fn skip_rest(tx: &watch::Sender<BatchState>, from: usize, reason: &str) {
    tx.send_modify(|s| {
        for c in s.cells.iter_mut().skip(from) {
            if c.state == CellState::Pending {
                c.state = CellState::Skipped {
                    reason: reason.to_string(),
                };
            }
        }
    });
}
