//! The MCP server handler: [`KernelMcp`], a cheap clone over the process-wide [`Registry`]
//! for one connection, with the router of every tool (see [`super::tools`]) and the one
//! `call_tool` override that every call passes through: the toolset's gate (see
//! [`super::toolset`]), the request's [`Caller`] (see [`KernelMcp::caller`]), a panic guard
//! keyed on the tool name, and the contract's error shape for arguments that do not
//! deserialize. It also records the client's cancellations
//! (`on_cancelled`, see [`super::cancel`]) and, over HTTP, which `Mcp-Session-Id` it serves
//! (see [`super::http_sessions`]).
//!
//! The router always holds every tool; the [`Toolset`] decides what `tools/list` shows and
//! what `tools/call` accepts. It is the server's (`--tools`), unless the client asks for
//! another in its capabilities (`experimental["kernel-mcp"].tools`, what the CLI does to
//! reach the service's every tool, see [`super::toolset::client_config`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    Extensions, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};

use super::caller::Caller;
use super::cancel::Cancels;
use super::error::ToolError;
use super::http_sessions::HttpSessions;
use super::toolset::Toolset;
use crate::registry::Registry;
use crate::registry::scope::Scope;
use crate::session::ErrorCode;

/// The MCP server: a cheap clone over the process-wide [`Registry`] for one connection.
#[derive(Clone)]
pub struct KernelMcp {
    /// The connection's view of the registry: what ends with it (its own `default` session,
    /// see [`KernelMcp::close`]), and, for now, who each of its requests comes from (see
    /// [`KernelMcp::caller`]). Tools never read it: they get their request's [`Caller`].
    connection: Scope,
    /// This handler's number (log subscriptions are per handler).
    handler: u64,
    /// The requests this connection's client cancelled.
    pub(crate) cancels: Arc<Cancels>,
    /// The HTTP endpoint's session table, when served over streamable HTTP.
    http: Option<Arc<HttpSessions>>,
    /// Every tool, for dispatch (the toolset gates it).
    tool_router: ToolRouter<KernelMcp>,
    /// The server's toolset (`--tools`).
    toolset: Toolset,
    /// `tools/list` of `toolset`, made once.
    listed: Arc<Vec<Tool>>,
}

impl KernelMcp {
    /// The handler of a standalone server with every tool: its client owns every session,
    /// `default` included.
    pub fn new(registry: Arc<Registry>) -> KernelMcp {
        KernelMcp::with_toolset(registry, Toolset::all())
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

    /// The connection this handler serves (`None` for a standalone server's only client).
    pub fn connection_id(&self) -> Option<crate::registry::scope::key::ConnectionId> {
        self.connection.connection_id()
    }

    /// The connection has ended: destroy its own `default` session (if it has one).
    pub async fn close(&self) {
        self.connection.close().await;
    }

    /// Who makes the request of `context`: the one place that decides it. The principal and
    /// its access are what the request's face decided ([`crate::auth::authenticated`]; a
    /// request no face stamped, an in-process handler's, is the owner's). A request over
    /// HTTP without an `Mcp-Session-Id` (a 2026-07-28 stateless request) has no connection
    /// of its own: its `default` is its principal's (docs/auth.md).
    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        let who = crate::auth::authenticated(&context.extensions)
            .cloned()
            .unwrap_or_else(crate::principal::Authenticated::owner);
        let stateless = self.is_stateless(&context.extensions);
        Caller::new(self.connection.for_request(who, stateless))
    }

    /// True for an HTTP request that names no `Mcp-Session-Id`.
    fn is_stateless(&self, extensions: &Extensions) -> bool {
        extensions.get::<axum::http::request::Parts>().is_some()
            && self.http_session(extensions).is_none()
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
            http.bind(id, self.connection.downgrade());
        }
    }

    fn with_scope(connection: Scope, toolset: Toolset) -> KernelMcp {
        let tool_router = super::tools::every_tool();
        let listed = Arc::new(listed_tools(&tool_router, toolset));
        static HANDLERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        KernelMcp {
            connection,
            handler: HANDLERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cancels: Default::default(),
            http: None,
            tool_router,
            toolset,
            listed,
        }
    }

    /// The toolset of one request: the one the client asked for, else the server's.
    fn toolset_of(&self, context: &RequestContext<RoleServer>) -> Toolset {
        context
            .client_capabilities()
            .and_then(|c| super::toolset::requested(c.experimental.as_ref()?))
            .unwrap_or(self.toolset)
    }

    /// `INVALID_ARGUMENT` when `request` passes a parameter its tool does not have (see
    /// `arg_names.rs`), or one that `toolset` leaves out (see [`Toolset::missing_param`]).
    fn check_set_params(
        toolset: Toolset,
        request: &CallToolRequestParams,
    ) -> Result<(), ToolError> {
        let Some(args) = &request.arguments else {
            return Ok(());
        };
        static PARAMS: std::sync::LazyLock<super::arg_names::ToolParams> =
            std::sync::LazyLock::new(|| {
                super::arg_names::ToolParams::new(&super::tools::every_tool().list_all())
            });
        if let Some(message) = PARAMS.unknown(&request.name, args.keys()) {
            return Err(ToolError::invalid(message));
        }
        for param in args.keys() {
            if let Some(set) = toolset.missing_param(&request.name, param) {
                return Err(ToolError::invalid(format!(
                    "{}'s `{param}` is not offered by this server (--tools {toolset}): it belongs to the `{}` tool set. \
                     Leave it out, or have the server started with --tools {toolset},{}.",
                    request.name,
                    set.name(),
                    set.name()
                )));
            }
        }
        Ok(())
    }

    /// The router's dispatch under a panic guard (a bug answers `INTERNAL_ERROR` instead of
    /// leaving the call unanswered), plus one fix-up: arguments that do not deserialize are
    /// rejected by rmcp before any tool runs, as a bare `isError` text; give them the
    /// contract's `{error_code: INVALID_ARGUMENT, message, details}` like every other error.
    async fn dispatch(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tool = request.name.to_string();

        let toolset = self.toolset_of(&context);
        if tool == super::ui::VIEW_RUN
            && super::ui::declared(context.client_capabilities().as_ref())
        {
            let caller = self.caller(&context);
            return Ok(super::ui::view_run(&caller, request.arguments).await);
        }
        if !toolset.offers(&tool) {
            // What rmcp's router answers for a tool it does not have.
            return Err(McpError::invalid_params("tool not found", None));
        }
        if let Err(e) = Self::check_set_params(toolset, &request) {
            return Ok(e.to_result().into());
        }
        // Over HTTP, the session is not idle while the client waits for this answer.
        let _busy = self.http.as_ref().and_then(|http| {
            self.http_session(&context.extensions)
                .map(|id| http.call(id, self.connection.downgrade()))
        });
        let caller = self.caller(&context);
        // A 2026-07-28 request names its log level in `_meta`: it gets the records at that
        // level or above while it runs (see `logging.rs`); without one, none.
        #[allow(deprecated)]
        let _log = context.meta.log_level().map(|level| {
            super::logging::subscribe_request(
                super::logging::Listener::of(&caller),
                context.peer.clone(),
                level,
            )
        });
        context.extensions.insert(caller);
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
            Err(panic) => return Ok(panicked(&tool, panic.as_ref()).to_result().into()),
        };
        if let Some(log) = &_log {
            log.flush().await;
        }
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
            let message = message.trim_end_matches('.');
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
}

/// A tool's panic as the model sees it: `INTERNAL_ERROR` naming the tool and saying the
/// server goes on, never the panic's text (it may hold anything the tool had at hand, and
/// is no use to the model); that text goes to the log.
fn panicked(tool: &str, payload: &(dyn std::any::Any + Send)) -> ToolError {
    let what = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(
        tool,
        panic = what,
        "a tool panicked; the call answers INTERNAL_ERROR"
    );
    ToolError {
        code: ErrorCode::InternalError,
        message: format!(
            "Internal error in {tool}: the tool failed unexpectedly (a bug in kernel-mcp; the server's log has the details). \
             The server is still running and other calls work; please report this."
        ),
        details: serde_json::json!({"tool": tool}),
    }
}

/// The tools `toolset` lists, in the router's order (by name): its parameters only, schemas
/// compacted (see `schema.rs`).
fn listed_tools(router: &ToolRouter<KernelMcp>, toolset: Toolset) -> Vec<Tool> {
    router
        .list_all()
        .into_iter()
        .filter(|t| toolset.offers(&t.name))
        .map(|mut t| {
            let mut schema = t.input_schema.as_ref().clone();
            if let Some(serde_json::Value::Object(props)) = schema.get_mut("properties") {
                props.retain(|param, _| toolset.lists_param(&t.name, param));
            }
            super::schema::compact_input(&mut schema, toolset.describes_params());
            super::schema::route_by_session(&mut schema);
            t.input_schema = Arc::new(schema);
            if toolset.terse_outputs() {
                t.output_schema = Some(super::schema::terse_output());
            }
            t
        })
        .collect()
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KernelMcp {
    /// `tools/call`: [`KernelMcp::dispatch`] in the request's span (see `traced.rs`), with
    /// its audit line (see `audit.rs`).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let audit = super::audit::Audit::start(&self.caller(&context), &request);
        let span = super::traced::request("tools/call", Some(&request.name), &context);
        let response = super::traced::traced(
            span,
            self.dispatch(request, context),
            super::traced::tool_error,
        )
        .await;
        audit.finish(&response);
        response
    }

    /// `tools/list`: the tools of this request's toolset.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let toolset = self.toolset_of(&context);
        let tools = if toolset == self.toolset {
            self.listed.as_ref().clone()
        } else {
            listed_tools(&self.tool_router, toolset)
        };
        // The MCP Apps view, for a client that declared the extension (see `ui.rs`).
        let tools = if super::ui::declared(context.client_capabilities().as_ref()) {
            super::ui::decorate(tools)
        } else {
            tools
        };
        let mut result = ListToolsResult::with_all_items(tools);
        // As rmcp's generated list_tools does: 2026-07-28 peers get cache hints.
        if context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28)
        {
            result = result
                .with_ttl_ms(0)
                .with_cache_scope(rmcp::model::CacheScope::Public);
        }
        Ok(result)
    }

    /// A tool of the server's toolset, as listed (the HTTP transport checks headers with it).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listed.iter().find(|t| t.name == name).cloned()
    }

    /// `tasks/get`: a task is a run (see [`super::tasks`]).
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let span = super::traced::request("tasks/get", None, &context);
        let caller = self.caller(&context);
        let get = async move { super::tasks::detailed(&caller.scope, &request.task_id).await };
        let task = super::traced::traced(span, get, super::traced::never).await?;
        Ok(GetTaskResult::new(task))
    }

    /// `tasks/cancel`: cancels the task's run, as `cancel_execution` does.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = super::traced::request("tasks/cancel", None, &context);
        let caller = self.caller(&context);
        let cancel = async move { super::tasks::cancel(&caller.scope, &request.task_id).await };
        super::traced::traced(span, cancel, super::traced::never).await
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
        let caller = self.caller(&context);
        super::logging::subscribe(
            self.handler,
            super::logging::Listener::of(&caller),
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

    /// The MCP Apps view, for a client that declared the extension (see `ui.rs`); run
    /// resources are listed through templates.
    async fn list_resources(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let view =
            super::ui::declared(context.client_capabilities().as_ref()).then(super::ui::resource);
        Ok(rmcp::model::ListResourcesResult::with_all_items(
            view.into_iter().collect(),
        ))
    }

    /// A run's stdout, stderr or output (see [`super::resources`]), or the view.
    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        if request.uri == super::ui::VIEW_URI {
            let contents = vec![super::ui::contents()];
            return Ok(rmcp::model::ReadResourceResult::new(contents).into());
        }
        let span = super::traced::request("resources/read", None, &context);
        let caller = self.caller(&context);
        let read = async move { super::resources::read(&caller.scope, &request.uri).await };
        let contents = super::traced::traced(span, read, super::traced::never).await?;
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
        .with_instructions(self.toolset.instructions())
    }
}

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;
    use rmcp::ServiceExt;
    use rmcp::handler::server::tool::ToolRoute;
    use rmcp::model::{CallToolResult, JsonObject};

    use super::*;
    use crate::config::Limits;
    use crate::kernel::discovery::KernelSearch;

    fn boom() -> Result<CallToolResponse, McpError> {
        panic!("secret text the model must not see");
    }

    fn panics(
        _: ToolCallContext<'_, KernelMcp>,
    ) -> BoxFuture<'_, Result<CallToolResponse, McpError>> {
        Box::pin(async { boom() })
    }

    /// The server on one end of a duplex, an rmcp client on the other; no kernelspecs, so
    /// nothing here starts a kernel.
    async fn in_process(
        add: impl FnOnce(&mut KernelMcp),
    ) -> (
        rmcp::service::RunningService<rmcp::RoleClient, ()>,
        Arc<Registry>,
    ) {
        let registry = Arc::new(Registry::new(
            KernelSearch::new(&[], None, None),
            None,
            Limits::default(),
            tokio::runtime::Handle::current(),
        ));
        let mut server = KernelMcp::new(registry.clone());
        add(&mut server);
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        (().serve(client_io).await.expect("initialize"), registry)
    }

    /// A tool that panics (one added to the router here only: no tool of `tools/list` can)
    /// answers `INTERNAL_ERROR` naming itself, without the panic's text, and the server
    /// goes on answering.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_tool_answers_internal_error_without_its_text_and_the_server_goes_on() {
        let (client, registry) = in_process(|server| {
            let tool = Tool::new("panic_for_test", "panics", JsonObject::new());
            server
                .tool_router
                .add_route(ToolRoute::new_dyn(tool, panics));
        })
        .await;
        let call = |name: &'static str| {
            client.call_tool(CallToolRequestParams::new(name).with_arguments(JsonObject::new()))
        };
        let r: CallToolResult = call("panic_for_test").await.expect("a tool result");
        assert_eq!(r.is_error, Some(true));
        let v = r.structured_content.expect("the error shape");
        assert_eq!(v["error_code"], "INTERNAL_ERROR", "{v}");
        assert_eq!(v["details"]["tool"], "panic_for_test", "{v}");
        let message = v["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("panic_for_test") && message.contains("still running"),
            "{message}"
        );
        let all = serde_json::to_string(&r.content).unwrap() + &v.to_string();
        assert!(
            !all.contains("secret"),
            "the panic's text reached the model: {all}"
        );
        let info = call("server_info")
            .await
            .expect("server_info after the panic");
        assert_eq!(info.is_error, Some(false));
        let _ = client.cancel().await;
        registry.shutdown_all().await;
    }

    /// A duration out of range is refused as the arguments are parsed, before anything
    /// runs, with the message that names the parameter and its bounds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_duration_out_of_range_is_invalid_argument_naming_the_parameter() {
        let (client, registry) = in_process(|_| {}).await;
        let args = serde_json::json!({"code": "1", "wait_s": -1});
        let params =
            CallToolRequestParams::new("execute").with_arguments(args.as_object().unwrap().clone());
        let r = client.call_tool(params).await.expect("a tool result");
        let v = r.structured_content.expect("the error shape");
        assert_eq!(v["error_code"], "INVALID_ARGUMENT", "{v}");
        let message = v["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(
                "wait_s must be a number of seconds between 0 and 10000000, not -1.0. See"
            ),
            "{message}"
        );
        let _ = client.cancel().await;
        registry.shutdown_all().await;
    }
}
