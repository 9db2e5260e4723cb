//! Tools for sessions that outlive their clients: renew_session (keep an idle session from
//! expiring) and clear_queue (drop every run waiting in a session). Parameters live here too.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::KernelMcp;
use crate::mcp::error::ToolResult;
use crate::mcp::params::seconds;
use crate::mcp::render;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RenewSessionParams {
    /// The session's id.
    pub session_id: String,
    /// New idle expiry in seconds (0 = never). Omitted: keep the current one.
    #[serde(default)]
    pub expires_after_s: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClearQueueParams {
    /// The session's id.
    pub session_id: String,
}

#[tool_router(router = service_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Reset a session's idle-expiry clock (optionally with a new expires_after_s; 0 = never). Returns SessionInfo with the new expires_at.
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::session::SessionInfo>()
    )]
    async fn renew_session(&self, Parameters(p): Parameters<RenewSessionParams>) -> ToolResult {
        let after = seconds(p.expires_after_s, "expires_after_s")?;
        let handle = self.session(&p.session_id)?;
        let info = handle
            .renew(after.map(|d| (!d.is_zero()).then_some(d)))
            .await?;
        let text = format!(
            "{}\nexpires at: {}",
            render::session_text(&info),
            info.expires_at.as_deref().unwrap_or("never")
        );
        Ok(render::success(text, &info, vec![]))
    }

    /// Cancel every run waiting in a session's queue (the running one goes on). Returns the cancelled run ids.
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::QueueCleared>()
    )]
    async fn clear_queue(&self, Parameters(p): Parameters<ClearQueueParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let cancelled = handle.clear_queue().await?;
        Ok(render::success(
            format!("cancelled {} queued run(s)", cancelled.len()),
            &json!({"session_id": p.session_id, "cancelled": cancelled}),
            vec![],
        ))
    }
}
