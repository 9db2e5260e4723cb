//! History tools: read, delete, replay and export a session's executed blocks. A session that
//! no longer runs (destroyed, or from before a server restart) is read from its journal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData as McpError, tool, tool_router};
use serde_json::json;

use super::params::{DeleteHistoryParams, ExportHistoryParams, HistoryParams, RerunHistoryParams};
use super::render;
use super::server::{KernelMcp, guarded, seconds};
use crate::session::export::{self, ExportContext, ExportFormat};
use crate::session::history::{self, HistoryEntry, Journal};
use crate::session::{ErrorCode, ExecuteRequest, SessionError, SessionHandle, wait_settled};

/// Where a session's history comes from.
struct Source {
    /// Entries with their indices.
    entries: Vec<(usize, HistoryEntry)>,
    total: usize,
    ctx: ExportContext,
    /// The session's cwd (live sessions) for resolving relative export paths.
    cwd: Option<PathBuf>,
}

impl KernelMcp {
    /// The live session's history, else the latest journal of that session id.
    async fn history_source(
        &self,
        session_id: &str,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<Source, SessionError> {
        if let Ok(handle) = self.registry.get(session_id) {
            let (entries, total) = handle.history(start, end).await?;
            let ctx = handle.export_context().await?;
            let cwd = handle.info().await.ok().map(|i| PathBuf::from(i.cwd));
            return Ok(Source {
                entries,
                total,
                ctx,
                cwd,
            });
        }
        let not_found = || {
            let known: Vec<String> = self.registry.session_ids();
            let mut e = SessionError::session_not_found(session_id, &known);
            e.message
                .push_str(" No history journal for it was found either.");
            e
        };
        let dir = Journal::dir().map_err(|_| not_found())?;
        let path = history::latest_journal(&dir, session_id).ok_or_else(not_found)?;
        let j = history::read_journal(&path).map_err(|e| {
            SessionError::new(
                ErrorCode::IoError,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        let range = history::slice_range(j.entries.len(), start, end);
        let entries = range.clone().map(|i| (i, j.entries[i].clone())).collect();
        Ok(Source {
            entries,
            total: j.entries.len(),
            ctx: ExportContext {
                session_id: session_id.to_string(),
                kernel: j.header.kernel,
                display_name: j.header.display_name,
                language: j.language_info["name"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or(j.header.language),
                language_info: j.language_info,
                exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            },
            cwd: None,
        })
    }
}

#[tool_router(router = history_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Read a session's history: each executed block with its status and an output summary.
    /// start/end are Python slice indices (0-based, end exclusive, negatives from the end).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_history(
        &self,
        Parameters(p): Parameters<HistoryParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("get_history", async {
            let src = tri!(self.history_source(&p.session_id, p.start, p.end).await);
            let entries: Vec<_> = src
                .entries
                .iter()
                .map(|(i, e)| {
                    json!({
                        "index": i, "run_id": e.run_id, "code": e.code, "status": e.status,
                        "execution_count": e.execution_count, "generation": e.generation,
                        "output": history::output_summary(e),
                    })
                })
                .collect();
            let refs: Vec<(usize, &HistoryEntry)> =
                src.entries.iter().map(|(i, e)| (*i, e)).collect();
            let text = if refs.is_empty() {
                format!("no history entries in that range ({} in total)", src.total)
            } else {
                history::render_text(&refs)
            };
            render::success(
                text,
                &json!({"session_id": p.session_id, "entries": entries, "total": src.total}),
                vec![],
            )
        })
        .await
    }

    /// Delete history entries [start, end) (Python slice indices). The kernel's state is not changed.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    async fn delete_history(
        &self,
        Parameters(p): Parameters<DeleteHistoryParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("delete_history", async {
            let handle = tri!(self.registry.get(&p.session_id));
            let deleted = tri!(handle.delete_history(Some(p.start), p.end).await);
            render::success(
                format!("deleted {deleted} history entries"),
                &json!({"deleted": deleted}),
                vec![],
            )
        })
        .await
    }

    /// Re-run history entries [start, end) in order (after restarting the kernel unless restart=false),
    /// stopping at the first error. Rebuilds state after a restart or crash.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = true
    ))]
    async fn rerun_history(
        &self,
        Parameters(p): Parameters<RerunHistoryParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("rerun_history", async {
            let timeout = tri_result!(seconds(p.timeout_s, "timeout_s")).filter(|d| !d.is_zero());
            let handle = tri!(self.registry.get(&p.session_id));
            let (entries, _) = tri!(handle.history(p.start, p.end).await);
            if p.restart.unwrap_or(true) {
                tri!(handle.restart(false).await);
            }
            self.rerun(&handle, entries, timeout).await
        })
        .await
    }

    /// Write a session's history to a file: "transcript" (code and outputs), "script" (runnable code;
    /// the kernel's file extension is added when the path has none) or "notebook" (nbformat 4 .ipynb with outputs).
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    async fn export_history(
        &self,
        Parameters(p): Parameters<ExportHistoryParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("export_history", async {
            let format = match p.format.as_str() {
                "transcript" => ExportFormat::Transcript,
                "script" => ExportFormat::Script,
                "notebook" => ExportFormat::Notebook,
                other => {
                    return render::invalid(format!(
                        "format must be \"transcript\", \"script\" or \"notebook\", not {other:?}."
                    ));
                }
            };
            let src = tri!(self.history_source(&p.session_id, p.start, p.end).await);
            let mut path = PathBuf::from(&p.path);
            if path.is_relative() {
                path = src
                    .cwd
                    .clone()
                    .unwrap_or_else(|| std::env::current_dir().unwrap_or_default())
                    .join(path);
            }
            if path.is_dir() {
                return render::error(
                    &SessionError::new(
                        ErrorCode::IoError,
                        format!(
                            "{} is a directory; give a file path (e.g. {}/history.ipynb).",
                            path.display(),
                            path.display()
                        ),
                    )
                    .with_details(json!({"path": path})),
                );
            }
            if path.extension().is_none() {
                let ext = match format {
                    ExportFormat::Script => export::script_extension(&src.ctx),
                    ExportFormat::Notebook => ".ipynb".into(),
                    ExportFormat::Transcript => ".txt".into(),
                };
                path.set_extension(ext.trim_start_matches('.'));
            }
            let entries: Vec<HistoryEntry> = src.entries.into_iter().map(|(_, e)| e).collect();
            let content = export::render(format, &src.ctx, &entries);
            tri!(write_file(&path, content.as_bytes()));
            render::success(
                format!(
                    "wrote {} entries ({} bytes) to {}",
                    entries.len(),
                    content.len(),
                    path.display()
                ),
                &json!({"path": path, "entries": entries.len(), "bytes": content.len()}),
                vec![],
            )
        })
        .await
    }
}

impl KernelMcp {
    /// Run `entries` one after another, stopping at the first one that does not end `ok`.
    async fn rerun(
        &self,
        handle: &SessionHandle,
        entries: Vec<(usize, HistoryEntry)>,
        timeout: Option<Duration>,
    ) -> CallToolResult {
        let wait = Duration::from_secs_f64(self.registry.limits.default_wait_s);
        let mut runs = Vec::new();
        let mut stopped_at = None;
        for (index, entry) in entries {
            let req = ExecuteRequest {
                run_id: String::new(),
                code: entry.code,
                store_history: true,
                timeout,
                stdin: Vec::new(),
                expected_generation: None,
            };
            let (run_id, mut rx) = tri!(self.registry.submit(handle, req).await);
            wait_settled(&mut rx, wait).await;
            let r = tri!(handle.get_run(&run_id).await);
            let Some(r) = r else { break };
            let ok = r.status == crate::session::RunStatus::Ok;
            runs.push(json!({
                "index": index, "run_id": r.run_id, "status": r.status, "execution_count": r.execution_count,
                "error": r.error.as_ref().map(|e| format!("{}: {}", e.ename, e.evalue)),
            }));
            if !ok {
                stopped_at = Some(index);
                break;
            }
        }
        let text = match stopped_at {
            Some(i) => format!(
                "re-ran {} blocks; stopped at index {i} ({}): see runs[-1] and get_execution for details",
                runs.len(),
                runs.last().and_then(|r| r["status"].as_str()).unwrap_or("")
            ),
            None => format!("re-ran {} blocks, all ok", runs.len()),
        };
        render::success(
            text,
            &json!({"runs": runs, "stopped_at": stopped_at}),
            vec![],
        )
    }
}

/// Write `bytes` to `path`, creating parent directories. Errors: `IO_ERROR` naming the path.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let io = |e: std::io::Error| {
        SessionError::new(
            ErrorCode::IoError,
            format!("cannot write {}: {e}", path.display()),
        )
        .with_details(json!({"path": path}))
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, bytes).map_err(io)
}
