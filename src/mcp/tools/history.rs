//! History tools: read (`get_history`), delete (`delete_history`) and replay
//! (`rerun_history`) a session's executed blocks. A session that no longer runs (destroyed,
//! or from before a server restart) is read from its journal; a connection's own `default`
//! only from that connection's journal of it.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::args::{Seconds, TimeoutS};
use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::history::{self as ops_history, HistorySelect, Replay};
use crate::session::RunStatus;
use crate::session::cmd;
use crate::session::history::{self, HistoryEntry};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HistoryParams {
    /// A past session is read from its journal.
    pub session_id: String,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub run_id: Option<String>,
    pub latest_n: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteHistoryParams {
    pub session_id: String,
    /// 0-based, negative from the end.
    pub start: i64,
    /// Default: start + 1.
    pub end: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RerunHistoryParams {
    pub session_id: String,
    /// Must name an entry (default 0).
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub restart: Option<bool>,
    /// Per block; 0: none.
    pub timeout_s: Option<Seconds<TimeoutS>>,
}

/// One entry of `get_history`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryRow {
    pub index: usize,
    pub run_id: String,
    pub code: String,
    pub status: RunStatus,
    pub execution_count: Option<i64>,
    pub generation: u64,
    /// A short summary of what the run printed and returned.
    pub output: String,
    /// Another client of the kernel ran it (a person in Jupyter), not a tool call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub other_client: bool,
}

/// `get_history`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    pub session_id: String,
    pub entries: Vec<HistoryRow>,
    pub total: usize,
    /// The text rendering, made where the history entries are at hand (code and output
    /// summary per entry, then the notes on where the history came from).
    #[serde(skip)]
    text: String,
}

impl Output for History {
    fn text(&self) -> String {
        self.text.clone()
    }
}

/// `delete_history`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub deleted: usize,
}

impl Output for Deleted {
    fn text(&self) -> String {
        format!("deleted {} history entries", self.deleted)
    }
}

impl Output for Replay {
    /// How many blocks ran, and where and why the replay stopped.
    fn text(&self) -> String {
        match (self.stopped_at, self.runs.last()) {
            (Some(i), Some(last)) => format!(
                "re-ran {} blocks; stopped at index {i} ({}): see runs[-1] and get_execution for details",
                self.runs.len(),
                last.status.as_str()
            ),
            _ => format!("re-ran {} blocks, all ok", self.runs.len()),
        }
    }
}

#[tool_router(router = history_router, vis = "pub(crate)")]
impl KernelMcp {
    /// A session's history: each block with its status and an output summary. One of
    /// start/end (a Python slice), latest_n (the last N) or run_id.
    #[tool]
    async fn get_history(
        &self,
        caller: Caller,
        Parameters(p): Parameters<HistoryParams>,
    ) -> Result<Json<History>, ToolError> {
        let select = HistorySelect::from_params(p.start, p.end, p.run_id, p.latest_n)?;
        let key = caller.scope.key(&p.session_id);
        let src = ops_history::select(caller.registry(), &key, &select).await?;
        let entries: Vec<_> = src
            .entries
            .iter()
            .map(|(i, e)| HistoryRow {
                index: *i,
                run_id: e.run_id.clone(),
                code: e.code.clone(),
                status: e.status,
                execution_count: e.execution_count,
                generation: e.generation,
                output: history::output_summary(e),
                other_client: e.other_client,
            })
            .collect();
        let refs: Vec<(usize, &HistoryEntry)> = src.entries.iter().map(|(i, e)| (*i, e)).collect();
        let mut text = if refs.is_empty() {
            format!("no history entries in that range ({} in total)", src.total)
        } else {
            history::render_text(&refs)
        };
        for n in &src.notices {
            text.push_str("\nnote: ");
            text.push_str(n);
        }
        Ok(Json(History {
            session_id: p.session_id,
            entries,
            total: src.total,
            text,
        }))
    }

    /// Delete history entries [start, end) (indices must name entries); kernel state is unchanged.
    #[tool]
    async fn delete_history(
        &self,
        caller: Caller,
        Parameters(p): Parameters<DeleteHistoryParams>,
    ) -> Result<Json<Deleted>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let deleted = handle
            .call(cmd::DeleteHistory {
                start: Some(p.start),
                end: p.end,
            })
            .await?;
        Ok(Json(Deleted { deleted }))
    }

    /// Re-run history entries [start, end) in order (after restarting the kernel unless restart=false),
    /// stopping at the first error. Rebuilds state after a restart or crash.
    #[tool]
    async fn rerun_history(
        &self,
        caller: Caller,
        Parameters(p): Parameters<RerunHistoryParams>,
    ) -> Result<Json<Replay>, ToolError> {
        let timeout = p.timeout_s.and_then(|t| t.limit());
        let key = caller.scope.key(&p.session_id);
        let restart = p.restart.unwrap_or(true);
        let replay =
            ops_history::rerun(caller.registry(), &key, p.start, p.end, restart, timeout).await?;
        Ok(Json(replay))
    }
}
