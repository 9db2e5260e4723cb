//! The operations a kernel asks its endpoint for, one JSON line each way:
//!
//! | `op` | parameters | answer (`result`) |
//! |---|---|---|
//! | `servers` | — | the registry (path, errors) and each server's name, transport, grant, state; connects nothing |
//! | `tools` | `server` | the server's tools: name, first line of the description, granted |
//! | `tool` | `server`, `tool` | the tool as the server lists it (input and output schema), `granted` |
//! | `call` | `server`, `tool`, `arguments`, `timeout` (s) | the result envelope, bounded |
//! | `journal` | — | the session's call journal |
//! | `explain` | `server`, `tool` | see [`super::explain`]; connects nothing |
//! | `artifact_*` | see [`super::artifacts`] | the session's artifacts |
//!
//! Every request carries `key`. An answer is `{"ok": true, "result": …}` or `{"ok": false,
//! "error": {"kind", "message", "result"?, "jsonrpc"?}}`; the helper raises by `kind`:
//! `permission` → `PermissionError`, `tool` → `mcp.ToolError` (with `.result`), `timeout` →
//! `TimeoutError`, `artifact` (with `code`) → `ArtifactError`, the others → `mcp.BrokerError`.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::downstream::Downstream;
use super::journal::{JournalEntry, Outcome};
use super::shared::Shared;

/// Largest serialized `arguments` of one call (bytes).
pub const MAX_ARGUMENT_BYTES: usize = 256 * 1024;
/// Largest request line (the arguments and the rest of the request).
pub const MAX_REQUEST_BYTES: usize = MAX_ARGUMENT_BYTES + 16 * 1024;
/// A call's timeout when the caller gives none (seconds).
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;
/// The longest timeout a call may ask for (seconds).
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

#[derive(Deserialize)]
pub(super) struct Request {
    pub(super) key: String,
    pub(super) op: String,
    #[serde(default)]
    pub(super) server: Option<String>,
    #[serde(default)]
    pub(super) tool: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<Value>,
    #[serde(default)]
    pub(super) timeout: Option<f64>,
    /// The trace context the kernel's code runs in (`traceparent`, `tracestate`: what the
    /// run's execute_request carried), which the call's span continues.
    #[serde(default)]
    pub(super) trace: serde_json::Map<String, Value>,
    /// The arguments' budget (bytes of JSON); a kernel's request has [`MAX_ARGUMENT_BYTES`].
    #[serde(skip)]
    pub(super) budget: Option<usize>,
}

/// What kind of failure an answer reports (`error.kind`, snake_case on the wire); the helper
/// raises by it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Not a request the broker understands (bad JSON, a missing name, a bad value).
    Protocol,
    /// The request's key is not this session's.
    Unauthorized,
    /// Too many calls of the session in flight.
    Busy,
    /// The request or its arguments are too large.
    Limit,
    /// The MCP registry (`.mcp.json`) is invalid.
    Config,
    UnknownServer,
    UnknownTool,
    /// The server could not be started or listed.
    Unavailable,
    /// The tool is outside the registry's grant (`allowedTools`).
    Permission,
    Timeout,
    /// The run was interrupted, or its kernel restarted or died.
    Cancelled,
    /// The tool answered with an error.
    Tool,
    /// The connection to the server failed during the call.
    Broken,
}

/// A failed operation, as the helper reads it.
#[derive(Debug)]
pub struct Failure {
    kind: FailureKind,
    message: String,
    result: Option<Value>,
    jsonrpc: Option<Value>,
}

impl Failure {
    /// What kind of failure it is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// What the helper would raise with.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The caller went away before the answer (cannot happen to a forward).
    pub(super) fn gone() -> Failure {
        Failure::new(FailureKind::Cancelled, "the call was abandoned")
    }

    fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
            result: None,
            jsonrpc: None,
        }
    }

    pub(super) fn into_reply(self) -> Value {
        let mut error = json!({"kind": self.kind, "message": self.message});
        if let Some(r) = self.result {
            error["result"] = r;
        }
        if let Some(j) = self.jsonrpc {
            error["jsonrpc"] = j;
        }
        json!({"ok": false, "error": error})
    }
}

/// A failure reply of `kind`.
pub fn failure(kind: FailureKind, message: String) -> Value {
    Failure::new(kind, message).into_reply()
}

pub(super) type Gone = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The request in `line`, when it is one and carries the session's key; else the failure
/// reply.
pub(super) fn parse(shared: &Shared, line: &[u8]) -> Result<Request, Value> {
    let req: Request = serde_json::from_slice(line).map_err(|e| {
        failure(
            FailureKind::Protocol,
            format!("not a broker request ({e}); use the kernel_mcp module"),
        )
    })?;
    if !shared.key_matches(&req.key) {
        return Err(failure(
            FailureKind::Unauthorized,
            "the key does not match this session's endpoint; the kernel's endpoint file is stale"
                .into(),
        ));
    }
    Ok(req)
}

/// Answer one request line; `None` when the peer went away before the answer.
pub async fn handle(shared: &Shared, line: &[u8], gone: Gone) -> Option<Value> {
    let req = match parse(shared, line) {
        Ok(r) => r,
        Err(reply) => return Some(reply),
    };
    let answer = match req.op.as_str() {
        "servers" => Ok(servers(shared)),
        "journal" => Ok(serde_json::to_value(
            shared
                .journal
                .lock()
                .map(|j| j.entries())
                .unwrap_or_default(),
        )
        .unwrap_or(Value::Null)),
        "explain" => match &req.server {
            Some(s) => Ok(super::explain::explain(shared, s, req.tool.as_deref())),
            None => Err(Failure::new(
                FailureKind::Protocol,
                "explain needs a server name",
            )),
        },
        "tools" => race(tools(shared, &req), gone).await?,
        "tool" => race(tool(shared, &req), gone).await?,
        "call" => call(shared, req, gone).await?,
        other => Err(Failure::new(
            FailureKind::Protocol,
            format!("unknown operation {other:?}"),
        )),
    };
    Some(match answer {
        Ok(result) => json!({"ok": true, "result": result}),
        Err(f) => f.into_reply(),
    })
}

/// `fut`'s outcome, or `None` when the peer goes away first.
async fn race<T>(fut: impl Future<Output = T>, gone: Gone) -> Option<T> {
    tokio::select! {
        r = fut => Some(r),
        _ = gone => None,
    }
}

/// The registry's problems as one message, or `None` when it is usable.
fn invalid(shared: &Shared) -> Option<Failure> {
    let reg = &shared.project.registry;
    if reg.is_valid() {
        return None;
    }
    let list: Vec<String> = reg.errors.iter().map(|e| format!("- {e}")).collect();
    Some(Failure::new(
        FailureKind::Config,
        format!(
            "The MCP registry {} cannot be used, so no broker call works until it is fixed (then start a new session):\n{}",
            reg.path.display(),
            list.join("\n")
        ),
    ))
}

/// The downstream of `server`, when the registry is valid and configures it.
fn downstream<'a>(
    shared: &'a Shared,
    server: &str,
) -> Result<&'a std::sync::Arc<Downstream>, Failure> {
    if let Some(f) = invalid(shared) {
        return Err(f);
    }
    let reg = &shared.project.registry;
    shared.project.downstreams.get(server).ok_or_else(|| {
        let known: Vec<&str> = reg.entries.keys().map(String::as_str).collect();
        let where_ = if reg.found {
            format!("in {}", reg.path.display())
        } else {
            format!("({} does not exist)", reg.path.display())
        };
        Failure::new(
            FailureKind::UnknownServer,
            if known.is_empty() {
                format!("No MCP server \"{server}\": none is configured {where_}. Add it under \"mcpServers\".")
            } else {
                format!(
                    "No MCP server \"{server}\" {where_}. Configured: {}.",
                    known.join(", ")
                )
            },
        )
    })
}

fn servers(shared: &Shared) -> Value {
    let reg = &shared.project.registry;
    let servers: Vec<Value> = reg
        .entries
        .values()
        .map(|e| {
            let state = shared
                .project
                .downstreams
                .get(&e.name)
                .map(|d| serde_json::to_value(d.state()).unwrap_or(Value::Null));
            json!({
                "name": e.name,
                "transport": e.written.as_ref().map(|w| w.kind()),
                "allowedTools": e.allowed_tools,
                "state": state,
                "errors": e.errors.iter().map(|x| x.to_string()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "registry": reg.path,
        "found": reg.found,
        "valid": reg.is_valid(),
        "errors": reg.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        "servers": servers,
    })
}

fn named<'a>(v: &'a Option<String>, what: &str) -> Result<&'a str, Failure> {
    v.as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Failure::new(FailureKind::Protocol, format!("missing {what}")))
}

fn unavailable(e: super::downstream::DownstreamError) -> Failure {
    Failure::new(FailureKind::Unavailable, e.to_string())
}

async fn tools(shared: &Shared, req: &Request) -> Result<Value, Failure> {
    let server = named(&req.server, "server")?;
    let ds = downstream(shared, server)?;
    let entry = &shared.project.registry.entries[server];
    let tools = ds.tools().await.map_err(unavailable)?;
    let list: Vec<Value> = tools
        .iter()
        .map(|t| {
            let description = t.description.as_deref().unwrap_or("");
            let first = description.lines().next().unwrap_or("");
            let first: String = first.chars().take(200).collect();
            json!({"name": t.name, "description": first, "granted": entry.allows(&t.name)})
        })
        .collect();
    Ok(json!({"server": server, "tools": list, "allowedTools": entry.allowed_tools}))
}

async fn tool(shared: &Shared, req: &Request) -> Result<Value, Failure> {
    let server = named(&req.server, "server")?;
    let name = named(&req.tool, "tool")?;
    let ds = downstream(shared, server)?;
    let entry = &shared.project.registry.entries[server];
    let tools = ds.tools().await.map_err(unavailable)?;
    let Some(t) = tools.iter().find(|t| t.name == name) else {
        let names: Vec<&str> = tools.iter().take(50).map(|t| t.name.as_ref()).collect();
        return Err(Failure::new(
            FailureKind::UnknownTool,
            format!(
                "Server \"{server}\" has no tool \"{name}\". Its tools: {}.",
                names.join(", ")
            ),
        ));
    };
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    v["granted"] = Value::Bool(entry.allows(name));
    Ok(v)
}

/// A `call` request that passed its checks.
struct Checked {
    server: String,
    tool: String,
    ds: std::sync::Arc<Downstream>,
    arguments: Map<String, Value>,
    timeout: Duration,
}

/// `call`'s grant, size and registry checks.
fn check_call(shared: &Shared, req: &Request) -> Result<Checked, Failure> {
    let server = named(&req.server, "server")?.to_string();
    let tool = named(&req.tool, "tool")?.to_string();
    let ds = downstream(shared, &server)?.clone();
    let entry = &shared.project.registry.entries[&server];
    if !entry.allows(&tool) {
        let grant = entry.allowed_tools.clone().unwrap_or_default();
        return Err(Failure::new(
            FailureKind::Permission,
            format!(
                "Tool \"{tool}\" of MCP server \"{server}\" is outside the grant: allowedTools is {} in {}. Add \"{tool}\" to that list to allow it.",
                serde_json::to_string(&grant).unwrap_or_default(),
                shared.project.registry.path.display()
            ),
        ));
    }
    let arguments = match req.arguments.clone() {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(Failure::new(
                FailureKind::Protocol,
                "arguments must be a dict (a JSON object)",
            ));
        }
    };
    let size = serde_json::to_vec(&arguments).map_or(0, |v| v.len());
    let budget = req.budget.unwrap_or(MAX_ARGUMENT_BYTES);
    if size > budget {
        return Err(Failure::new(
            FailureKind::Limit,
            format!(
                "The arguments are {size} bytes of JSON; a call may send at most {budget}. Pass a file path or smaller pieces instead."
            ),
        ));
    }
    let timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT_S);
    if !(timeout > 0.0 && timeout <= MAX_TIMEOUT_S) {
        return Err(Failure::new(
            FailureKind::Protocol,
            format!("timeout must be between 0 and {MAX_TIMEOUT_S} seconds"),
        ));
    }
    Ok(Checked {
        server,
        tool,
        ds,
        arguments,
        timeout: Duration::from_secs_f64(timeout),
    })
}

/// Said of a call abandoned after it was sent: whether it took effect is not known.
const UNKNOWN: &str = "it may or may not have taken effect; it is not retried";

/// `call`: [`check_call`], then the downstream call raced with the peer going away, the
/// session's cancellation and the timeout. `None`: the peer went away.
pub(super) async fn call(
    shared: &Shared,
    req: Request,
    gone: Gone,
) -> Option<Result<Value, Failure>> {
    let c = match check_call(shared, &req) {
        Ok(c) => c,
        Err(f) => return Some(Err(f)),
    };
    let (server, tool) = (&c.server, &c.tool);
    let cancel = shared.cancel_token();
    let deadline = tokio::time::Instant::now() + c.timeout;
    let mut gone = gone;
    // Starting the server is not yet a call: abandoning it here leaves nothing to journal.
    let peer = tokio::select! {
        p = c.ds.peer() => match p {
            Ok(p) => p,
            Err(e) => return Some(Err(unavailable(e))),
        },
        _ = &mut gone => return None,
        _ = cancel.cancelled() => return Some(Err(Failure::new(FailureKind::Cancelled, format!("The call to {server}.{tool} was cancelled (the run was interrupted) before it was sent.")))),
        _ = tokio::time::sleep_until(deadline) => return Some(Err(Failure::new(FailureKind::Timeout, format!("MCP server \"{server}\" did not start within the call's timeout ({} s); the call was not sent.", c.timeout.as_secs_f64())))),
    };
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let t0 = Instant::now();
    let record = |outcome: Outcome| {
        let entry = JournalEntry {
            server: server.clone(),
            tool: tool.clone(),
            started: started.clone(),
            ms: t0.elapsed().as_millis() as u64,
            outcome,
        };
        if let Ok(mut j) = shared.journal.lock() {
            j.record(entry);
        }
    };
    let mut params = CallToolRequestParams::new(tool.clone()).with_arguments(c.arguments.clone());
    // A client span, its context passed on in the request's `_meta` (SEP-414).
    let span = crate::telemetry::spans::broker_call(server, tool, &req.trace);
    let carried = crate::telemetry::context::carried(&span);
    if !carried.is_empty() {
        params.meta = Some(rmcp::model::MetaObject(carried).into());
    }
    // Dropping the request future sends `notifications/cancelled` to the server (rmcp).
    let outcome = tokio::select! {
        r = peer.call_tool(params).instrument(span.clone()) => r,
        _ = &mut gone => {
            record(Outcome::OutcomeUnknown);
            return None;
        }
        _ = cancel.cancelled() => {
            record(Outcome::OutcomeUnknown);
            return Some(Err(Failure::new(FailureKind::Cancelled, format!("The call to {server}.{tool} was cancelled (the run was interrupted, or its kernel restarted or died) while the server worked on it: {UNKNOWN}."))));
        }
        _ = tokio::time::sleep_until(deadline) => {
            record(Outcome::OutcomeUnknown);
            return Some(Err(Failure::new(FailureKind::Timeout, format!("The call to {server}.{tool} did not answer within its timeout ({} s) and was cancelled: {UNKNOWN}. Pass timeout=… for a longer wait.", c.timeout.as_secs_f64()))));
        }
    };
    let (journal, answer, broken) = answer(&c, outcome);
    if let Err(f) = &answer {
        crate::telemetry::spans::failed(&span, &format!("{:?}", f.kind).to_lowercase());
    }
    record(journal);
    if let Some(reason) = broken {
        c.ds.broken(&reason).await;
    }
    Some(answer)
}

/// What the journal records of a call's `outcome`, the answer to the kernel, and why the
/// connection broke (when it did: the downstream is told, so the next call reconnects).
fn answer(
    c: &Checked,
    outcome: Result<rmcp::model::CallToolResult, ServiceError>,
) -> (Outcome, Result<Value, Failure>, Option<String>) {
    let (server, tool, ds) = (&c.server, &c.tool, &c.ds);
    match outcome {
        Ok(result) => {
            let envelope =
                super::bound::bound(serde_json::to_value(&result).unwrap_or(Value::Null));
            if envelope["isError"] == Value::Bool(true) {
                let text = text_of(&envelope);
                let failure = Failure {
                    result: Some(envelope),
                    ..Failure::new(
                        FailureKind::Tool,
                        format!("{server}.{tool} failed: {}", ds.redact(&text)),
                    )
                };
                (Outcome::Error, Err(failure), None)
            } else {
                (Outcome::Ok, Ok(envelope), None)
            }
        }
        Err(ServiceError::McpError(e)) => {
            let failure = Failure {
                jsonrpc: Some(json!({"code": e.code.0, "message": e.message, "data": e.data})),
                ..Failure::new(
                    FailureKind::Tool,
                    format!(
                        "{server}.{tool}: the server answered with an error ({}): {}",
                        e.code.0,
                        ds.redact(&e.message)
                    ),
                )
            };
            (Outcome::Error, Err(failure), None)
        }
        Err(e) => {
            let reason = e.to_string();
            let failure = Failure::new(
                FailureKind::Broken,
                format!(
                    "The connection to MCP server \"{server}\" failed during the call to {tool} ({}): {UNKNOWN}. The next call starts a new connection.",
                    ds.redact(&reason)
                ),
            );
            (Outcome::OutcomeUnknown, Err(failure), Some(reason))
        }
    }
}

/// The text blocks of an envelope, joined (bounded for a message).
fn text_of(envelope: &Value) -> String {
    let text: Vec<&str> = envelope["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    let joined = text.join("\n");
    if joined.len() > 2000 {
        let cut = (0..=2000)
            .rev()
            .find(|&i| joined.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}…", &joined[..cut])
    } else if joined.is_empty() {
        "(no text)".into()
    } else {
        joined
    }
}
