//! An `execute_cells` batch as one handle (docs/notebooks.md, "Long runs of cells: one
//! handle for the batch"): what `execute_cells` answers ([`CellsRun`]), and the same answer for the batch's id
//! (`cells-…`) wherever a run id is taken — `get_execution` follows the batch, and
//! `cancel_execution` stops it — and for the task a client that asked for one gets
//! (`tasks/get`, `tasks/cancel`; the task id is the batch id, as a run's is its run id).
//!
//! The answer says how far the batch is: each cell's state (its run id and status, or why it
//! was skipped), how many cells finished, which one runs, and what `execute` returns for
//! each finished cell (bounded by [`RESULTS_BUDGET`]). A notebook keeps its latest batch;
//! a caller reaches only the batches of its own notebooks.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use schemars::JsonSchema;
use serde::Serialize;

use super::out::{Json, Output};
use crate::notebook::bind::{Binding, Notebooks};
use crate::notebook::run::{BatchHandle, BatchState, CellState};
use crate::registry::scope::Scope;
use crate::session::{ExecutionResult, RunId, RunStatus, cmd};

/// Bytes of serialized results one `execute_cells` answer carries at most.
const RESULTS_BUDGET: usize = 256 * 1024;
/// How long cancelling a batch waits for its running cell to stop (an interrupt, then the
/// kernel's grace) before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// Suggested `tasks/get` polling interval for a batch's task (ms).
const POLL_INTERVAL_MS: u64 = 1_000;

/// What `execute_cells` answers (and `get_execution` / `cancel_execution` on its `run_id`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct CellsRun {
    pub path: std::path::PathBuf,
    pub session_id: String,
    /// The batch's id: get_execution(run_id, wait_s) follows the whole batch,
    /// cancel_execution(run_id) stops it (the running cell cancelled, the rest skipped).
    pub run_id: String,
    /// `done`, or `running` when the wait ended first.
    pub status: String,
    /// Cells that finished (ran to a final status).
    pub cells_done: usize,
    /// The cell running (or queued) now.
    pub running_cell: Option<String>,
    /// What `execute` returns so far for the running cell (its output up to now).
    pub running_result: Option<ExecutionResult>,
    #[serde(flatten)]
    pub batch: BatchState,
    /// What `execute` returns, for each cell that finished, in order (bounded: past
    /// [`RESULTS_BUDGET`] bytes, only the cells' states above say how they ended).
    pub results: Vec<ExecutionResult>,
}

impl Output for CellsRun {
    fn text(&self) -> String {
        let mut t = format!(
            "{} cells of {}: {} (batch {}{})\n",
            self.batch.cells.len(),
            self.path.display(),
            self.status,
            self.run_id,
            if self.batch.cancelled {
                ", cancelled"
            } else {
                ""
            }
        );
        for c in &self.batch.cells {
            t.push_str(&format!(
                "  {}: {}\n",
                c.id,
                serde_json::to_string(&c.state).unwrap_or_default()
            ));
        }
        for n in &self.batch.notices {
            t.push_str(&format!("notice: {n}\n"));
        }
        t
    }

    fn is_error(&self) -> bool {
        self.batch.done
            && self.batch.cells.iter().any(|c| {
                matches!(&c.state, CellState::Run { status, .. } if status.is_final() && *status != RunStatus::Ok)
            })
    }
}

/// The caller's batch named `id`, with its notebook's binding.
pub(crate) fn find(scope: &Scope, id: &str) -> Option<(Arc<Binding>, BatchHandle)> {
    if !BatchHandle::is_batch_id(id) {
        return None;
    }
    let owner = scope.viewer().owner().to_string();
    Notebooks::global().find_batch(&owner, id)
}

/// The batch's answer once it is over, or as it stands after `wait`.
pub(crate) async fn answer(
    scope: &Scope,
    b: &Binding,
    batch: &BatchHandle,
    wait: Duration,
) -> CellsRun {
    let mut rx = batch.rx.clone();
    if !wait.is_zero() {
        let _ = tokio::time::timeout(wait, rx.wait_for(|s| s.done)).await;
    }
    let mut state = rx.borrow().clone();
    let results = finished_results(scope, &b.session_id, &mut state).await;
    let finished = |c: &&crate::notebook::run::BatchCell| matches!(&c.state, CellState::Run { status, .. } if status.is_final());
    let cells_done = state.cells.iter().filter(finished).count();
    let running = state.cells.iter().find_map(|c| match &c.state {
        CellState::Run { run_id, status } if !status.is_final() => Some((c.id.clone(), run_id)),
        _ => None,
    });
    let running_result = match &running {
        Some((_, run)) => record(scope, &b.session_id, run).await,
        None => None,
    };
    let running_cell = running.map(|(id, _)| id);
    CellsRun {
        path: b.path.clone(),
        session_id: b.session_id.clone(),
        run_id: batch.id.clone(),
        status: if state.done { "done" } else { "running" }.into(),
        cells_done,
        running_cell,
        running_result,
        batch: state,
        results,
    }
}

/// Stop the batch (its running cell cancelled, the rest skipped) and answer it once it is
/// over, or after [`CANCEL_WAIT`].
pub(crate) async fn cancel(scope: &Scope, b: &Binding, batch: &BatchHandle) -> CellsRun {
    batch.cancel();
    answer(scope, b, batch, CANCEL_WAIT).await
}

/// `tasks/get` of a batch's task: working while it runs (the message says which cell), then
/// completed with the batch's answer, or cancelled. `None`: no such batch for this caller.
pub(crate) async fn task(scope: &Scope, id: &str) -> Option<DetailedTask> {
    let (b, batch) = find(scope, id)?;
    let a = answer(scope, &b, &batch, Duration::ZERO).await;
    let updated = batch.ended().unwrap_or_else(Utc::now);
    let mut task = Task::new(
        batch.id.clone(),
        TaskStatus::Working,
        batch.started.to_rfc3339(),
        updated.to_rfc3339(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let payload = if !a.batch.done {
        task = task.with_status_message(format!(
            "{} of {} cells done in session '{}'{}",
            a.cells_done,
            a.batch.cells.len(),
            a.session_id,
            a.running_cell
                .as_ref()
                .map(|c| format!("; cell {c} running"))
                .unwrap_or_default()
        ));
        TaskPayload::Working
    } else if a.batch.cancelled {
        TaskPayload::Cancelled
    } else {
        let result = match Json(a).into_call_tool_result() {
            Ok(CallToolResponse::Complete(r)) => match serde_json::to_value(r) {
                Ok(serde_json::Value::Object(o)) => o,
                _ => JsonObject::new(),
            },
            _ => JsonObject::new(),
        };
        TaskPayload::Completed { result }
    };
    Some(DetailedTask::new(task, payload))
}

/// The record of `run` in `session` now.
async fn record(scope: &Scope, session: &str, run: &RunId) -> Option<ExecutionResult> {
    let handle = scope.registry().get(&scope.key(session)).ok()?;
    handle.call(cmd::GetRun { run: run.clone() }).await.ok()
}

/// The records of the cells of `state` that finished, within [`RESULTS_BUDGET`]; a notice
/// in `state` says when some were left out.
async fn finished_results(
    scope: &Scope,
    session: &str,
    state: &mut BatchState,
) -> Vec<ExecutionResult> {
    let Ok(handle) = scope.registry().get(&scope.key(session)) else {
        return Vec::new();
    };
    let (mut out, mut used, mut left) = (Vec::new(), 0, 0);
    for c in &state.cells {
        let CellState::Run { run_id, status } = &c.state else {
            continue;
        };
        if !status.is_final() {
            continue;
        }
        let Ok(r) = handle
            .call(cmd::GetRun {
                run: run_id.clone(),
            })
            .await
        else {
            continue;
        };
        let size = serde_json::to_vec(&r).map_or(0, |v| v.len());
        if used + size > RESULTS_BUDGET {
            left += 1;
            continue;
        }
        used += size;
        out.push(r);
    }
    if left > 0 {
        state.notices.push(format!(
            "{left} finished cells' results are left out of this answer (over {RESULTS_BUDGET} bytes): get_execution(run_id) reads each, read_cells shows the outputs written."
        ));
    }
    out
}
