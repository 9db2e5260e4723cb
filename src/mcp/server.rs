//! The MCP server handler: [`KernelMcp`], a cheap clone over the process-wide [`Registry`],
//! with the tool routers of `tools_*.rs` and the one `call_tool` override that every call
//! passes through: a panic guard keyed on the tool name, and the contract's error shape for
//! arguments that do not deserialize.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};

use super::error::ToolError;
use crate::registry::Registry;
use crate::registry::scope::RegistryView;
use crate::session::ErrorCode;

/// The MCP server: a cheap clone over the process-wide [`Registry`], seen through the
/// connection's [`RegistryView`] (who owns `default`).
#[derive(Clone)]
pub struct KernelMcp {
    pub(crate) registry: RegistryView,
    /// This connection's number (log subscriptions are per connection).
    connection: u64,
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
        KernelMcp::with_view(RegistryView::unscoped(registry), toolset)
    }

    /// The handler of one connection to the shared service: it sees every named session and a
    /// `default` session of its own, which ends with [`KernelMcp::close`].
    pub fn for_connection(registry: Arc<Registry>, toolset: Toolset) -> KernelMcp {
        KernelMcp::with_view(RegistryView::connection(registry), toolset)
    }

    /// The connection has ended: destroy its own `default` session (if it has one).
    pub async fn close(&self) {
        self.registry.close().await;
    }

    fn with_view(registry: RegistryView, toolset: Toolset) -> KernelMcp {
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
                    props.remove("notebook");
                    props.remove("notebook_path");
                }
                route.attr.input_schema = Arc::new(schema);
            }
        }
        for route in tool_router.map.values_mut() {
            let mut schema = route.attr.input_schema.as_ref().clone();
            super::schema::compact_input(&mut schema, toolset == Toolset::Full);
            route.attr.input_schema = Arc::new(schema);
        }
        static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        KernelMcp {
            registry,
            connection: CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            tool_router,
        }
    }
}

/// `v` seconds as a duration. Errors: `INVALID_ARGUMENT` outside `0..=1e7` or not finite.
pub(crate) fn seconds(v: Option<f64>, name: &str) -> Result<Option<Duration>, ToolError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.0..=1e7).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => Err(ToolError::invalid(format!(
            "{name} must be a number of seconds between 0 and 10000000, not {s}."
        ))),
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
            self.detailed_task(&request.task_id).await?,
        ))
    }

    /// `tasks/cancel`: cancels the task's run, as `cancel_execution` does.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.cancel_task_run(&request.task_id).await
    }

    /// `logging/setLevel`: from now on this connection gets the server's log messages at
    /// `level` or above (see [`super::logging`]).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::logging::subscribe(self.connection, context.peer.clone(), request.level);
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
        let contents = super::resources::read(&self.registry, &request.uri).await?;
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
