//! How `open_notebook` finds the session a notebook runs in, and how it opens a notebook of
//! a Jupyter Server live (docs/notebooks.md): `open_notebook(path, gateway=NAME)` joins the
//! notebook's collaboration room on that server (`crate::notebook::collab`), so the person
//! who has it open in JupyterLab sees the agent's edits and outputs as they are made, and
//! the agent's reads see the person's edits. The session runs on that server's kernel of the
//! notebook when the person has one (adopted: their runs and the agent's share state), else
//! on a new kernel there of the notebook's kernelspec. Also the mapping of notebook and room
//! failures to the model's errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::out::Output;

use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::notebook::NotebookError;
use crate::notebook::bind::Notebooks;
use crate::notebook::collab::{CollabError, Collaborator, Room};
use crate::notebook::doc::{Doc, DocError};
use crate::ops::files::FileError;
use crate::registry::sources::remote;
use crate::registry::{KernelSource, SessionOptions};
use crate::session::ErrorCode;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OpenNotebookParams {
    /// The .ipynb (relative: the server's working directory).
    pub path: String,
    /// Run it in this session (made if missing); default: a new one named after the notebook.
    pub session_id: Option<String>,
    /// Kernelspec of a new session (default: the notebook's own).
    pub kernel: Option<String>,
    /// Create the notebook if it does not exist (default false).
    pub create: Option<bool>,
    /// A --gateway name (a Jupyter Server with jupyter-collaboration): work in its notebook
    /// at `path` (relative to its root) live, with whoever has it open in JupyterLab.
    pub gateway: Option<String>,
}

/// What `open_notebook` and `close_notebook` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Opened {
    pub path: PathBuf,
    pub session_id: String,
    /// Cells in the notebook.
    pub cells: usize,
    /// False when the notebook was open already (its binding is returned).
    pub opened: bool,
    pub created: bool,
}

impl Output for Opened {
    fn text(&self) -> String {
        let how = match (self.opened, self.created) {
            (_, true) => "created",
            (true, _) => "opened",
            _ => "already open",
        };
        format!(
            "{how} {} ({} cells) in session '{}'",
            self.path.display(),
            self.cells,
            self.session_id
        )
    }
}

/// The color the agent's cursor and name have in JupyterLab.
const AGENT_COLOR: &str = "#7b61ff";

/// Open `p.path` on the Jupyter Server `gateway` through its collaboration room, bound to a
/// session (see the module docs); a second open returns the binding.
///
/// Errors: `INVALID_ARGUMENT` (no such gateway, `create`), `IO_ERROR` (no such notebook on
/// the server), `GATEWAY_UNAVAILABLE` (unreachable, or no jupyter-collaboration there),
/// `UNAUTHORIZED`, and the session's errors.
pub(super) async fn open_in_room(
    caller: &Caller,
    p: &OpenNotebookParams,
    gateway: &str,
) -> Result<Opened, ToolError> {
    let server_path = p.path.trim_matches('/').to_string();
    if server_path.is_empty() || server_path.contains('\0') {
        return Err(ToolError::invalid(
            "path must name a .ipynb file on the server",
        ));
    }
    if p.create == Some(true) {
        return Err(ToolError::invalid(
            "create=true is for local files; make the notebook in JupyterLab, then open it with gateway",
        ));
    }
    let key = PathBuf::from(format!("{gateway}:{server_path}"));
    let owner = owner(caller);
    if let Some(b) = Notebooks::global().get(&owner, &key) {
        return Ok(Opened {
            path: key,
            session_id: b.session_id.clone(),
            cells: b.doc.cells().await,
            opened: false,
            created: false,
        });
    }
    let rest = remote::find(&caller.registry().sources().gateways, gateway)?;
    let who = Collaborator {
        name: format!(
            "{} (kernel-mcp)",
            p.session_id.as_deref().unwrap_or("agent")
        ),
        color: AGENT_COLOR.into(),
    };
    let room = Room::join(rest.gateway(), &server_path, &who)
        .await
        .map_err(collab_error)?;
    let nb = match room.snapshot().await {
        Ok(nb) => nb,
        Err(e) => {
            room.close().await;
            return Err(collab_error(e));
        }
    };
    let session = match room_session(caller, p, gateway, &server_path, &nb).await {
        Ok(id) => id,
        Err(e) => {
            room.close().await;
            return Err(e);
        }
    };
    let doc = Doc::Room {
        room: Arc::new(room),
        server: gateway.to_string(),
    };
    let (binding, opened) = Notebooks::global()
        .bind(&owner, &key, &session, doc.clone())
        .map_err(|e| ToolError::new(ErrorCode::LimitExceeded, e.to_string()))?;
    if !opened {
        doc.close().await;
    }
    Ok(Opened {
        path: key,
        session_id: binding.session_id.clone(),
        cells: nb.cells().len(),
        opened,
        created: false,
    })
}

/// The session a room's notebook runs in: `session_id` when it exists; else a new one on the
/// server's kernel of the notebook (adopted), or, when it has none, on a new kernel there of
/// `kernel` or the notebook's kernelspec.
async fn room_session(
    caller: &Caller,
    p: &OpenNotebookParams,
    gateway: &str,
    server_path: &str,
    nb: &crate::notebook::Notebook,
) -> Result<String, ToolError> {
    let gateway = gateway.to_string();
    if p.kernel.is_none() {
        let adopt = KernelSource::GatewayNotebook {
            gateway: gateway.clone(),
            notebook_path: server_path.to_string(),
        };
        match bound_session(caller, p, Path::new(server_path), adopt).await {
            Ok(id) => return Ok(id),
            Err(e) => tracing::info!(
                gateway,
                "no kernel of {server_path} to adopt ({}); starting one there",
                e.message
            ),
        }
    }
    let kernel = p
        .kernel
        .clone()
        .or_else(|| nb.kernelspec_name().map(String::from));
    let start = KernelSource::Gateway { gateway, kernel };
    bound_session(caller, p, Path::new(server_path), start).await
}

/// The session the notebook runs in: `session_id` (made when missing), else a new one named
/// after the notebook's file name; a new local session works in the notebook's directory.
pub(super) async fn bound_session(
    caller: &Caller,
    p: &OpenNotebookParams,
    path: &Path,
    source: KernelSource,
) -> Result<String, ToolError> {
    if let Some(id) = &p.session_id
        && caller.session(id).is_ok()
    {
        return Ok(id.clone());
    }
    let id = match &p.session_id {
        Some(id) => id.clone(),
        None => unused_name(caller, path),
    };
    let cwd = match source.gateway() {
        None => path.parent().map(Path::to_path_buf),
        Some(_) => None,
    };
    let opts = SessionOptions {
        cwd,
        ..Default::default()
    };
    caller
        .registry()
        .create(&caller.scope.key(&id), source, opts)
        .await?;
    Ok(id)
}

/// A session name from the notebook's file name that no session of the caller has.
fn unused_name(caller: &Caller, path: &Path) -> String {
    let stem: String = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(56)
        .collect();
    let stem = if stem.trim_matches('-').is_empty() {
        "notebook".to_string()
    } else {
        stem
    };
    (1..)
        .map(|n| {
            if n == 1 {
                stem.clone()
            } else {
                format!("{stem}-{n}")
            }
        })
        .find(|id| caller.session(id).is_err())
        .unwrap_or(stem)
}

/// A failure reading or changing a bound notebook, as the model sees it.
pub(super) fn doc_error(e: DocError) -> ToolError {
    match e {
        DocError::Notebook(e) => notebook_error(e),
        DocError::Collab(e) => collab_error(e),
        DocError::Edit(e) => ToolError::invalid(e.to_string()),
    }
}

/// A collaboration failure as the model sees it: a cell the person is editing is a
/// `NOTEBOOK_CONFLICT` naming the cell and who.
pub(super) fn collab_error(e: CollabError) -> ToolError {
    let code = match &e {
        CollabError::Unavailable { .. }
        | CollabError::NotCollaborative { .. }
        | CollabError::Timeout { .. }
        | CollabError::Lost { .. }
        | CollabError::Closed
        | CollabError::Protocol(_) => ErrorCode::GatewayUnavailable,
        CollabError::Unauthorized { .. } => ErrorCode::Unauthorized,
        CollabError::NotFound { .. } => ErrorCode::IoError,
        CollabError::UnknownCell { .. } | CollabError::Edit(_) => ErrorCode::InvalidArgument,
        CollabError::CellBeingEdited { .. } => ErrorCode::NotebookConflict,
        CollabError::Document(_) => ErrorCode::NotebookInvalid,
        CollabError::TooLarge { .. } => ErrorCode::LimitExceeded,
    };
    let mut err = ToolError::new(code, e.to_string());
    if let CollabError::CellBeingEdited { cell, by } = &e {
        err.details = json!({"cells": [cell], "editing": by});
    }
    err
}

/// The caller's principal, whose bindings it sees.
pub(super) fn owner(caller: &Caller) -> String {
    caller.scope.viewer().owner().to_string()
}

/// A notebook failure as the model sees it.
pub(super) fn notebook_error(e: NotebookError) -> ToolError {
    let code = match &e {
        NotebookError::Invalid { .. } => ErrorCode::NotebookInvalid,
        NotebookError::Conflict { .. } => ErrorCode::NotebookConflict,
        NotebookError::File(FileError::TooLarge { .. }) => ErrorCode::LimitExceeded,
        NotebookError::File(FileError::OutsideReach { .. }) => ErrorCode::InvalidArgument,
        NotebookError::File(_) => ErrorCode::IoError,
    };
    let mut err = ToolError::new(code, e.to_string());
    if let NotebookError::Conflict { cells, kept, .. } = &e {
        err.details = json!({"cells": cells, "kept": kept});
    }
    err
}
