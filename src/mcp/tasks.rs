//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on top of runs.
//!
//! A client that declares the extension and calls `execute`, `execute_file` or
//! `execute_cells` gets a task instead of a `"running"` result when the run (or the batch of
//! cells) outlasts `wait_s`. The task id *is* the `run_id` (a batch's `cells-…` id: see
//! `tools/notebook_batch.rs`), so `tasks/get` is `get_execution(run_id)` without waiting,
//! `tasks/cancel` is `cancel_execution(run_id)`, and the ordinary run tools keep working on
//! the same run. A client that does not declare the extension gets exactly the result it got
//! before.
//!
//! Status mapping: a queued, running or `awaiting_input` run is `working` (the status message
//! says what it waits for; answering `input()` stays with `send_input`), a `cancelled` run is
//! `cancelled`, and every other final status is `completed` with the run's `CallToolResult`
//! (whose `status` says `ok`, `error`, `timeout`, `interrupted` or `kernel_died`). A task
//! lives as long as its run is kept (`ttlMs: null`); its `createdAt` is when the run was
//! queued and, once it finished, `lastUpdatedAt` is when it did: neither moves between two
//! `tasks/get`. Spec:
//! <https://modelcontextprotocol.io/extensions/tasks/overview>.

use chrono::{Duration as ChronoDuration, Utc};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask, JsonObject, Task,
    TaskPayload, TaskStatus,
};

use super::render;
use super::tools::notebook_batch::{find as find_batch, task as batch_task};
use crate::notebook::run::BatchHandle;
use crate::registry::scope::Scope;
use crate::session::{ExecutionResult, RunStatus, SessionError};

/// Suggested `tasks/get` polling interval (ms).
const POLL_INTERVAL_MS: u64 = 1_000;

/// Tools whose long runs may become tasks.
pub(crate) fn may_become_task(tool: &str) -> bool {
    matches!(tool, "execute" | "execute_file" | "execute_cells")
}

/// If `response` is a run still queued or running after `wait_s`, the task for it; else
/// `response` unchanged (finished runs, errors, and runs waiting for `input()`, whose prompt
/// the caller must see).
pub(crate) fn into_task(response: CallToolResponse) -> CallToolResponse {
    let CallToolResponse::Complete(result) = &response else {
        return response;
    };
    let Some(run) = result
        .structured_content
        .as_ref()
        .and_then(RunState::of_json)
    else {
        return response;
    };
    if !matches!(run.status, RunStatus::Queued | RunStatus::Running) {
        return response;
    }
    let (task, _) = describe(&run);
    CallToolResponse::Task(CreateTaskResult::new(task))
}

/// What a task says about its run.
struct RunState {
    run_id: String,
    session_id: String,
    status: RunStatus,
    /// Time since the run was queued (ms).
    age_ms: u64,
    /// When it was queued and finished, where known: a task's dates never move once set.
    queued: Option<chrono::DateTime<Utc>>,
    finished: Option<chrono::DateTime<Utc>>,
}

impl RunState {
    fn of(r: &ExecutionResult) -> RunState {
        RunState {
            run_id: r.run_id.clone(),
            session_id: r.session_id.clone(),
            status: r.status,
            age_ms: r.queued_ms + r.elapsed_ms,
            queued: r.queued_date,
            finished: r.finished_date,
        }
    }

    /// From an ExecutionResult's `structuredContent`; `None` for any other shape.
    fn of_json(v: &serde_json::Value) -> Option<RunState> {
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let ms = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        Some(RunState {
            run_id: text("run_id")?,
            session_id: text("session_id")?,
            status: serde_json::from_value(v.get("status")?.clone()).ok()?,
            age_ms: ms("queued_ms") + ms("elapsed_ms"),
            queued: None,
            finished: None,
        })
    }
}

/// The task's base fields and its payload for a run's current state (a completed payload's
/// `result` is filled in by the caller, which has the run's record).
fn describe(run: &RunState) -> (Task, TaskPayload) {
    let now = Utc::now();
    let created = run
        .queued
        .unwrap_or_else(|| now - ChronoDuration::milliseconds(run.age_ms as i64));
    let mut task = Task::new(
        run.run_id.clone(),
        TaskStatus::Working,
        created.to_rfc3339(),
        run.finished.unwrap_or(now).to_rfc3339(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let payload = match run.status {
        RunStatus::Queued => {
            task = task.with_status_message(format!(
                "queued in session '{}' behind another run",
                run.session_id
            ));
            TaskPayload::Working
        }
        RunStatus::Running => {
            task = task.with_status_message(format!("running in session '{}'", run.session_id));
            TaskPayload::Working
        }
        RunStatus::AwaitingInput => {
            task = task.with_status_message(format!(
                "waiting for input(): answer with send_input(run_id=\"{}\", value=...)",
                run.run_id
            ));
            TaskPayload::Working
        }
        RunStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Completed {
            result: JsonObject::new(),
        },
    };
    (task, payload)
}

fn as_object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}

fn not_found(task_id: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "no task '{task_id}': task ids are run ids, and this run is unknown or no longer kept"
        ),
        None,
    )
}

/// The run behind task `task_id` as it stands now (no waiting), for a caller that sees it.
async fn task_run(scope: &Scope, task_id: &str) -> Result<ExecutionResult, McpError> {
    let key = scope.run_key(task_id.to_string());
    let run = scope.registry().run(&key).map_err(|_| not_found(task_id))?;
    match run.record().await {
        Ok(r) => Ok(r),
        Err(SessionError::RunNotFound(_)) => Err(not_found(task_id)),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

/// `tasks/get`: the run's state; once it has finished, its result as `execute` renders it.
/// A task of a run the caller does not see is unknown (`-32602`), like one that never was.
pub(crate) async fn detailed(scope: &Scope, task_id: &str) -> Result<DetailedTask, McpError> {
    if BatchHandle::is_batch_id(task_id) {
        return batch_task(scope, task_id)
            .await
            .ok_or_else(|| not_found(task_id));
    }
    let run = task_run(scope, task_id).await?;
    let (task, payload) = describe(&RunState::of(&run));
    let payload = match payload {
        TaskPayload::Completed { .. } => TaskPayload::Completed {
            result: as_object(&render::execution(&run, scope.registry().limits()).await),
        },
        other => other,
    };
    Ok(DetailedTask::new(task, payload))
}

/// `tasks/cancel`: cancel the run (a queued run never executes, a running one is
/// interrupted), as `cancel_execution` does. Cancelling a finished run is a no-op.
pub(crate) async fn cancel(scope: &Scope, task_id: &str) -> Result<(), McpError> {
    if BatchHandle::is_batch_id(task_id) {
        let (_, batch) = find_batch(scope, task_id).ok_or_else(|| not_found(task_id))?;
        batch.cancel();
        return Ok(());
    }
    let key = scope.run_key(task_id.to_string());
    let run = scope.registry().run(&key).map_err(|_| not_found(task_id))?;
    match run.cancel().await {
        Ok(()) => Ok(()),
        Err(SessionError::RunNotFound(_)) => Err(not_found(task_id)),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: RunStatus) -> RunState {
        RunState {
            run_id: "r7".into(),
            session_id: "s".into(),
            status,
            age_ms: 1005,
            queued: None,
            finished: None,
        }
    }

    /// A tool result whose structuredContent has the fields an ExecutionResult has.
    fn complete(r: &RunState) -> CallToolResponse {
        CallToolResponse::Complete(CallToolResult::structured(serde_json::json!({
            "run_id": r.run_id, "session_id": r.session_id, "status": r.status,
            "queued_ms": 5, "elapsed_ms": 1000, "stdout": ""
        })))
    }

    #[test]
    fn a_running_run_becomes_a_task_named_by_its_run_id() {
        let CallToolResponse::Task(t) = into_task(complete(&run(RunStatus::Running))) else {
            panic!("expected a task");
        };
        assert_eq!(t.task.task_id, "r7");
        assert_eq!(t.task.status, TaskStatus::Working);
        assert_eq!(t.task.poll_interval_ms, Some(POLL_INTERVAL_MS));
    }

    #[test]
    fn finished_and_input_waiting_runs_stay_results() {
        for s in [RunStatus::Ok, RunStatus::Error, RunStatus::AwaitingInput] {
            assert!(matches!(
                into_task(complete(&run(s))),
                CallToolResponse::Complete(_)
            ));
        }
    }

    #[test]
    fn a_cancelled_run_is_a_cancelled_task_and_a_timeout_a_completed_one() {
        assert!(matches!(
            describe(&run(RunStatus::Cancelled)).1,
            TaskPayload::Cancelled
        ));
        assert!(matches!(
            describe(&run(RunStatus::Timeout)).1,
            TaskPayload::Completed { .. }
        ));
    }
}
