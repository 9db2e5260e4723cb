//! The MCP tools (DESIGN §4): thin wrappers that validate parameters, call the registry or a
//! session handle, and render the records. Every tool body runs under a panic guard so a bug
//! answers with `INTERNAL_ERROR` instead of leaving the call unanswered.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use rmcp::handler::server::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, Implementation, ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::json;

use super::params::*;
use super::render;
use crate::session::{
    CreateRequest, ErrorCode, ExecuteRequest, Registry, RunStatus, SessionError, wait_settled,
};

/// The MCP server: a cheap clone over the process-wide [`Registry`].
#[derive(Clone)]
pub struct KernelMcp {
    pub(crate) registry: Arc<Registry>,
    tool_router: ToolRouter<KernelMcp>,
}

impl KernelMcp {
    pub fn new(registry: Arc<Registry>) -> KernelMcp {
        KernelMcp {
            registry,
            tool_router: Self::tool_router() + Self::history_router() + Self::code_router(),
        }
    }
}

/// Run a tool body; a panic becomes an `INTERNAL_ERROR` tool result.
pub(crate) async fn guarded(
    tool: &'static str,
    body: impl Future<Output = CallToolResult>,
) -> Result<CallToolResult, McpError> {
    match AssertUnwindSafe(body).catch_unwind().await {
        Ok(r) => Ok(r),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            tracing::error!(tool, "tool panicked: {what}");
            Ok(render::error(&SessionError::new(
                ErrorCode::InternalError,
                format!(
                    "Internal error in {tool}: {what}. The server is still running; please report this."
                ),
            )))
        }
    }
}

pub(crate) fn seconds(v: Option<f64>, name: &str) -> Result<Option<Duration>, CallToolResult> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.0..=1e7).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => Err(render::invalid(format!(
            "{name} must be a number of seconds between 0 and 10000000, not {s}."
        ))),
    }
}

#[tool_router]
impl KernelMcp {
    /// List the installed Jupyter kernelspecs (name, language, display name, interrupt mode, where found) and the default kernel.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_kernels(&self) -> Result<CallToolResult, McpError> {
        guarded("list_kernels", async {
            let kernels: Vec<_> = self
                .registry
                .search
                .list()
                .into_iter()
                .map(|k| {
                    json!({
                        "name": k.name, "display_name": k.display_name, "language": k.language,
                        "interrupt_mode": k.interrupt_mode, "resource_dir": k.resource_dir,
                    })
                })
                .collect();
            let default = self.registry.default_kernel();
            let text = kernels
                .iter()
                .map(|k| {
                    format!(
                        "{} — {} ({})",
                        k["name"].as_str().unwrap_or(""),
                        k["display_name"].as_str().unwrap_or(""),
                        k["language"].as_str().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            render::success(
                format!(
                    "{text}\ndefault kernel: {}",
                    default.as_deref().unwrap_or("none")
                ),
                &json!({"kernels": kernels, "default_kernel": default}),
                vec![],
            )
        })
        .await
    }

    /// Start a new named session on a Jupyter kernel. Variables, imports and data persist across execute calls in it.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = true
    ))]
    async fn create_session(
        &self,
        Parameters(p): Parameters<CreateSessionParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("create_session", async {
            let startup = tri_result!(seconds(p.startup_timeout_s, "startup_timeout_s"));
            let req = CreateRequest {
                session_id: p.session_id,
                kernel: p.kernel,
                python: p.python,
                cwd: p.cwd.map(PathBuf::from),
                env: p.env.unwrap_or_default(),
                startup_timeout: startup,
            };
            let info = tri!(self.registry.create(req).await);
            render::success(render::session_text(&info), &info, vec![])
        })
        .await
    }

    /// List all sessions with their status, kernel, generation and queue.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_sessions(&self) -> Result<CallToolResult, McpError> {
        guarded("list_sessions", async {
            let sessions = self.registry.list().await;
            let text = if sessions.is_empty() {
                "no sessions".to_string()
            } else {
                sessions
                    .iter()
                    .map(render::session_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            render::success(text, &json!({"sessions": sessions}), vec![])
        })
        .await
    }

    /// Show one session: status, kernel, generation, pid, history count, queue, current run.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_session(
        &self,
        Parameters(p): Parameters<GetSessionParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("get_session", async {
            let handle = tri!(self.registry.get(&p.session_id));
            let info = tri!(handle.info().await);
            let mut v = serde_json::to_value(&info).unwrap_or_default();
            let mut text = render::session_text(&info);
            if p.include_variables.unwrap_or(false) {
                if !info.language.eq_ignore_ascii_case("python") {
                    v["variables_note"] = json!("Variables are listed for Python kernels only.");
                } else {
                    match crate::session::python::eval_json(
                        &handle,
                        crate::session::python::VARIABLES,
                    )
                    .await
                    {
                        Ok(vars) => {
                            for var in vars.as_array().into_iter().flatten() {
                                text.push_str(&format!(
                                    "\n  {}: {} {}",
                                    var["name"].as_str().unwrap_or(""),
                                    var["type"].as_str().unwrap_or(""),
                                    var["summary"].as_str().unwrap_or("")
                                ));
                            }
                            v["variables"] = vars;
                        }
                        Err(e) => v["variables_note"] = json!(e.message),
                    }
                }
            }
            render::success(text, &v, vec![])
        })
        .await
    }

    /// Interrupt the code running in a session (like Ctrl-C). Variables are kept.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn interrupt_session(
        &self,
        Parameters(p): Parameters<SessionIdParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("interrupt_session", async {
            let handle = tri!(self.registry.get(&p.session_id));
            let (info, run) = tri!(handle.interrupt().await);
            let mut v = serde_json::to_value(&info).unwrap_or_default();
            v["interrupted_run_id"] = json!(run);
            let text = match &run {
                Some(r) => format!("interrupted run {r}\n{}", render::session_text(&info)),
                None => format!("nothing was running\n{}", render::session_text(&info)),
            };
            render::success(text, &v, vec![])
        })
        .await
    }

    /// Restart a session's kernel: all variables are lost, the generation goes up by one.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    async fn restart_session(
        &self,
        Parameters(p): Parameters<RestartSessionParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("restart_session", async {
            let handle = tri!(self.registry.get(&p.session_id));
            let info = tri!(handle.restart(p.clear_history.unwrap_or(false)).await);
            render::success(render::session_text(&info), &info, vec![])
        })
        .await
    }

    /// Shut a session's kernel down (and every process it started) and forget the session.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn destroy_session(
        &self,
        Parameters(p): Parameters<SessionIdParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("destroy_session", async {
            let rung = tri!(self.registry.destroy(&p.session_id).await);
            render::success(
                format!(
                    "session '{}' destroyed (shutdown: {})",
                    p.session_id,
                    serde_json::to_value(rung)
                        .unwrap_or_default()
                        .as_str()
                        .unwrap_or("")
                ),
                &json!({"session_id": p.session_id, "shutdown": rung}),
                vec![],
            )
        })
        .await
    }

    /// Run code in a session's kernel and return stdout, stderr, the result, displays (images as image blocks) and errors.
    /// Waits up to wait_s (default 50 s); if still running, returns status "running" and a run_id for get_execution.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn execute(
        &self,
        Parameters(p): Parameters<ExecuteParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        guarded("execute", self.execute_inner(p, ctx)).await
    }

    /// Get a run's result (waiting up to wait_s for it to finish), or page one stream with stream/offset/limit (bytes).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_execution(
        &self,
        Parameters(p): Parameters<GetExecutionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        guarded("get_execution", self.get_execution_inner(p, ctx)).await
    }

    /// Answer the input() prompt of a run whose status is "awaiting_input"; then waits like execute.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    async fn send_input(
        &self,
        Parameters(p): Parameters<SendInputParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        guarded("send_input", async {
            let handle = tri!(self.registry.session_of_run(&p.run_id));
            let rx = tri!(handle.send_input(&p.run_id, p.value).await);
            let wait = Duration::from_secs_f64(self.registry.limits.default_wait_s);
            self.wait_and_render(&handle, &p.run_id, rx, wait, &ctx, false)
                .await
        })
        .await
    }

    /// Cancel a run: a queued run never executes; a running one is interrupted.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    async fn cancel_execution(
        &self,
        Parameters(p): Parameters<RunIdParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("cancel_execution", async {
            let handle = tri!(self.registry.session_of_run(&p.run_id));
            tri!(handle.cancel(&p.run_id).await);
            // Give an interrupt a moment to land before reporting.
            if let Ok(mut rx) = handle.watch_run(&p.run_id).await {
                wait_settled(&mut rx, Duration::from_secs(2)).await;
            }
            let r = tri!(handle.get_run(&p.run_id).await);
            match r {
                Some(r) => render::execution(&r, self.registry.limits.max_image_bytes),
                None => render::error(&SessionError::new(
                    ErrorCode::ExecutionNotFound,
                    format!("Run '{}' not found.", p.run_id),
                )),
            }
        })
        .await
    }

    /// Server version, protocol versions, limits, kernelspec directories and session count.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn server_info(&self) -> Result<CallToolResult, McpError> {
        guarded("server_info", async {
            let sessions = self.registry.list().await.len();
            let v = json!({
                "name": "kernel-mcp",
                "version": env!("CARGO_PKG_VERSION"),
                "jupyter_protocol_version": crate::wire::PROTOCOL_VERSION,
                "mcp_protocol_versions": rmcp::model::ProtocolVersion::KNOWN_VERSIONS.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                "limits": &*self.registry.limits,
                "kernelspec_dirs": self.registry.search.dirs(),
                "python_environment": self.registry.env_prefix,
                "session_count": sessions,
            });
            render::success(
                format!("kernel-mcp {} — {} session(s)", env!("CARGO_PKG_VERSION"), sessions),
                &v,
                vec![],
            )
        })
        .await
    }
}

impl KernelMcp {
    pub(crate) async fn execute_inner(
        &self,
        p: ExecuteParams,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let limits = &self.registry.limits;
        if p.code.len() > limits.max_code_bytes {
            return render::error(&SessionError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "code is {} bytes; the limit is {} bytes. Put large code in a file and use execute_file.",
                    p.code.len(),
                    limits.max_code_bytes
                ),
            ));
        }
        let timeout = tri_result!(seconds(p.timeout_s, "timeout_s")).filter(|d| !d.is_zero());
        let wait = tri_result!(seconds(p.wait_s, "wait_s"))
            .unwrap_or(Duration::from_secs_f64(limits.default_wait_s));
        let handle = tri!(self.registry.get_or_default(p.session_id.as_deref()).await);
        let req = ExecuteRequest {
            run_id: String::new(),
            code: p.code,
            store_history: p.store_history.unwrap_or(true),
            timeout,
            stdin: p.stdin.unwrap_or_default(),
            expected_generation: p.expected_generation,
        };
        let (run_id, rx) = tri!(self.registry.submit(&handle, req).await);
        self.wait_and_render(&handle, &run_id, rx, wait, &ctx, true)
            .await
    }

    async fn get_execution_inner(
        &self,
        p: GetExecutionParams,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let handle = tri!(self.registry.session_of_run(&p.run_id));
        if let Some(stream) = p.stream {
            if stream != "stdout" && stream != "stderr" {
                return render::invalid(format!(
                    "stream must be \"stdout\" or \"stderr\", not {stream:?}."
                ));
            }
            let offset = p.offset.unwrap_or(0);
            let limit = p.limit.unwrap_or(self.registry.limits.stream_bytes).max(1);
            let Some(page) = tri!(handle.stream_page(&p.run_id, &stream, offset, limit).await)
            else {
                return render::error(&SessionError::new(
                    ErrorCode::ExecutionNotFound,
                    format!("Run '{}' was forgotten.", p.run_id),
                ));
            };
            let mut v = serde_json::to_value(&page).unwrap_or_default();
            v["run_id"] = json!(p.run_id);
            v["stream"] = json!(stream);
            return render::success(page.text.clone(), &v, vec![]);
        }
        let wait = tri_result!(seconds(p.wait_s, "wait_s")).unwrap_or(Duration::ZERO);
        let status_rx = tri!(handle.watch_run(&p.run_id).await);
        self.wait_and_render(&handle, &p.run_id, status_rx, wait, &ctx, false)
            .await
    }

    /// Wait for the run to settle (bounded by `wait`), sending progress notifications when the
    /// request carries a token; on MCP cancellation of an `execute`, cancel the run.
    pub(crate) async fn wait_and_render(
        &self,
        handle: &crate::session::SessionHandle,
        run_id: &str,
        mut rx: tokio::sync::watch::Receiver<RunStatus>,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
        cancel_on_abort: bool,
    ) -> CallToolResult {
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
            tokio::select! {
                settled = wait_settled(&mut rx, step) => {
                    if settled || tokio::time::Instant::now() >= deadline {
                        break;
                    }
                }
                _ = ctx.ct.cancelled() => {
                    if cancel_on_abort {
                        let _ = handle.cancel(run_id).await;
                    }
                    break;
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
        match handle.get_run(run_id).await {
            Ok(Some(r)) => render::execution(&r, self.registry.limits.max_image_bytes),
            Ok(None) => render::error(&SessionError::new(
                ErrorCode::ExecutionNotFound,
                format!("Run '{run_id}' was forgotten."),
            )),
            Err(e) => render::error(&e),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KernelMcp {
    /// The router's dispatch, plus one fix-up: arguments that do not deserialize are rejected
    /// by rmcp before any tool runs, as a bare `isError` text; give them the contract's
    /// `{error_code: INVALID_ARGUMENT, message, details}` like every other tool error.
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        let tool = request.name.to_string();
        let tcc = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let mut response = self.tool_router.call(tcc).await?;
        if let rmcp::model::CallToolResponse::Complete(r) = &mut response
            && r.is_error == Some(true)
            && r.structured_content.is_none()
        {
            let message: String = r
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("\n");
            let message =
                format!("Invalid arguments for {tool}: {message}. See the tool's input schema.");
            *r = render::error(&SessionError::new(ErrorCode::InvalidArgument, message));
        }
        Ok(response)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kernel-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Named, persistent sessions on real Jupyter kernels (Python, R, Octave, bash… whatever kernelspecs are installed). \
                 Call execute with code (no session_id = the 'default' Python session); state persists between calls. \
                 create_session(kernel=...) for other languages or isolated sessions; list_kernels shows what is installed. \
                 Long runs return status 'running' with a run_id: call get_execution(run_id, wait_s). \
                 interrupt_session stops a run and keeps variables; restart_session clears them.",
            )
    }
}
