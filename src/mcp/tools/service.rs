//! Tools for sessions that outlive their clients (the `service` tool set): `renew_session`
//! (keep an idle session from expiring, or change its expiry) and `clear_queue` (drop every
//! run waiting in a session).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::args::{ExpiresAfterS, Seconds};
use super::out::{Json, Output};
use super::sessions::{SessionIdParams, line};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::session::cmd;
use crate::session::{RunId, SessionInfo};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RenewSessionParams {
    pub session_id: String,
    /// 0: never. Default: the current one.
    pub expires_after_s: Option<Seconds<ExpiresAfterS>>,
}

/// `renew_session`: the session's record, with its new `expires_at`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Renewed(SessionInfo);

impl Output for Renewed {
    fn text(&self) -> String {
        format!(
            "{}\nexpires at: {}",
            line(&self.0),
            self.0.expires_at.as_deref().unwrap_or("never")
        )
    }
}

/// `clear_queue`: the runs taken out of the queue.
#[derive(Debug, Serialize, JsonSchema)]
pub struct QueueCleared {
    pub session_id: String,
    pub cancelled: Vec<RunId>,
}

impl Output for QueueCleared {
    fn text(&self) -> String {
        format!("cancelled {} queued run(s)", self.cancelled.len())
    }
}

#[tool_router(router = service_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Reset a session's idle-expiry clock, optionally with a new expires_after_s.
    #[tool]
    async fn renew_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<RenewSessionParams>,
    ) -> Result<Json<Renewed>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let after = p.expires_after_s.map(|s| s.limit());
        Ok(Json(Renewed(
            handle
                .call(cmd::Renew {
                    expires_after: after,
                })
                .await?,
        )))
    }

    /// Cancel every run waiting in a session's queue (the running one goes on).
    #[tool]
    async fn clear_queue(
        &self,
        caller: Caller,
        Parameters(p): Parameters<SessionIdParams>,
    ) -> Result<Json<QueueCleared>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let cancelled = handle.call(cmd::ClearQueue).await?;
        Ok(Json(QueueCleared {
            session_id: p.session_id,
            cancelled,
        }))
    }
}
