//! Tools that write a session's history to a file the model names: `export_history` (once,
//! as a transcript, a script or a notebook) and `mirror_notebook` (a live `.ipynb`,
//! rewritten as each run finishes).

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::export::ExportFormat;
use crate::ops::export::mirror::{Mirrored, Mirrors};
use crate::ops::history::{self as ops_history, Exported};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExportHistoryParams {
    /// A past session is read from its journal.
    pub session_id: String,
    /// Relative: the session's cwd.
    pub path: String,
    pub format: ExportFormat,
    pub start: Option<i64>,
    pub end: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MirrorNotebookParams {
    pub session_id: String,
    /// Relative: the session's cwd.
    pub path: String,
}

impl Output for Exported {
    fn text(&self) -> String {
        format!(
            "wrote {} entries ({} bytes) to {}",
            self.entries,
            self.bytes,
            self.path.display()
        )
    }
}

impl Output for Mirrored {
    fn text(&self) -> String {
        format!(
            "mirroring session '{}' to {} ({} cells, {} bytes); it is rewritten as each run finishes",
            self.session_id,
            self.path.display(),
            self.entries,
            self.bytes
        )
    }
}

#[tool_router(router = export_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Write a session's history to a file: a transcript (code and outputs), a script (runnable
    /// code) or a notebook (.ipynb with outputs).
    #[tool]
    async fn export_history(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ExportHistoryParams>,
    ) -> Result<Json<Exported>, ToolError> {
        let path = PathBuf::from(&p.path);
        let key = caller.scope.key(&p.session_id);
        let done =
            ops_history::export(caller.registry(), &key, &path, p.format, p.start, p.end).await?;
        Ok(Json(done))
    }

    /// Keep a live .ipynb of a session at path: rewritten (atomically, 0600) as each run
    /// finishes, with every output. One notebook per session; another call moves it.
    #[tool]
    async fn mirror_notebook(
        &self,
        caller: Caller,
        Parameters(p): Parameters<MirrorNotebookParams>,
    ) -> Result<Json<Mirrored>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let mut done = Mirrors::global()
            .start(&handle, &PathBuf::from(&p.path))
            .await?;
        done.session_id = p.session_id;
        Ok(Json(done))
    }
}
