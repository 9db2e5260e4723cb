//! `execute_file(mode="fresh")` at the MCP edge: start the helper kernel (a cancelled call
//! stops its start), follow the run exactly like `execute` (progress, `wait_s`,
//! cancellation), and wait for the helper to be shut down before answering a finished run,
//! so "no helper kernel remains" holds when the result arrives.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::out::Run;
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::registry::fresh::FreshRun;
use crate::registry::scope::key::SessionKey;
use crate::session::{ErrorCode, ExecuteRequest};

impl KernelMcp {
    /// Run `req` in a fresh kernel like the one of `key`'s session and wait for it like
    /// `execute` does. Only the client's cancellation stops it (or its start); the end of the
    /// client's connection only ends the wait, and the run goes on to its end.
    pub(super) async fn run_fresh(
        &self,
        caller: &Caller,
        key: &SessionKey,
        req: ExecuteRequest,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Run, ToolError> {
        let start = caller.registry().start_fresh(key, req);
        tokio::pin!(start);
        let started = tokio::select! {
            started = &mut start => started,
            _ = ctx.ct.cancelled() => {
                if self.client_cancelled(caller, ctx).await {
                    return Err(ToolError::new(
                        ErrorCode::InternalError,
                        "The call was cancelled while the fresh kernel started; it was shut down.",
                    ));
                }
                start.await
            }
        };
        let mut fresh = started?;
        let run = caller.registry().held_run(
            caller.scope.run_key(fresh.run_id.clone()),
            fresh.helper.clone(),
        );
        let followed = self
            .follow_run(caller, &run, fresh.rx.clone(), None, wait, ctx, true)
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
        Ok(Run::render(&r, caller.limits()).await)
    }
}
