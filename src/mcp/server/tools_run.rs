//! Tools that run code and follow runs: execute, execute_file, get_execution (wait again, or
//! page one part), send_input and cancel_execution. Waiting is bounded by `wait_s`; while it
//! waits, a call with a progress token gets `notifications/progress` once a second, and the
//! client's cancellation of an `execute` cancels its run; the end of the client's connection
//! only ends the wait (docs/semantics.md). Runs are named through the caller's scope: a run of
//! a session it does not see is `EXECUTION_NOT_FOUND`.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use tokio::sync::watch;

use super::KernelMcp;
use crate::mcp::error::{ToolError, ToolResult};
use crate::mcp::params::*;
use crate::mcp::render;
use crate::mcp::results::{RunOrPage, RunPage};
use crate::mcp::schema::output;
use crate::registry::RunRef;
use crate::registry::scope::key::{RunKey, SessionKey};
use crate::session::{
    ErrorCode, ExecuteRequest, ExecutionResult, Part, RunStatus, SessionError, SessionHandle,
    Settled, wait_settled,
};

#[tool_router(router = run_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Run code in a session's kernel: stdout, stderr, result, displays (images as image blocks),
    /// errors. After wait_s: "running"; get_execution(run_id).
    #[tool(
        annotations(destructive_hint = true, open_world_hint = true),
        output_schema = output::<ExecutionResult>()
    )]
    async fn execute(
        &self,
        Parameters(p): Parameters<ExecuteParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        let limits = self.limits();
        if p.code.len() > limits.max_code_bytes {
            return Err(ToolError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "code is {} bytes; the limit is {} bytes. Put large code in a file and use execute_file.",
                    p.code.len(),
                    limits.max_code_bytes
                ),
            ));
        }
        let key = self.scope.key_or_default(p.session_id.as_deref());
        self.registry().get_or_default(&key).await?;
        let req = ExecuteRequest {
            store_history: p.store_history.unwrap_or(true),
            timeout: seconds(p.timeout_s, "timeout_s")?.filter(|d| !d.is_zero()),
            queue_timeout: seconds(p.queue_timeout_s, "queue_timeout_s")?.filter(|d| !d.is_zero()),
            stdin: p.stdin.unwrap_or_default(),
            expected_generation: p.expected_generation,
            subshell: p.subshell.unwrap_or(false),
            ..ExecuteRequest::new(p.code)
        };
        self.submit_and_wait(&key, req, p.wait_s, &ctx).await
    }

    /// Run a file in a session (relative paths: its cwd). Python runs it in the session's namespace
    /// with __file__, sys.argv and its filename in tracebacks; other kernels run its contents.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = true),
        output_schema = output::<ExecutionResult>()
    )]
    async fn execute_file(
        &self,
        Parameters(p): Parameters<ExecuteFileParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        if let Some(m) = p
            .mode
            .as_deref()
            .filter(|m| !matches!(*m, "persistent" | "fresh"))
        {
            return Err(ToolError::invalid(format!(
                "mode must be \"persistent\" (the session's kernel) or \"fresh\" (a new kernel just for this run), not {m:?}."
            )));
        }
        let key = self.scope.key_or_default(p.session_id.as_deref());
        let handle = self.registry().get_or_default(&key).await?;
        let argv = p.argv.unwrap_or_default();
        let max = self.limits().max_code_bytes;
        let code = crate::ops::file_code(&handle, &PathBuf::from(&p.path), &argv, max).await?;
        let remote = handle.info().await?.location != "local";
        let req = ExecuteRequest {
            timeout: seconds(p.timeout_s, "timeout_s")?.filter(|d| !d.is_zero()),
            notices: remote
                .then(|| crate::ops::REMOTE_FILE_NOTICE.to_string())
                .into_iter()
                .collect(),
            ..ExecuteRequest::new(code)
        };
        if p.mode.as_deref() == Some("fresh") {
            self.run_fresh(&key, req, p.wait_s, &ctx).await
        } else {
            self.submit_and_wait(&key, req, p.wait_s, &ctx).await
        }
    }

    /// A run's result (waiting up to wait_s), or a page of stream ("stdout", "stderr", "result",
    /// "traceback") at offset, limit bytes.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<RunOrPage>()
    )]
    async fn get_execution(
        &self,
        Parameters(p): Parameters<GetExecutionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        let key = self.scope.run_key(p.run_id);
        let handle = match self.registry().run(&key)? {
            RunRef::Finished(r) => {
                return super::tools_fresh::finished_fresh(&r, p.stream.is_some(), self.limits())
                    .await;
            }
            RunRef::Live(handle) => handle,
        };
        let run_id = key.run();
        if let Some(stream) = p.stream {
            let part = Part::parse(&stream).ok_or_else(|| {
                ToolError::invalid(format!(
                    "stream must be \"stdout\", \"stderr\", \"result\" or \"traceback\", not {stream:?}."
                ))
            })?;
            let offset = p.offset.unwrap_or(0);
            if p.limit == Some(0) {
                return Err(ToolError::invalid(format!(
                    "limit must be at least 1 (bytes of a page; at most {MAX_PAGE_BYTES})."
                )));
            }
            let limit = p
                .limit
                .unwrap_or(self.limits().stream_bytes)
                .clamp(1, MAX_PAGE_BYTES);
            let page = handle.page(run_id, part, offset, limit).await?;
            let text = page.text.clone();
            let v = RunPage {
                run_id: run_id.clone(),
                stream,
                page,
            };
            return Ok(render::success(text, &v, vec![]));
        }
        let wait = seconds(p.wait_s, "wait_s")?.unwrap_or(Duration::ZERO);
        let rx = handle.watch_run(run_id).await?;
        self.wait_and_render(&handle, &key, rx, wait, &ctx, false)
            .await
    }

    /// Answer an "awaiting_input" run's input() prompt; waits like execute.
    #[tool(
        annotations(destructive_hint = false, open_world_hint = false),
        output_schema = output::<ExecutionResult>()
    )]
    async fn send_input(
        &self,
        Parameters(p): Parameters<SendInputParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        let key = self.scope.run_key(p.run_id);
        let handle = match self.registry().run(&key)? {
            RunRef::Live(handle) => handle,
            RunRef::Finished(r) => {
                return Err(SessionError::NotAwaitingInput {
                    run: key.run().clone(),
                    status: r.status.as_str(),
                }
                .into());
            }
        };
        let rx = handle.send_input(key.run(), p.value).await?;
        let wait = Duration::from_secs_f64(self.limits().default_wait_s);
        self.wait_and_render(&handle, &key, rx, wait, &ctx, false)
            .await
    }

    /// Cancel a run: a queued run never executes; a running one is interrupted.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = false),
        output_schema = output::<ExecutionResult>()
    )]
    async fn cancel_execution(&self, Parameters(p): Parameters<RunIdParams>) -> ToolResult {
        let key = self.scope.run_key(p.run_id);
        let handle = match self.registry().run(&key)? {
            RunRef::Finished(r) => return Ok(render::execution(&r, self.limits()).await),
            RunRef::Live(handle) => handle,
        };
        handle.cancel(key.run()).await?;
        // Give an interrupt a moment to land before reporting.
        if let Ok(mut rx) = handle.watch_run(key.run()).await {
            wait_settled(&mut rx, Duration::from_secs(2)).await;
        }
        let r = self.run_record(&handle, &key).await?;
        Ok(render::execution(&r, self.limits()).await)
    }
}

/// Largest page `get_execution` returns at once (bytes).
const MAX_PAGE_BYTES: usize = 1024 * 1024;

impl KernelMcp {
    /// Queue `req` in `key`'s session and wait for it like `execute` does.
    async fn submit_and_wait(
        &self,
        key: &SessionKey,
        req: ExecuteRequest,
        wait_s: Option<f64>,
        ctx: &RequestContext<RoleServer>,
    ) -> ToolResult {
        let limits = self.limits();
        let wait =
            seconds(wait_s, "wait_s")?.unwrap_or(Duration::from_secs_f64(limits.default_wait_s));
        let t0 = std::time::Instant::now();
        let (handle, (run_id, rx), settled) = self.registry().submit_settled(key, req).await?;
        let submitted = t0.elapsed();
        let run = self.scope.run_key(run_id);
        let (r, _) = self
            .follow_run(&handle, &run, rx, Some(settled), wait, ctx, true)
            .await?;
        let settled = t0.elapsed();
        let out = render::execution(&r, limits).await;
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

    /// Wait for the run to settle (bounded by `wait`) and render it; see [`Self::follow_run`].
    async fn wait_and_render(
        &self,
        handle: &SessionHandle,
        run: &RunKey,
        rx: watch::Receiver<RunStatus>,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
        cancel_on_abort: bool,
    ) -> ToolResult {
        let (r, _) = self
            .follow_run(handle, run, rx, None, wait, ctx, cancel_on_abort)
            .await?;
        Ok(render::execution(&r, self.limits()).await)
    }

    /// Wait for the run to settle (bounded by `wait`), sending progress notifications when the
    /// request carries a token. When the request's token fires, the wait ends; only if the
    /// client cancelled the call (not when its connection ended, see [`crate::mcp::cancel`]) and
    /// `cancel_on_abort`, the run is cancelled too. Returns the run's record at the end of the
    /// wait — the one `settled` delivers when given (no further call to the session), else a
    /// fresh `get_run` — and whether the client cancelled.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn follow_run(
        &self,
        handle: &SessionHandle,
        run: &RunKey,
        mut rx: watch::Receiver<RunStatus>,
        mut settled: Option<Settled>,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
        cancel_on_abort: bool,
    ) -> Result<(ExecutionResult, bool), ToolError> {
        let run_id = run.run();
        enum Step {
            Settled,
            Elapsed,
            TokenFired,
        }
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
                    let asked = self.cancels.asked(&ctx.id).await;
                    if !asked {
                        tracing::info!(parent: handle.span(), run = %run_id, "the client's connection ended while a call waited; the run goes on");
                    } else if cancel_on_abort {
                        let _ = handle.cancel(run_id).await;
                    }
                    let r = self.run_record(handle, run).await?;
                    return Ok((r, asked));
                }
            }
            if let Some(t) = &token {
                ticks += 1;
                let message = handle
                    .run_tail(run_id)
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let _ = ctx
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(t.clone(), ticks as f64)
                            .with_message(message),
                    )
                    .await;
            }
        }
        Ok((self.run_record(handle, run).await?, false))
    }

    /// The run's record; for a fresh run whose helper kernel was just shut down, its kept
    /// final result.
    async fn run_record(
        &self,
        handle: &SessionHandle,
        run: &RunKey,
    ) -> Result<ExecutionResult, ToolError> {
        match handle.get_run(run.run()).await {
            Ok(r) => Ok(r),
            Err(e) => self.registry().finished_run(run).ok_or(e.into()),
        }
    }
}
