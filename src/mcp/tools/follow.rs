//! Following a run for the tools that wait for one (execute, execute_file, get_execution,
//! send_input): wait up to `wait_s` for it to settle, send `notifications/progress` once a
//! second to a call that carries a progress token, and tell a client's cancellation of the
//! call (which may cancel the run) from the end of its connection (which only ends the wait;
//! see `mcp/cancel.rs` and docs/semantics.md).

use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use tokio::sync::watch;

use super::args::{Seconds, WaitS, wait_or_default};
use super::execute::Mode;
use super::out::Run;
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::registry::RunHandle;
use crate::registry::scope::key::SessionKey;
use crate::session::{ExecuteRequest, ExecutionResult, RunStatus, Settled, wait_settled};

/// How a wait for a run ends, step by step.
enum Step {
    Settled,
    Elapsed,
    TokenFired,
}

impl KernelMcp {
    /// Queue `req` in `key`'s session (or, for [`Mode::Fresh`], run it in a fresh kernel like
    /// the session's: [`Self::run_fresh`]) and wait for it (`wait`, else the server's default
    /// wait), as `execute` does.
    pub(super) async fn submit_and_wait(
        &self,
        caller: &Caller,
        key: &SessionKey,
        req: ExecuteRequest,
        wait: Option<Seconds<WaitS>>,
        mode: Mode,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Run, ToolError> {
        let limits = caller.limits();
        let wait = wait_or_default(wait, limits);
        if mode == Mode::Fresh {
            return self.run_fresh(caller, key, req, wait, ctx).await;
        }
        let t0 = Instant::now();
        let (handle, (run_id, rx), settled) = caller.registry().submit_settled(key, req).await?;
        let submitted = t0.elapsed();
        crate::telemetry::spans::note_session(key.name(), Some(run_id.as_str()));
        let run = caller
            .registry()
            .held_run(caller.scope.run_key(run_id), handle);
        let (mut r, _) = self
            .follow_run(caller, &run, rx, Some(settled), wait, ctx, true)
            .await?;
        super::artifacts::keep_result(caller, &run, &mut r).await;
        let settled = t0.elapsed();
        let out = Run::render(&r, limits).await;
        tracing::trace!(
            target: "kernel_mcp::timing",
            run = %r.run_id,
            submitted_us = submitted.as_micros() as u64,
            settled_us = settled.as_micros() as u64,
            rendered_us = t0.elapsed().as_micros() as u64,
            "execute call"
        );
        Ok(out)
    }

    /// True when the client cancelled the request whose token fired: on a connection, only
    /// an explicit `notifications/cancelled` is one (its end is not, see
    /// [`crate::mcp::cancel`]); a request without a connection (2026-07-28 over HTTP) has no
    /// other way to cancel than closing its response stream, and the spec makes that its
    /// cancellation.
    pub(super) async fn client_cancelled(
        &self,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> bool {
        caller.scope.is_stateless() || self.cancels.asked(&ctx.id).await
    }

    /// Wait for the run to settle (bounded by `wait`) and render it; see [`Self::follow_run`].
    pub(super) async fn wait_and_render(
        &self,
        caller: &Caller,
        run: &RunHandle,
        rx: watch::Receiver<RunStatus>,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Run, ToolError> {
        let (mut r, _) = self
            .follow_run(caller, run, rx, None, wait, ctx, false)
            .await?;
        super::artifacts::keep_result(caller, run, &mut r).await;
        Ok(Run::render(&r, caller.limits()).await)
    }

    /// Wait for the run to settle (bounded by `wait`), sending progress notifications when the
    /// request carries a token. When the request's token fires, the wait ends; only if the
    /// client cancelled the call (not when its connection ended, see [`crate::mcp::cancel`]) and
    /// `cancel_on_abort`, the run is cancelled too. Returns the run's record at the end of the
    /// wait — the one `settled` delivers when given (no further call to the session), else a
    /// fresh read of its record — and whether the client cancelled.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn follow_run(
        &self,
        caller: &Caller,
        run: &RunHandle,
        mut rx: watch::Receiver<RunStatus>,
        mut settled: Option<Settled>,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
        cancel_on_abort: bool,
    ) -> Result<(ExecutionResult, bool), ToolError> {
        let run_id = run.id();
        let deadline = tokio::time::Instant::now() + wait;
        let token = ctx.meta.get_progress_token();
        let mut ticks = 0u32;
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let step = if token.is_some() {
                remaining.min(Duration::from_secs(1))
            } else {
                remaining
            };
            let outcome = match settled.as_mut() {
                Some(record) => tokio::select! {
                    r = tokio::time::timeout(step, record) => match r {
                        Ok(Ok(record)) => return Ok((record, false)),
                        // The actor let go of it (the run is gone): watch the status instead.
                        Ok(Err(_)) => {
                            settled = None;
                            continue;
                        }
                        Err(_) => Step::Elapsed,
                    },
                    _ = ctx.ct.cancelled() => Step::TokenFired,
                },
                None => tokio::select! {
                    s = wait_settled(&mut rx, step) => if s { Step::Settled } else { Step::Elapsed },
                    _ = ctx.ct.cancelled() => Step::TokenFired,
                },
            };
            match outcome {
                Step::Settled => break,
                Step::Elapsed if tokio::time::Instant::now() >= deadline => break,
                Step::Elapsed => {}
                Step::TokenFired => {
                    let asked = self.client_cancelled(caller, ctx).await;
                    if !asked {
                        tracing::info!(parent: run.span(), run = %run_id, "the client's connection ended while a call waited; the run goes on");
                    } else if cancel_on_abort {
                        let _ = run.cancel().await;
                    }
                    let r = run.record().await?;
                    return Ok((r, asked));
                }
            }
            if let Some(t) = &token {
                ticks += 1;
                let message = run.tail().await.unwrap_or_default();
                let _ = ctx
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(t.clone(), ticks as f64)
                            .with_message(message),
                    )
                    .await;
            }
        }
        Ok((run.record().await?, false))
    }
}
