//! History tools: read, delete, replay and export a session's executed blocks. A session that
//! no longer runs (destroyed, or from before a server restart) is read from its journal; a
//! connection's own `default` only from that connection's journal of it.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

use super::KernelMcp;
use crate::mcp::error::{ToolError, ToolResult};
use crate::mcp::params::seconds;
use crate::mcp::params::{
    DeleteHistoryParams, ExportHistoryParams, HistoryParams, MirrorNotebookParams,
    RerunHistoryParams,
};
use crate::mcp::render;
use crate::mcp::results::{Deleted, History, HistoryRow};
use crate::mcp::schema::output;
use crate::ops::export::ExportFormat;
use crate::ops::export::mirror::{Mirrored, Mirrors};
use crate::ops::history::{self as ops_history, Exported, HistorySelect, Replay};
use crate::session::history::{self, HistoryEntry};

#[tool_router(router = history_router, vis = "pub(crate)")]
impl KernelMcp {
    /// A session's history: each block with its status and an output summary. start/end: Python
    /// slice indices, or latest_n, or run_id.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<History>()
    )]
    async fn get_history(&self, Parameters(p): Parameters<HistoryParams>) -> ToolResult {
        let select = HistorySelect::from_params(p.start, p.end, p.run_id, p.latest_n)?;
        let key = self.scope.key(&p.session_id);
        let src = ops_history::select(self.registry(), &key, &select).await?;
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
        Ok(render::success(
            text,
            &History {
                session_id: p.session_id,
                entries,
                total: src.total,
            },
            vec![],
        ))
    }

    /// Delete history entries [start, end) (indices must name entries). The kernel's state is not changed.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = false),
        output_schema = output::<Deleted>()
    )]
    async fn delete_history(&self, Parameters(p): Parameters<DeleteHistoryParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let deleted = handle.delete_history(Some(p.start), p.end).await?;
        Ok(render::success(
            format!("deleted {deleted} history entries"),
            &Deleted { deleted },
            vec![],
        ))
    }

    /// Re-run history entries [start, end) in order (after restarting the kernel unless restart=false),
    /// stopping at the first error. Rebuilds state after a restart or crash.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = true),
        output_schema = output::<Replay>()
    )]
    async fn rerun_history(&self, Parameters(p): Parameters<RerunHistoryParams>) -> ToolResult {
        let timeout = seconds(p.timeout_s, "timeout_s")?.filter(|d| !d.is_zero());
        let key = self.scope.key(&p.session_id);
        let restart = p.restart.unwrap_or(true);
        let replay =
            ops_history::rerun(self.registry(), &key, p.start, p.end, restart, timeout).await?;
        Ok(render::success(
            render::replay_text(&replay),
            &replay,
            vec![],
        ))
    }

    /// Write a session's history to a file: "transcript" (code and outputs), "script" (runnable
    /// code) or "notebook" (.ipynb with outputs).
    #[tool(
        annotations(destructive_hint = false, open_world_hint = false),
        output_schema = output::<Exported>()
    )]
    async fn export_history(&self, Parameters(p): Parameters<ExportHistoryParams>) -> ToolResult {
        let format = match p.format.as_str() {
            "transcript" => ExportFormat::Transcript,
            "script" => ExportFormat::Script,
            "notebook" => ExportFormat::Notebook,
            other => {
                return Err(ToolError::invalid(format!(
                    "format must be \"transcript\", \"script\" or \"notebook\", not {other:?}."
                )));
            }
        };
        let path = PathBuf::from(&p.path);
        let key = self.scope.key(&p.session_id);
        let done =
            ops_history::export(self.registry(), &key, &path, format, p.start, p.end).await?;
        Ok(render::success(
            format!(
                "wrote {} entries ({} bytes) to {}",
                done.entries,
                done.bytes,
                done.path.display()
            ),
            &done,
            vec![],
        ))
    }

    /// Keep a live .ipynb of a session at path: rewritten (atomically, 0600) as each run
    /// finishes, with every output. One notebook per session; another call moves it.
    #[tool(
        annotations(destructive_hint = false, open_world_hint = false),
        output_schema = output::<Mirrored>()
    )]
    async fn mirror_notebook(&self, Parameters(p): Parameters<MirrorNotebookParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let mut done = Mirrors::global()
            .start(&handle, &PathBuf::from(&p.path))
            .await?;
        done.session_id = p.session_id;
        Ok(render::success(
            format!(
                "mirroring session '{}' to {} ({} cells, {} bytes); it is rewritten as each run finishes",
                done.session_id,
                done.path.display(),
                done.entries,
                done.bytes
            ),
            &done,
            vec![],
        ))
    }
}
