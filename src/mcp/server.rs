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
    CallToolRequestParams, CallToolResponse, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};

use super::error::ToolError;
use super::scope::RegistryView;
use crate::session::{ErrorCode, Registry};

/// The MCP server: a cheap clone over the process-wide [`Registry`], seen through the
/// connection's [`RegistryView`] (who owns `default`).
#[derive(Clone)]
pub struct KernelMcp {
    pub(crate) registry: RegistryView,
    tool_router: ToolRouter<KernelMcp>,
}

impl KernelMcp {
    /// The handler of a standalone server: its client owns every session, `default` included.
    pub fn new(registry: Arc<Registry>) -> KernelMcp {
        KernelMcp::with_view(RegistryView::unscoped(registry))
    }

    /// The handler of one connection to the shared service: it sees every named session and a
    /// `default` session of its own, which ends with [`KernelMcp::close`].
    pub fn for_connection(registry: Arc<Registry>) -> KernelMcp {
        KernelMcp::with_view(RegistryView::connection(registry))
    }

    /// The connection has ended: destroy its own `default` session (if it has one).
    pub async fn close(&self) {
        self.registry.close().await;
    }

    fn with_view(registry: RegistryView) -> KernelMcp {
        KernelMcp {
            registry,
            tool_router: Self::session_router()
                + Self::run_router()
                + Self::history_router()
                + Self::service_router()
                + Self::code_router()
                + Self::state_router()
                + Self::env_router(),
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
