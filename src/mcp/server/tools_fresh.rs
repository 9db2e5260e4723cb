//! `execute_file(mode="fresh")` at the MCP edge: start the helper kernel (a cancelled call
//! stops its start), follow the run exactly like `execute` (progress, `wait_s`,
//! cancellation), and wait for the helper to be shut down before answering a finished run,
//! so "no helper kernel remains" holds when the result arrives.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::KernelMcp;
use crate::config::Limits;
use crate::mcp::error::{ToolError, ToolResult};
use crate::mcp::params::seconds;
use crate::mcp::render;
use crate::registry::fresh::FreshRun;
use crate::registry::scope::key::SessionKey;
use crate::session::{ErrorCode, ExecuteRequest, ExecutionResult};

impl KernelMcp {
    /// Run `req` in a fresh kernel like the one of `key`'s session and wait for it like
    /// `execute` does. Only the client's cancellation stops it (or its start); the end of the
    /// client's connection only ends the wait, and the run goes on to its end.
    pub(crate) async fn run_fresh(
        &self,
        key: &SessionKey,
        req: ExecuteRequest,
        wait_s: Option<f64>,
        ctx: &RequestContext<RoleServer>,
    ) -> ToolResult {
        let limits = self.limits();
        let wait =
            seconds(wait_s, "wait_s")?.unwrap_or(Duration::from_secs_f64(limits.default_wait_s));
        let start = self.registry().start_fresh(key, req);
        tokio::pin!(start);
        let started = tokio::select! {
            started = &mut start => started,
            _ = ctx.ct.cancelled() => {
                if self.cancels.asked(&ctx.id).await {
                    return Err(ToolError::new(
                        ErrorCode::InternalError,
                        "The call was cancelled while the fresh kernel started; it was shut down.",
                    ));
                }
                start.await
            }
        };
        let mut fresh = started?;
        let run = self.scope.run_key(fresh.run_id.clone());
        let followed = self
            .follow_run(&fresh.helper, &run, fresh.rx.clone(), None, wait, ctx, true)
            .await;
        let (mut r, cancelled) = match followed {
            Ok(f) => f,
            Err(e) => {
                fresh.abandon();
                return Err(e);
            }
        };
        if cancelled {
            fresh.abandon();
        }
        let finished = r.status.is_final();
        if finished {
            fresh.reaped().await;
        }
        r.notices.push(FreshRun::notice(fresh.pid, finished));
        Ok(render::execution(&r, limits).await)
    }
}

/// `get_execution` of a fresh run whose kernel is gone: its kept final result. Paging is not
/// possible any more (the full output went with the helper).
pub(crate) async fn finished_fresh(
    r: &ExecutionResult,
    paging: bool,
    limits: &Limits,
) -> ToolResult {
    if paging {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "Run {} ran in a fresh kernel that has been shut down; only its final result (head and tail of each stream) is kept. Call get_execution without stream, or write large output to a file from the script.",
                r.run_id
            ),
        ));
    }
    Ok(render::execution(r, limits).await)
}
