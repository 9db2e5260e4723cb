//! `execute_file(mode="fresh")` at the MCP edge: start the helper kernel (a cancelled call
//! stops its start), follow the run exactly like `execute` (progress, `wait_s`,
//! cancellation), and wait for the helper to be shut down before answering a finished run,
//! so "no helper kernel remains" holds when the result arrives.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::error::{ToolError, ToolResult};
use super::render;
use super::server::{KernelMcp, seconds};
use crate::session::fresh::FreshRun;
use crate::session::{ErrorCode, ExecuteRequest, ExecutionResult, Registry, SessionHandle};

impl KernelMcp {
    /// Run `req` in a fresh kernel like `handle`'s and wait for it like `execute` does.
    pub(crate) async fn run_fresh(
        &self,
        handle: &SessionHandle,
        req: ExecuteRequest,
        wait_s: Option<f64>,
        ctx: &RequestContext<RoleServer>,
    ) -> ToolResult {
        let limits = &self.registry.limits;
        let wait =
            seconds(wait_s, "wait_s")?.unwrap_or(Duration::from_secs_f64(limits.default_wait_s));
        let mut fresh = tokio::select! {
            started = self.registry.start_fresh(handle, req) => started?,
            _ = ctx.ct.cancelled() => {
                return Err(ToolError::new(
                    ErrorCode::InternalError,
                    "The call was cancelled while the fresh kernel started; it was shut down.",
                ));
            }
        };
        let followed = self
            .follow_run(
                &fresh.helper,
                &fresh.run_id,
                fresh.rx.clone(),
                None,
                wait,
                ctx,
                true,
            )
            .await;
        if ctx.ct.is_cancelled() {
            fresh.abandon();
        }
        let mut r = match followed {
            Ok(r) => r,
            Err(e) => {
                fresh.abandon();
                return Err(e);
            }
        };
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
    registry: &Registry,
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
    Ok(render::execution(r, &registry.limits).await)
}
