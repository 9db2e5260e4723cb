//! Tools on a run already started: `get_execution` (wait for it again, or page one of its
//! parts), `send_input` (answer its `input()` prompt) and `cancel_execution`. Runs are named
//! through the caller's scope: a run of a session it does not see is `EXECUTION_NOT_FOUND`.
//! An `execute_cells` batch's id (`cells-…`) is taken too: `get_execution` follows the batch
//! and `cancel_execution` stops it (see `notebook_batch.rs`).

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::args::{Choice, Seconds, WaitS};
use super::notebook_batch::{self, CellsRun};
use super::out::{Json, Output, Run, RunOr};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::registry::RunHandle;
use crate::session::text::StreamPage;
use crate::session::{Part, RunId, wait_settled};

/// Largest page `get_execution` returns at once (bytes).
const MAX_PAGE_BYTES: usize = 1024 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetExecutionParams {
    pub run_id: String,
    /// Default 0.
    pub wait_s: Option<Seconds<WaitS>>,
    /// Page this part instead.
    pub stream: Option<Choice<Part>>,
    pub offset: Option<usize>,
    /// Default 20000.
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendInputParams {
    pub run_id: String,
    /// The line (no newline needed).
    pub value: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunIdParams {
    pub run_id: String,
}

/// A page of one part of a run (`get_execution` with `stream`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunPage {
    pub run_id: RunId,
    pub stream: Part,
    #[serde(flatten)]
    pub page: StreamPage,
}

impl Output for RunPage {
    fn text(&self) -> String {
        self.page.text.clone()
    }
}

/// What `get_execution` answers besides a run: a page of one of its parts, or an
/// `execute_cells` batch named by its id.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum RunExtra {
    Page(RunPage),
    Cells(Box<CellsRun>),
}

impl Output for RunExtra {
    fn text(&self) -> String {
        match self {
            RunExtra::Page(p) => p.text(),
            RunExtra::Cells(c) => c.text(),
        }
    }

    fn is_error(&self) -> bool {
        match self {
            RunExtra::Page(p) => p.is_error(),
            RunExtra::Cells(c) => c.is_error(),
        }
    }
}

#[tool_router(router = runs_router, vis = "pub(crate)")]
impl KernelMcp {
    /// A run's result (after up to wait_s), or limit bytes from offset of one part (stdout,
    /// stderr, result, traceback).
    #[tool]
    async fn get_execution(
        &self,
        caller: Caller,
        Parameters(p): Parameters<GetExecutionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RunOr<RunExtra>>, ToolError> {
        let wait = p.wait_s.map(|w| w.get()).unwrap_or(Duration::ZERO);
        if let Some((b, batch)) = notebook_batch::find(&caller.scope, &p.run_id) {
            if p.stream.is_some() {
                return Err(ToolError::invalid(format!(
                    "{} is a batch of notebook cells: page one cell's output with that cell's run_id (the answer's cells list them).",
                    p.run_id
                )));
            }
            let cells = notebook_batch::answer(&caller.scope, &b, &batch, wait).await;
            return Ok(Json(RunOr::Other(RunExtra::Cells(Box::new(cells)))));
        }
        let key = caller.scope.run_key(p.run_id);
        let found = caller.registry().run(&key)?;
        if let Some(stream) = p.stream {
            let stream = stream.get(|s| {
                ToolError::invalid(format!(
                    "stream must be \"stdout\", \"stderr\", \"result\" or \"traceback\", not {s:?}."
                ))
            })?;
            let page = page(&caller, &found, stream, p.offset, p.limit).await?;
            return Ok(Json(RunOr::Other(RunExtra::Page(page))));
        }
        let rx = found.watch().await?;
        let run = self
            .wait_and_render(&caller, &found, rx, wait, &ctx)
            .await?;
        Ok(Json(RunOr::Run(run)))
    }

    /// Answer an awaiting_input run's input() prompt; waits like execute.
    #[tool]
    async fn send_input(
        &self,
        caller: Caller,
        Parameters(p): Parameters<SendInputParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Run>, ToolError> {
        let key = caller.scope.run_key(p.run_id);
        let found = caller.registry().run(&key)?;
        let rx = found.send_input(p.value).await?;
        let wait = caller.limits().default_wait();
        let run = self
            .wait_and_render(&caller, &found, rx, wait, &ctx)
            .await?;
        Ok(Json(run))
    }

    /// Cancel a run: a queued one never runs, a running one is interrupted (a notebook batch
    /// skips its remaining cells).
    #[tool]
    async fn cancel_execution(
        &self,
        caller: Caller,
        Parameters(p): Parameters<RunIdParams>,
    ) -> Result<Json<RunOr<CellsRun>>, ToolError> {
        if let Some((b, batch)) = notebook_batch::find(&caller.scope, &p.run_id) {
            let cells = notebook_batch::cancel(&caller.scope, &b, &batch).await;
            return Ok(Json(RunOr::Other(cells)));
        }
        let key = caller.scope.run_key(p.run_id);
        let found = caller.registry().run(&key)?;
        found.cancel().await?;
        // Give an interrupt a moment to land before reporting.
        if let Ok(mut rx) = found.watch().await {
            wait_settled(&mut rx, Duration::from_secs(2)).await;
        }
        let mut r = found.record().await?;
        super::artifacts::keep_result(&caller, &found, &mut r).await;
        Ok(Json(RunOr::Run(Run::render(&r, caller.limits()).await)))
    }
}

/// A page of `part` of `run_id`: `limit` bytes (default: the server's stream cap, at most
/// [`MAX_PAGE_BYTES`]) from byte `offset`. Errors: `INVALID_ARGUMENT` for a limit of 0.
async fn page(
    caller: &Caller,
    run: &RunHandle,
    part: Part,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<RunPage, ToolError> {
    if limit == Some(0) {
        return Err(ToolError::invalid(format!(
            "limit must be at least 1 (bytes of a page; at most {MAX_PAGE_BYTES})."
        )));
    }
    let limit = limit
        .unwrap_or(caller.limits().stream_bytes)
        .clamp(1, MAX_PAGE_BYTES);
    let page = run.page(part, offset.unwrap_or(0), limit).await?;
    Ok(RunPage {
        run_id: run.id().clone(),
        stream: part,
        page,
    })
}
