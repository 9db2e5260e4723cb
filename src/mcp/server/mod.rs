//! The MCP server handler: [`KernelMcp`], a cheap clone over the process-wide [`Registry`]
//! seen through the caller's [`Scope`], with the tool routers of its `tools_*.rs` and the one
//! `call_tool` override that every call passes through: a panic guard keyed on the tool
//! name, and the contract's error shape for arguments that do not deserialize. It also
//! records the client's cancellations (`on_cancelled`, see [`super::cancel`]) and, over
//! HTTP, which `Mcp-Session-Id` it serves (see [`super::http_sessions`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    Extensions, GetTaskParams, GetTaskResult, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};

use super::cancel::Cancels;
use super::error::ToolError;
use super::http_sessions::HttpSessions;
use crate::config::Limits;
use crate::registry::Registry;
use crate::registry::scope::Scope;
use crate::session::{ErrorCode, SessionError, SessionHandle};

mod tools_code;
mod tools_env;
mod tools_fresh;
mod tools_history;
mod tools_run;
mod tools_service;
mod tools_session;
mod tools_state;

/// The MCP server: a cheap clone over the process-wide [`Registry`], seen through the
/// connection's [`Scope`] (who owns `default`, who may see which run).
#[derive(Clone)]
pub struct KernelMcp {
    pub(crate) scope: Scope,
    /// This handler's number (log subscriptions are per handler).
    handler: u64,
    /// The requests this connection's client cancelled.
    pub(crate) cancels: Arc<Cancels>,
    /// The HTTP endpoint's session table, when served over streamable HTTP.
    http: Option<Arc<HttpSessions>>,
    tool_router: ToolRouter<KernelMcp>,
}

/// Which tools a server offers (`--tools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Toolset {
    /// Every tool.
    #[default]
    Full,
    /// [`MINIMAL_TOOLS`] only, for agents with small contexts.
    Minimal,
}

/// The tools of `--tools minimal`: enough to start a session, run code and follow the run.
pub const MINIMAL_TOOLS: [&str; 7] = [
    "create_session",
    "execute",
    "get_execution",
    "send_input",
    "interrupt_session",
    "restart_session",
    "list_sessions",
];

impl std::str::FromStr for Toolset {
    type Err = String;
    fn from_str(s: &str) -> Result<Toolset, String> {
        match s {
            "full" | "all" => Ok(Toolset::Full),
            "minimal" => Ok(Toolset::Minimal),
            other => Err(format!("unknown toolset '{other}'; use full or minimal")),
        }
    }
}

impl KernelMcp {
    /// The handler of a standalone server with every tool: its client owns every session,
    /// `default` included.
    pub fn new(registry: Arc<Registry>) -> KernelMcp {
        KernelMcp::with_toolset(registry, Toolset::Full)
    }

    /// A standalone handler offering `toolset`; a tool left out is unknown to `tools/call` too.
    pub fn with_toolset(registry: Arc<Registry>, toolset: Toolset) -> KernelMcp {
        KernelMcp::with_scope(Scope::standalone(registry), toolset)
    }

    /// The handler of one connection to the shared service: it sees every named session and a
    /// `default` session of its own, which ends with [`KernelMcp::close`].
    pub fn for_connection(registry: Arc<Registry>, toolset: Toolset) -> KernelMcp {
        KernelMcp::with_scope(Scope::connection(registry), toolset)
    }

    /// This handler serves one session of an HTTP endpoint whose lifetimes `sessions` keeps.
    pub fn over_http(mut self, sessions: Arc<HttpSessions>) -> KernelMcp {
        self.http = Some(sessions);
        self
    }

    /// The connection has ended: destroy its own `default` session (if it has one).
    pub async fn close(&self) {
        self.scope.close().await;
    }

    /// The registry (limits, kernel sources); sessions are reached with the scope's keys.
    pub(crate) fn registry(&self) -> &Registry {
        self.scope.registry()
    }

    /// The server's limits.
    pub(crate) fn limits(&self) -> &Limits {
        self.registry().limits()
    }

    /// The session `id` names for this caller (`default`: its own).
    /// Errors: `SESSION_NOT_FOUND`, `SESSION_EXPIRED`.
    pub(crate) fn session(&self, id: &str) -> Result<SessionHandle, SessionError> {
        self.registry().get(&self.scope.key(id))
    }

    /// Over HTTP: the `Mcp-Session-Id` of a request to this connection.
    fn http_session<'a>(&self, extensions: &'a Extensions) -> Option<&'a str> {
        extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| super::http_sessions::session_id(&p.headers))
    }

    /// Over HTTP: tell the session table which `Mcp-Session-Id` this connection is.
    fn bind_http_session(&self, extensions: &Extensions) {
        if let (Some(http), Some(id)) = (&self.http, self.http_session(extensions)) {
            http.bind(id, self.scope.downgrade());
        }
    }

    fn with_scope(scope: Scope, toolset: Toolset) -> KernelMcp {
        let mut tool_router = Self::session_router()
            + Self::run_router()
            + Self::history_router()
            + Self::service_router()
            + Self::code_router()
            + Self::state_router()
            + Self::env_router();
        if toolset == Toolset::Minimal {
            let left_out: Vec<String> = tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .filter(|n| !MINIMAL_TOOLS.contains(&n.as_str()))
                .collect();
            for name in left_out {
                tool_router.remove_route(&name);
            }
            // The terse set's sessions take the server's sandbox (`--sandbox`).
            if let Some(route) = tool_router.map.get_mut("create_session") {
                let mut schema = route.attr.input_schema.as_ref().clone();
                if let Some(serde_json::Value::Object(props)) = schema.get_mut("properties") {
                    props.remove("sandbox");
                    props.remove("sandbox_network");
                }
                route.attr.input_schema = Arc::new(schema);
            }
        }
        for route in tool_router.map.values_mut() {
            let mut schema = route.attr.input_schema.as_ref().clone();
            super::schema::compact_input(&mut schema, toolset == Toolset::Full);
            route.attr.input_schema = Arc::new(schema);
        }
        static HANDLERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        KernelMcp {
            scope,
            handler: HANDLERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cancels: Default::default(),
            http: None,
            tool_router,
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KernelMcp {
    /// The router's dispatch under a panic guard (a bug answers `INTERNAL_ERROR` instead of
    /// leaving the call unanswered), plus one fix-up: arguments that do not deserialize are
    /// rejected by rmcp before any tool runs, as a bare `isError` text; give them the
    /// contract's `{error_code: INVALID_ARGUMENT, message, details}` like every other error.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tool = request.name.to_string();
        // Over HTTP, the session is not idle while the client waits for this answer.
        let _busy = self.http.as_ref().and_then(|http| {
            self.http_session(&context.extensions)
                .map(|id| http.call(id, self.scope.downgrade()))
        });
        let wants_task = super::tasks::may_become_task(&tool)
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        let tcc = ToolCallContext::new(self, request, context);
        let mut response = match AssertUnwindSafe(self.tool_router.call(tcc))
            .catch_unwind()
            .await
        {
            Ok(r) => r?,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                tracing::error!(tool, "tool panicked: {what}");
                let e = ToolError::new(
                    ErrorCode::InternalError,
                    format!(
                        "Internal error in {tool}: {what}. The server is still running; please report this."
                    ),
                );
                return Ok(e.to_result().into());
            }
        };
        if let CallToolResponse::Complete(r) = &mut response
            && r.is_error == Some(true)
            && r.structured_content.is_none()
        {
            let message: String = r
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("\n");
            *r = ToolError::invalid(format!(
                "Invalid arguments for {tool}: {message}. See the tool's input schema."
            ))
            .to_result();
        }
        if wants_task {
            response = super::tasks::into_task(response);
        }
        Ok(response)
    }

    /// `tasks/get`: a task is a run (see [`super::tasks`]).
    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(
            super::tasks::detailed(&self.scope, &request.task_id).await?,
        ))
    }

    /// `tasks/cancel`: cancels the task's run, as `cancel_execution` does.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::tasks::cancel(&self.scope, &request.task_id).await
    }

    /// `notifications/cancelled`: the client, not the end of its connection, cancelled a
    /// request (see [`super::cancel`]).
    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = notification.request_id {
            self.cancels.record(id);
        }
    }

    /// `notifications/initialized`: over HTTP, the first request that names this
    /// connection's `Mcp-Session-Id`.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.bind_http_session(&context.extensions);
    }

    /// `logging/setLevel`: from now on this connection gets the server's log messages at
    /// `level` or above (see [`super::logging`]).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::logging::subscribe(
            self.handler,
            self.scope.connection_id().map(|c| c.get()),
            context.peer.clone(),
            request.level,
        );
        Ok(())
    }

    /// Run resources are listed through templates only (there is one set per run).
    async fn list_resource_templates(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(
            super::resources::templates(),
        ))
    }

    /// A run's stdout, stderr or output (see [`super::resources`]).
    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let contents = super::resources::read(&self.scope, &request.uri).await?;
        Ok(rmcp::model::ReadResourceResult::new(contents).into())
    }

    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_resources()
                .enable_tasks()
                .build(),
        )
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
