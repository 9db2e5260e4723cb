//! Checkpoints of a Python session's namespace: save the JSON-safe variables to a file, and
//! load them back (after a restart, or into another session). No pickle, no code replay, no
//! user `__repr__`; other kernels answer `UNSUPPORTED` and are pointed at `rerun_history`.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

use super::KernelMcp;
use crate::mcp::error::ToolResult;
use crate::mcp::params::CheckpointParams;
use crate::mcp::render;

#[tool_router(router = state_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Save a Python session's data variables (scalars, str, bytes, and lists/tuples/sets/dicts of
    /// those) to a JSON file; other objects are listed in skipped. No pickle, no user code run.
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::Checkpointed>()
    )]
    async fn checkpoint_session(&self, Parameters(p): Parameters<CheckpointParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let done = crate::ops::checkpoint::save(&handle, &PathBuf::from(&p.path)).await?;
        let mut text = format!(
            "saved {} variable(s) to {} ({} bytes): {}",
            done.saved.len(),
            done.path.display(),
            done.bytes,
            done.saved.join(", ")
        );
        for s in &done.skipped {
            text.push_str(&format!("\nskipped {}: {}", s.name, s.reason));
        }
        Ok(render::success(text, &done, vec![]))
    }

    /// Load a checkpoint_session file into a Python session (e.g. after restart_session). A file
    /// that is not valid loads nothing.
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::RestoredVars>()
    )]
    async fn restore_session(&self, Parameters(p): Parameters<CheckpointParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let done = crate::ops::checkpoint::restore(&handle, &PathBuf::from(&p.path)).await?;
        Ok(render::success(
            format!(
                "restored {} variable(s) from {}: {}",
                done.restored.len(),
                done.path.display(),
                done.restored.join(", ")
            ),
            &done,
            vec![],
        ))
    }
}
