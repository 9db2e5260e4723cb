//! Checkpoints of a Python session's namespace (the `checkpoints` tool set): save the
//! JSON-safe variables to a file, and load them back (after a restart, or into another
//! session). No pickle, no code replay, no user `__repr__` (see `ops/checkpoint.rs`); other
//! kernels answer `UNSUPPORTED` and are pointed at `rerun_history`.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::checkpoint::{Checkpoint, Restored};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckpointParams {
    pub session_id: String,
    /// Relative: the session's cwd.
    pub path: String,
}

impl Output for Checkpoint {
    /// What was saved where, then each variable left out and why.
    fn text(&self) -> String {
        let mut text = format!(
            "saved {} variable(s) to {} ({} bytes): {}",
            self.saved.len(),
            self.path.display(),
            self.bytes,
            self.saved.join(", ")
        );
        for s in &self.skipped {
            text.push_str(&format!("\nskipped {}: {}", s.name, s.reason));
        }
        text
    }
}

impl Output for Restored {
    fn text(&self) -> String {
        format!(
            "restored {} variable(s) from {}: {}",
            self.restored.len(),
            self.path.display(),
            self.restored.join(", ")
        )
    }
}

#[tool_router(router = checkpoints_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Save a Python session's data variables (scalars, str, bytes, and lists/tuples/sets/dicts of
    /// those) to a JSON file; other objects are listed in skipped. No pickle, no user code run.
    #[tool]
    async fn checkpoint_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<CheckpointParams>,
    ) -> Result<Json<Checkpoint>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let done = crate::ops::checkpoint::save(&handle, &PathBuf::from(&p.path)).await?;
        Ok(Json(done))
    }

    /// Load a checkpoint_session file into a Python session (e.g. after restart_session). A file
    /// that is not valid loads nothing.
    #[tool]
    async fn restore_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<CheckpointParams>,
    ) -> Result<Json<Restored>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let done = crate::ops::checkpoint::restore(&handle, &PathBuf::from(&p.path)).await?;
        Ok(Json(done))
    }
}
