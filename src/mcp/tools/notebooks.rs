//! Working inside notebooks (docs/tools.md, "Notebooks"): `open_notebook` binds an `.ipynb` to
//! a session, `read_cells` and `edit_cells` read and change its cells by id, `execute_cells`
//! runs them in the session and writes their outputs back, `close_notebook` ends the binding.
//! Every call names its notebook by path, so two agents never write into each other's "current"
//! notebook; the file logic (merging a person's save, atomic writes, conflicts) is
//! `crate::notebook`'s, the session's sandbox grants bound what is read and written (`Reach`),
//! and the bindings belong to the caller's principal. `open_notebook(gateway=…)` works in a
//! notebook of a Jupyter Server through its collaboration room instead (`notebook_open`), live
//! with a person in JupyterLab; the other tools are the same.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::args::{Seconds, WaitS, wait_or_default};
use super::notebook_batch;
use super::notebook_open::{
    OpenNotebookParams, Opened, bound_session, doc_error, notebook_error, open_in_room, owner,
};
use super::notebook_view::{CellView, cell_views};
use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::notebook::bind::{Binding, Notebooks};
use crate::notebook::doc::Doc;
use crate::notebook::run::{self, Batch};
use crate::notebook::{CellType, EditOp, Notebook, NotebookFile};
use crate::ops::files::Reach;
use crate::registry::KernelSource;
use crate::session::{ErrorCode, cmd};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadCellsParams {
    /// The open notebook.
    pub path: String,
    /// First cell (0-based; negative from the end).
    pub start: Option<i64>,
    /// End (exclusive).
    pub end: Option<i64>,
    /// These cells instead of a range.
    pub ids: Option<Vec<String>>,
    /// Include outputs (default true).
    pub outputs: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditCellsParams {
    /// The open notebook.
    pub path: String,
    /// Applied in order, all or nothing: {op: insert, source, cell_type?, index?|after?|before?},
    /// {op: replace, id, source?, cell_type?}, {op: delete, id}, {op: move, id, index?|after?|before?}.
    pub ops: Vec<EditOp>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteCellsParams {
    /// The open notebook.
    pub path: String,
    /// These cells, in notebook order (default: the range, else every code cell).
    pub ids: Option<Vec<String>>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Stop at the first cell that does not end ok (default true).
    pub stop_on_error: Option<bool>,
    /// Seconds to wait (default 50), then "running".
    pub wait_s: Option<Seconds<WaitS>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotebookPathParams {
    /// The open notebook.
    pub path: String,
}

/// What `read_cells` answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CellsRead {
    pub path: PathBuf,
    pub session_id: String,
    /// Cells in the notebook.
    pub total: usize,
    pub cells: Vec<CellView>,
    /// Where to start the next read when this one was cut at its size bound.
    pub next: Option<usize>,
    /// True when the file changed on disk since kernel-mcp last read or wrote it.
    pub changed_on_disk: bool,
}

impl Output for CellsRead {
    fn text(&self) -> String {
        let mut t = format!("{} ({} cells)\n", self.path.display(), self.total);
        for c in &self.cells {
            t.push_str(&c.text());
        }
        if let Some(n) = self.next {
            t.push_str(&format!("… more from start={n}\n"));
        }
        t
    }
}

/// What `edit_cells` answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Edited {
    pub path: PathBuf,
    pub inserted: Vec<String>,
    pub replaced: Vec<String>,
    pub deleted: Vec<String>,
    pub moved: Vec<String>,
    /// Cells now.
    pub total: usize,
    /// True when someone else's save was merged in.
    pub merged: bool,
}

impl Output for Edited {
    fn text(&self) -> String {
        format!(
            "edited {}: {} inserted {:?}, {} replaced, {} deleted, {} moved; {} cells{}",
            self.path.display(),
            self.inserted.len(),
            self.inserted,
            self.replaced.len(),
            self.deleted.len(),
            self.moved.len(),
            self.total,
            if self.merged {
                " (merged with a change made on disk)"
            } else {
                ""
            }
        )
    }
}

#[tool_router(router = notebooks_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Open an .ipynb to work in: binds it to a session (new, named after the notebook, on
    /// its kernelspec; or session_id). Every notebook tool names the notebook by path.
    #[tool]
    async fn open_notebook(
        &self,
        caller: Caller,
        Parameters(p): Parameters<OpenNotebookParams>,
    ) -> Result<Json<Opened>, ToolError> {
        if let Some(gateway) = p.gateway.clone() {
            return open_in_room(&caller, &p, &gateway).await.map(Json);
        }
        let path = absolute(&p.path)?;
        let owner = owner(&caller);
        if let Some(b) = Notebooks::global().get(&owner, &path) {
            let cells = b.doc.cells().await;
            return Ok(Json(Opened {
                path,
                session_id: b.session_id.clone(),
                cells,
                opened: false,
                created: false,
            }));
        }
        let existing = tokio::fs::symlink_metadata(&path).await.is_ok();
        if !existing && p.create != Some(true) {
            return Err(ToolError::new(
                ErrorCode::IoError,
                format!(
                    "{} does not exist; check the path, or pass create=true to make a new notebook there.",
                    path.display()
                ),
            ));
        }
        // The notebook's own kernelspec, read before any session is made.
        let peek = match existing {
            true => Some(
                NotebookFile::open(&path, Reach::Anywhere)
                    .await
                    .map_err(notebook_error)?,
            ),
            false => None,
        };
        let kernel = p.kernel.clone().or_else(|| {
            peek.as_ref()
                .and_then(|f| f.base().kernelspec_name().map(String::from))
        });
        let source = kernel.map_or(KernelSource::Default, KernelSource::Kernelspec);
        let session_id = bound_session(&caller, &p, &path, source).await?;
        let handle = caller.session(&session_id)?;
        let info = handle.call(cmd::Info).await?;
        let reach = Reach::of_session(&info);
        let file = match existing {
            true => NotebookFile::open(&path, reach)
                .await
                .map_err(notebook_error)?,
            false => {
                let spec = json!({"name": info.kernel, "display_name": info.display_name, "language": info.language});
                let mut nb = Notebook::empty(spec.clone());
                nb.set_kernel_metadata(spec, info.kernel_info["language_info"].clone());
                NotebookFile::create(&path, nb, reach)
                    .await
                    .map_err(notebook_error)?
            }
        };
        let cells = file.base().cells().len();
        let (binding, opened) = Notebooks::global()
            .bind(&owner, &path, &session_id, Doc::file(file))
            .map_err(|e| ToolError::new(ErrorCode::LimitExceeded, e.to_string()))?;
        Ok(Json(Opened {
            path,
            session_id: binding.session_id.clone(),
            cells,
            opened,
            created: !existing,
        }))
    }

    /// Read cells of an open notebook: id, type, source, execution count and outputs
    /// (bounded; images described). A range (start, end) or ids; paged by `next`.
    #[tool]
    async fn read_cells(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ReadCellsParams>,
    ) -> Result<Json<CellsRead>, ToolError> {
        let b = binding(&caller, &p.path)?;
        let running = b.batch().map(|rx| rx.borrow().clone());
        let read = b
            .doc
            .read(|nb, changed| {
                let indices = choose(nb, p.ids.as_deref(), p.start, p.end)?;
                let shown = p.outputs.unwrap_or(true);
                let (cells, next) = cell_views(nb, &indices, shown, running.as_ref());
                Ok::<_, ToolError>(CellsRead {
                    path: b.path.clone(),
                    session_id: b.session_id.clone(),
                    total: nb.cells().len(),
                    cells,
                    next,
                    changed_on_disk: changed,
                })
            })
            .await
            .map_err(doc_error)?;
        read.map(Json)
    }

    /// Change an open notebook's cells: insert, replace, delete, move (code, markdown, raw),
    /// all or nothing, merged with edits saved meanwhile; answers the new cells' ids.
    #[tool]
    async fn edit_cells(
        &self,
        caller: Caller,
        Parameters(p): Parameters<EditCellsParams>,
    ) -> Result<Json<Edited>, ToolError> {
        let b = binding(&caller, &p.path)?;
        let edit = b.doc.edit(&p.ops).await.map_err(doc_error)?;
        let outcome = edit.outcome;
        Ok(Json(Edited {
            path: b.path.clone(),
            inserted: outcome.inserted,
            replaced: outcome.replaced,
            deleted: outcome.deleted,
            moved: outcome.moved,
            total: edit.total,
            merged: edit.merged,
        }))
    }

    /// Run cells of an open notebook in its session, in order, writing outputs and execution
    /// counts into the file as each finishes. After wait_s: "running"; the answer's run_id
    /// is the batch's (get_execution follows it, cancel_execution stops it).
    #[tool]
    async fn execute_cells(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ExecuteCellsParams>,
    ) -> Result<Json<notebook_batch::CellsRun>, ToolError> {
        let b = binding(&caller, &p.path)?;
        if b.is_running() {
            return Err(ToolError::new(
                ErrorCode::SessionBusy,
                format!(
                    "Cells of {} are running already; wait for them (read_cells shows which run, get_execution follows one), or interrupt_session.",
                    b.path.display()
                ),
            ));
        }
        let cells = b
            .doc
            .read(|nb, _| {
                let indices = choose(nb, p.ids.as_deref(), p.start, p.end)?;
                Ok::<_, ToolError>(
                    indices
                        .into_iter()
                        .map(|i| &nb.cells()[i])
                        // As nbclient: a code cell with nothing in it is not run.
                        .filter(|c| c.cell_type() == CellType::Code)
                        .map(|c| (c.id().to_string(), c.source()))
                        .filter(|(_, source)| !source.trim().is_empty())
                        .collect(),
                )
            })
            .await
            .map_err(doc_error)??;
        let batch = Batch {
            cells,
            stop_on_error: p.stop_on_error.unwrap_or(true),
        };
        let key = caller.scope.key(&b.session_id);
        caller.registry().get(&key)?;
        let registry = caller.scope.registry_arc();
        let batch = run::start(registry, key, b.doc.clone(), batch);
        b.set_batch(batch.clone());
        let wait = wait_or_default(p.wait_s, caller.limits());
        Ok(Json(
            notebook_batch::answer(&caller.scope, &b, &batch, wait).await,
        ))
    }

    /// Close an open notebook (the binding ends; the session and the file stay).
    #[tool]
    async fn close_notebook(
        &self,
        caller: Caller,
        Parameters(p): Parameters<NotebookPathParams>,
    ) -> Result<Json<Opened>, ToolError> {
        let found = binding(&caller, &p.path)?;
        let b = Notebooks::global()
            .close(&owner(&caller), &found.path)
            .ok_or_else(|| not_open(&found.path))?;
        drop(found);
        let cells = b.doc.cells().await;
        let path = b.path.clone();
        let session_id = b.session_id.clone();
        if let Ok(b) = Arc::try_unwrap(b) {
            b.doc.close().await;
        }
        Ok(Json(Opened {
            path,
            session_id,
            cells,
            opened: false,
            created: false,
        }))
    }
}

/// `path` made absolute (relative: the server's working directory) and lexically clean.
fn absolute(path: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() || path.contains('\0') {
        return Err(ToolError::invalid("path must name a .ipynb file"));
    }
    let p = std::path::absolute(Path::new(path))
        .map_err(|e| ToolError::invalid(format!("cannot use the path {path:?}: {e}")))?;
    Ok(p.components().collect())
}

fn not_open(path: &Path) -> ToolError {
    ToolError::invalid(format!(
        "{} is not open: call open_notebook(path) first (every notebook tool names an open notebook).",
        path.display()
    ))
}

/// The caller's binding of `path`: a file's (absolute or relative to the server's working
/// directory), else a room's (`SERVER:PATH`, or the server path alone when one server has it
/// open). Errors: `INVALID_ARGUMENT` when it is not open.
fn binding(caller: &Caller, path: &str) -> Result<Arc<Binding>, ToolError> {
    let owner = owner(caller);
    let table = Notebooks::global();
    if let Some(b) = table.get(&owner, Path::new(path)) {
        return Ok(b);
    }
    let abs = absolute(path)?;
    table
        .get(&owner, &abs)
        .or_else(|| table.find_room(&owner, path))
        .ok_or_else(|| not_open(&abs))
}

/// The indices of the cells `ids` names (in notebook order), else of `[start, end)` (a
/// Python slice; neither: every cell).
/// Errors: `INVALID_ARGUMENT` for an id no cell has, or ids given with a range.
fn choose(
    nb: &Notebook,
    ids: Option<&[String]>,
    start: Option<i64>,
    end: Option<i64>,
) -> Result<Vec<usize>, ToolError> {
    if let Some(ids) = ids {
        if start.is_some() || end.is_some() {
            return Err(ToolError::invalid("give ids or start/end, not both"));
        }
        let mut out = Vec::new();
        for id in ids {
            let i = nb.position(id).ok_or_else(|| {
                ToolError::invalid(format!("no cell has id {id:?}; read_cells lists the ids"))
            })?;
            out.push(i);
        }
        out.sort_unstable();
        out.dedup();
        return Ok(out);
    }
    Ok(crate::session::history::slice_range(nb.cells().len(), start, end).collect())
}
