//! `execute_cells`' runs: the chosen code cells of a bound notebook, run one after another in
//! its session, each cell's outputs and execution count written back as it finishes, the way
//! Jupyter's own run of a notebook does.
//!
//! A batch runs in a task of its own, so the tool call that started it can return after its
//! `wait_s` while the cells go on; [`BatchState`] (a watch) says at any moment which cell runs
//! and how each ended. The sources are those of the cells when the batch starts (what the
//! agent asked to run); outputs go back through [`Doc::finish`], so a person's edits in
//! between are merged, and a cell the person deleted meanwhile just loses its outputs (a
//! notice says so). In a collaboration room the cell shows running from the start and its
//! stream text is appended as it arrives ([`STREAM_EVERY`]), so the person watches it grow. With `stop_on_error` the first cell that does not end `ok` stops the
//! batch; the cells after it are `skipped`. Each cell is an ordinary run of the session: its
//! run id answers `get_execution`, `cancel_execution` stops it, and it is in the history.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;

use super::doc::Doc;
use crate::ops::export::{cell_outputs, execution_count};
use crate::registry::Registry;
use crate::registry::scope::key::SessionKey;
use crate::session::cmd;
use crate::session::history::HistoryEntry;
use crate::session::{ExecuteRequest, RunId, RunStatus, SessionError, SessionHandle};

/// How often a running cell's new stream text is sent to a collaboration room.
pub const STREAM_EVERY: Duration = Duration::from_millis(200);

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

/// Start `batch` in the session of `key`; the returned receiver follows it to its end.
pub fn start(
    registry: Arc<Registry>,
    key: SessionKey,
    doc: Doc,
    batch: Batch,
) -> watch::Receiver<BatchState> {
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
    };
    let (tx, rx) = watch::channel(initial);
    tokio::spawn(async move {
        run(&registry, &key, &doc, batch, &tx).await;
        tx.send_modify(|s| s.done = true);
    });
    rx
}

async fn run(
    registry: &Registry,
    key: &SessionKey,
    doc: &Doc,
    batch: Batch,
    tx: &watch::Sender<BatchState>,
) {
    for (i, (id, source)) in batch.cells.into_iter().enumerate() {
        let status = match run_cell(registry, key, doc, i, &id, source, tx).await {
            Ok(status) => status,
            Err(reason) => {
                skip_rest(tx, i, &reason.to_string());
                return;
            }
        };
        if batch.stop_on_error && status != RunStatus::Ok {
            let reason = format!("cell {id} ended {}", status.as_str());
            skip_rest(tx, i + 1, &reason);
            return;
        }
    }
}

/// Run one cell and write its outputs; returns the run's final status, or why the batch
/// cannot go on (the session is gone, its queue is full).
async fn run_cell(
    registry: &Registry,
    key: &SessionKey,
    doc: &Doc,
    index: usize,
    id: &str,
    source: String,
    tx: &watch::Sender<BatchState>,
) -> Result<RunStatus, SessionError> {
    if let Err(e) = doc.begin_run(id) {
        notice(tx, format!("Cell {id} could not be shown running: {e}"));
    }
    let (handle, (run_id, mut rx)) = registry.submit(key, ExecuteRequest::new(source)).await?;
    let mut streamed = Streamed::default();
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
        // Awaiting input is answered with send_input by the agent; keep following.
        if !doc.is_live() {
            if rx.changed().await.is_err() {
                break;
            }
            continue;
        }
        match tokio::time::timeout(STREAM_EVERY, rx.changed()).await {
            Ok(Err(_)) => break,
            Ok(Ok(())) => {}
            Err(_) => streamed.send_new(&handle, &run_id, doc, id).await,
        }
    }
    let status = *rx.borrow();
    match entry_of(&handle, &run_id).await {
        Some(entry) => write_outputs(doc, id, &entry, tx).await,
        None => notice(
            tx,
            format!(
                "Cell {id}'s run {run_id} left no history entry; its outputs were not written."
            ),
        ),
    }
    Ok(status)
}

/// The stream text of a running cell sent to a room so far.
#[derive(Default)]
struct Streamed {
    stdout: usize,
    stderr: usize,
    /// Sending failed once (the cell was deleted, the room is lost): the end writes all.
    stopped: bool,
}

impl Streamed {
    /// Send the text the run printed since the last call, as stream outputs.
    async fn send_new(&mut self, handle: &SessionHandle, run: &RunId, doc: &Doc, id: &str) {
        if self.stopped {
            return;
        }
        let Ok(r) = handle.call(cmd::GetRun { run: run.clone() }).await else {
            return;
        };
        for (name, text, sent) in [
            ("stdout", &r.stdout, &mut self.stdout),
            ("stderr", &r.stderr, &mut self.stderr),
        ] {
            // A long stream is shown head and tail: what no longer extends what was sent
            // waits for the run's end.
            let Some(new) = text.get(*sent..).filter(|n| !n.is_empty()) else {
                continue;
            };
            if r.truncated.as_ref().is_some_and(|t| t.contains_key(name)) {
                continue;
            }
            let out = json!({"output_type": "stream", "name": name, "text": new});
            if doc.stream(id, &out).is_err() {
                self.stopped = true;
                return;
            }
            *sent = text.len();
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
