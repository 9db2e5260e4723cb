//! The spans kernel-mcp opens, one constructor each, so their names and attributes are
//! written once (the MCP conventions' for requests; `kernel_mcp.*` for the rest). Every span
//! has target [`TARGET`]: when nothing exports, no subscriber layer enables that target and a
//! constructor returns a disabled span at the cost of one callsite check; the log's own layers
//! never see these spans either, so log lines are unchanged.
//!
//! Attributes name sessions, runs, kernels, tools and principals; never code, output,
//! arguments or secrets, except the bounded excerpts of [`content`] when the operator turned
//! content capture on (`KERNEL_MCP_OTEL_CAPTURE_CONTENT=1`).

use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;

use super::TARGET;

/// The server span of one MCP request (`{mcp.method.name} {gen_ai.tool.name}`), continuing
/// the caller's trace from the request's `_meta`, and what the duration metric needs.
pub struct Request {
    pub span: Span,
    started: Instant,
    method: &'static str,
    tool: Option<String>,
    protocol: Option<String>,
    transport: &'static str,
}

/// What a request's answer was, for its span and metric.
pub enum Outcome<'a> {
    Ok,
    /// A tool result with `isError`, and the contract's `error_code` when it has one.
    ToolError(Option<&'a str>),
    /// A JSON-RPC error with this code.
    JsonRpc(i32),
}

impl Request {
    /// The span of request `id` for `method` (and `tool`), a child of the context in `meta`.
    /// `transport`: `pipe` (stdio, the socket) or `tcp` (HTTP).
    pub fn start(
        method: &'static str,
        tool: Option<&str>,
        meta: &Map<String, Value>,
        id: &str,
        protocol: Option<String>,
        transport: &'static str,
    ) -> Request {
        let span = tracing::info_span!(target: TARGET, "mcp.request",
            otel.name = method,
            otel.kind = "server",
            otel.status_code = Empty,
            mcp.method.name = method,
            gen_ai.tool.name = tool,
            gen_ai.operation.name = tool.map(|_| "execute_tool"),
            jsonrpc.request.id = id,
            mcp.protocol.version = protocol.as_deref(),
            mcp.session.id = Empty,
            network.transport = transport,
            error.type = Empty,
            rpc.response.status_code = Empty,
            kernel_mcp.error_code = Empty,
            kernel_mcp.principal = Empty,
            kernel_mcp.session = Empty,
            kernel_mcp.run.id = Empty,
        );
        if !span.is_disabled() {
            if let Some(t) = tool {
                span.record("otel.name", format!("{method} {t}"));
            }
            super::context::continue_from(&span, meta);
        }
        Request {
            span,
            started: Instant::now(),
            method,
            tool: tool.map(str::to_string),
            protocol,
            transport,
        }
    }

    /// The MCP session (`Mcp-Session-Id`) and the principal the request comes from.
    pub fn caller(&self, mcp_session: Option<&str>, principal: Option<&str>) {
        if let Some(s) = mcp_session {
            self.span.record("mcp.session.id", s);
        }
        if let Some(p) = principal {
            self.span.record("kernel_mcp.principal", p);
        }
    }

    /// The request was answered: record the outcome on the span and the duration metric.
    pub fn end(self, outcome: Outcome<'_>) {
        let error = match outcome {
            Outcome::Ok => None,
            Outcome::ToolError(code) => {
                if let Some(c) = code {
                    self.span.record("kernel_mcp.error_code", c);
                }
                Some("tool_error".to_string())
            }
            Outcome::JsonRpc(code) => {
                self.span
                    .record("rpc.response.status_code", code.to_string());
                Some(code.to_string())
            }
        };
        if let Some(e) = &error {
            self.span.record("error.type", e.as_str());
            self.span.record("otel.status_code", "error");
        }
        super::metrics::operation(
            self.method,
            self.tool.as_deref(),
            error.as_deref(),
            self.protocol.as_deref(),
            self.transport,
            self.started.elapsed().as_secs_f64(),
        );
    }
}

/// Name the session (and run) a request works on, on the current request span.
pub fn note_session(session: &str, run: Option<&str>) {
    let span = Span::current();
    span.record("kernel_mcp.session", session);
    if let Some(r) = run {
        span.record("kernel_mcp.run.id", r);
    }
}

/// A kernel start of a session (`reason`: `create`, `restart`, `recover`) from `source` (the
/// launcher's location: `local`, a gateway's name); a pool kernel says so with
/// [`note_source`].
pub fn kernel_start(session: &str, kernel: &str, reason: &'static str, source: &str) -> Span {
    tracing::info_span!(target: TARGET, "kernel.start",
        otel.status_code = Empty,
        kernel_mcp.session = session,
        kernel_mcp.kernel = kernel,
        kernel_mcp.start.reason = reason,
        kernel_mcp.kernel.source = source,
        kernel_mcp.pool.hit = Empty,
        error.type = Empty,
    )
}

/// Where the kernel being started comes from, on the current `kernel.start` span.
pub fn note_source(source: &str, pool_hit: bool) {
    let span = Span::current();
    span.record("kernel_mcp.kernel.source", source);
    span.record("kernel_mcp.pool.hit", pool_hit);
}

/// An interrupt signal sent to a kernel: a child of the run's span, or a root when the kernel
/// runs another client's cell (`run` is `None`). Repeated interrupts are spans of their own;
/// escalation to a restart is a [`restart`] span.
pub fn interrupt(run: Option<&Span>, session: &str) -> Span {
    let parent = run.and_then(Span::id);
    tracing::info_span!(target: TARGET, parent: parent, "kernel.interrupt",
        kernel_mcp.session = session,
    )
}

/// That a run's kernel is being replaced, and why (`requested`, `interrupt_not_taken` after a
/// timeout's interrupt, `kernel_died`): an instant child of the run's span. The replacement
/// itself is a `kernel.start` span of reason `restart` or `recover` in a trace of its own (a
/// child would hold the run's span open until the new kernel is up).
pub fn restart(parent: Option<&Span>, session: &str, why: &'static str) -> Span {
    let parent = parent.and_then(Span::id);
    tracing::info_span!(target: TARGET, parent: parent, "kernel.restart",
        kernel_mcp.session = session,
        kernel_mcp.restart.why = why,
    )
}

/// A call the broker makes for kernel code: a client span `tools/call {tool}` continuing the
/// context the kernel sent.
pub fn broker_call(server: &str, tool: &str, carrier: &Map<String, Value>) -> Span {
    let span = tracing::info_span!(target: TARGET, "broker.call",
        otel.name = "tools/call",
        otel.kind = "client",
        otel.status_code = Empty,
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        gen_ai.operation.name = "execute_tool",
        kernel_mcp.broker.server = server,
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("tools/call {tool}"));
        super::context::continue_from(&span, carrier);
    }
    span
}

/// A REST call to a kernel gateway (client span `{method} {route}`; `route` is the path's
/// template, e.g. `/api/kernels/{id}`, never a token).
pub fn gateway(method: &str, route: &str, gateway: &str) -> Span {
    tracing::info_span!(target: TARGET, "gateway.request",
        otel.name = format!("{method} {route}"),
        otel.kind = "client",
        otel.status_code = Empty,
        http.request.method = method,
        url.template = route,
        kernel_mcp.gateway = gateway,
        error.type = Empty,
    )
}

/// A request to the Jupyter face (server span `{method} {route}`).
pub fn jupyter(method: &str, route: &str) -> Span {
    tracing::info_span!(target: TARGET, "jupyter.request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = method,
        http.route = route,
        http.response.status_code = Empty,
        kernel_mcp.principal = Empty,
        error.type = Empty,
    )
}

/// Mark `span` failed with `error_type` (a short class such as `timeout`, a status code).
pub fn failed(span: &Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
}

/// Content capture: with `KERNEL_MCP_OTEL_CAPTURE_CONTENT=1`, the first
/// [`CONTENT_BYTES`](super::CONTENT_BYTES) of `text` (cut at a character boundary); else
/// `None`.
pub fn content(text: &str) -> Option<&str> {
    if !super::capture_content() {
        return None;
    }
    let mut end = text.len().min(super::CONTENT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(&text[..end])
}
