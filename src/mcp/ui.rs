//! The MCP Apps view (docs/apps.md): the `io.modelcontextprotocol/ui` extension (SEP-1865,
//! <https://modelcontextprotocol.io/seps/1865-mcp-apps-interactive-user-interfaces-for-mcp>).
//! This module owns everything a client sees of it, and nothing reaches a client that did
//! not declare the extension:
//!
//! - the view itself, `ui://kernel-mcp/run`: one self-contained HTML file built from `ui/`
//!   (`make ui`) and embedded here, served by `resources/read` as `text/html;profile=mcp-app`
//!   with its CSP in `_meta.ui` (no external origin of any kind), listed by `resources/list`
//!   for a client with the extension;
//! - `_meta.ui.resourceUri` on the tools whose results it shows ([`VIEW_TOOLS`]) in
//!   `tools/list`;
//! - `view_run`, the one tool only the view calls (`_meta.ui.visibility: ["app"]`): a
//!   finished run as the notebook export writes its cell, outputs in the kernel's order with
//!   their whole MIME bundles, [`PAGE_BYTES`] of outputs per answer.
//!
//! A client declares the extension in `capabilities.extensions` (in `initialize`, or in each
//! request's `_meta` on the 2026-07-28 revision); a client that did not gets `tools/list`,
//! `resources/list` and every tool result exactly as before, and `view_run` is unknown to it.

use std::sync::Arc;

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{
    CallToolResponse, ClientCapabilities, JsonObject, MetaObject, Resource, ResourceContents, Tool,
    ToolAnnotations,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::caller::Caller;
use super::error::ToolError;
use super::tools::out::{Json, Output};
use crate::session::RunStatus;
use crate::session::cmd;

/// The extension's identifier in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an MCP Apps HTML view.
pub const MIME: &str = "text/html;profile=mcp-app";
/// The view's resource URI.
pub const VIEW_URI: &str = "ui://kernel-mcp/run";
/// The view: `ui/dist/run.html`, built by `make ui` (at most 150 kB, docs/limits.md).
pub const VIEW_HTML: &str = include_str!("../../ui/dist/run.html");
/// The tools whose results the view shows.
pub const VIEW_TOOLS: [&str; 4] = ["execute", "execute_file", "get_execution", "fork_session"];
/// The app-only tool.
pub const VIEW_RUN: &str = "view_run";
/// Bytes of outputs (as JSON) one `view_run` answer carries, beyond its first output.
pub const PAGE_BYTES: usize = 1024 * 1024;
/// History entries searched for a run before the whole history is.
const RECENT_ENTRIES: i64 = 64;

/// True when the client declared the extension with the HTML view type (or with no
/// settings at all).
pub fn declared(caps: Option<&ClientCapabilities>) -> bool {
    let Some(ui) = caps.and_then(|c| c.extensions.as_ref()?.get(EXTENSION)) else {
        return false;
    };
    match ui.get("mimeTypes") {
        Some(Value::Array(types)) => types.iter().any(|t| t == MIME),
        Some(_) => false,
        None => true,
    }
}

fn ui_meta(ui: Value) -> MetaObject {
    let mut meta = JsonObject::new();
    meta.insert("ui".into(), ui);
    MetaObject(meta)
}

/// `tools/list` for a client with the extension: the view named on [`VIEW_TOOLS`], and
/// `view_run` (for the view alone) when `execute` is listed.
pub fn decorate(mut tools: Vec<Tool>) -> Vec<Tool> {
    let mut shows_runs = false;
    for t in tools
        .iter_mut()
        .filter(|t| VIEW_TOOLS.contains(&t.name.as_ref()))
    {
        let meta = t.meta.get_or_insert_with(MetaObject::new);
        meta.insert("ui".into(), json!({ "resourceUri": VIEW_URI }));
        shows_runs |= t.name == "execute" || t.name == "get_execution";
    }
    if shows_runs {
        tools.push(view_run_tool());
    }
    tools
}

/// The `view_run` tool as listed.
fn view_run_tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "start": {"type": "integer", "minimum": 0, "description": "First output (next_start of the previous answer)."}
        },
        "required": ["run_id"],
        "additionalProperties": false
    });
    let Value::Object(input) = input else {
        unreachable!("a JSON object literal")
    };
    let mut t = Tool::new(
        VIEW_RUN,
        "For the kernel-mcp view only: a finished run as a notebook cell (code, outputs in order with every MIME type), paged by start.",
        Arc::new(input),
    );
    t.annotations = Some(ToolAnnotations::new().read_only(true).open_world(false));
    t.meta = Some(ui_meta(
        json!({ "resourceUri": VIEW_URI, "visibility": ["app"] }),
    ));
    t
}

/// The view as `resources/list` lists it.
pub fn resource() -> Resource {
    let mut r = Resource::new(VIEW_URI, "kernel-mcp run view").with_mime_type(MIME);
    r.description =
        Some("A run as a notebook cell, live, with Interrupt and the session (MCP Apps).".into());
    r.size = Some(VIEW_HTML.len() as u64);
    r
}

/// The view as `resources/read` returns it: the HTML, its MIME type, and its CSP in
/// `_meta.ui` (every list empty: no network, no external script, style, font, image or
/// frame), with no border asked of the host (the view draws its own).
pub fn contents() -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: VIEW_URI.into(),
        mime_type: Some(MIME.into()),
        text: VIEW_HTML.into(),
        meta: Some(ui_meta(json!({
            "csp": {
                "connectDomains": [],
                "resourceDomains": [],
                "frameDomains": [],
                "baseUriDomains": []
            },
            "prefersBorder": false
        }))),
    }
}

/// What `view_run` answers.
#[derive(Debug, Serialize, schemars::JsonSchema)]
struct RunView {
    run_id: String,
    session_id: String,
    status: RunStatus,
    /// The code as run; null while the run is live or when it is not in history
    /// (`store_history=false`).
    code: Option<String>,
    execution_count: Option<i64>,
    /// nbformat 4 outputs from `start`.
    outputs: Vec<Value>,
    /// Where the next page starts, or null at the end.
    next_start: Option<usize>,
    total_outputs: usize,
    kernel: String,
    display_name: String,
    language: String,
}

/// `view_run(run_id, start?)`. Errors: `INVALID_ARGUMENT` for arguments it does not take,
/// `EXECUTION_NOT_FOUND` for a run the caller does not see.
pub async fn view_run(caller: &Caller, args: Option<JsonObject>) -> CallToolResponse {
    let view = view_run_result(caller, args.unwrap_or_default()).await;
    match view
        .map(Json)
        .map(IntoCallToolResult::into_call_tool_result)
    {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => ToolError::new(crate::session::ErrorCode::InternalError, e.message)
            .to_result()
            .into(),
        Err(e) => e.to_result().into(),
    }
}

impl Output for RunView {
    fn text(&self) -> String {
        format!(
            "Run {} ({}): {} of {} outputs.",
            self.run_id,
            self.status.as_str(),
            self.outputs.len(),
            self.total_outputs
        )
    }
}

async fn view_run_result(caller: &Caller, args: JsonObject) -> Result<RunView, ToolError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        run_id: String,
        #[serde(default)]
        start: usize,
    }
    let p: Params = serde_json::from_value(Value::Object(args))
        .map_err(|e| ToolError::invalid(format!("Invalid arguments for view_run: {e}.")))?;
    let key = caller.scope.run_key(p.run_id.clone());
    let found = caller.registry().run(&key)?;
    let Some(handle) = found.session() else {
        return Err(ToolError::new(
            crate::session::ErrorCode::ExecutionNotFound,
            format!(
                "Run {} ran in a fresh kernel that is gone; get_execution has its result.",
                p.run_id
            ),
        ));
    };
    let run = found.record().await?;
    let info = handle.call(cmd::Info).await?;
    let mut view = RunView {
        run_id: run.run_id.clone(),
        session_id: run.session_id.clone(),
        status: run.status,
        code: None,
        execution_count: run.execution_count,
        outputs: vec![],
        next_start: None,
        total_outputs: 0,
        kernel: info.kernel,
        display_name: info.display_name,
        language: info.language,
    };
    if run.status.is_final()
        && let Some(entry) = entry_of(handle, &p.run_id).await?
    {
        let cell = crate::ops::export::notebook_cell(&entry, p.run_id.clone());
        view.code = cell["source"].as_str().map(String::from);
        let outputs = match cell.get("outputs") {
            Some(Value::Array(o)) => o.clone(),
            _ => vec![],
        };
        view.total_outputs = outputs.len();
        (view.outputs, view.next_start) = page(outputs, p.start);
    }
    Ok(view)
}

/// The history entry of `run_id`: among the last [`RECENT_ENTRIES`], else anywhere.
async fn entry_of(
    handle: &crate::session::SessionHandle,
    run_id: &str,
) -> Result<Option<crate::session::history::HistoryEntry>, ToolError> {
    for start in [Some(-RECENT_ENTRIES), None] {
        let cmd::HistoryPage { entries, total } =
            handle.call(cmd::History { start, end: None }).await?;
        if let Some((_, e)) = entries.into_iter().find(|(_, e)| e.run_id == run_id) {
            return Ok(Some(e));
        }
        if total as i64 <= RECENT_ENTRIES {
            break;
        }
    }
    Ok(None)
}

/// Outputs from `start` up to [`PAGE_BYTES`] of JSON (always at least one), and where the
/// next page starts.
fn page(outputs: Vec<Value>, start: usize) -> (Vec<Value>, Option<usize>) {
    let total = outputs.len();
    let mut taken = Vec::new();
    let mut bytes = 0;
    for o in outputs.into_iter().skip(start) {
        let size = crate::session::history::value_bytes(&o);
        if !taken.is_empty() && bytes + size > PAGE_BYTES {
            break;
        }
        bytes += size;
        taken.push(o);
    }
    let end = start.saturating_add(taken.len());
    (taken, (end < total).then_some(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(ui: Value) -> ClientCapabilities {
        serde_json::from_value(json!({ "extensions": { EXTENSION: ui } })).unwrap()
    }

    #[test]
    fn only_a_client_that_declares_the_html_view_type_gets_the_view() {
        assert!(declared(Some(&caps(json!({"mimeTypes": [MIME]})))));
        assert!(declared(Some(&caps(json!({})))));
        assert!(!declared(Some(&caps(
            json!({"mimeTypes": ["text/uri-list"]})
        ))));
        assert!(!declared(Some(&ClientCapabilities::default())));
        assert!(!declared(None));
    }

    #[test]
    fn the_view_tools_name_the_view_and_view_run_is_for_the_app_alone() {
        let t = |name: &'static str| Tool::new(name, "", Arc::new(JsonObject::new()));
        let tools = decorate(vec![t("execute"), t("list_sessions"), t("get_execution")]);
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            ["execute", "list_sessions", "get_execution", VIEW_RUN]
        );
        assert_eq!(
            tools[0].meta.as_ref().unwrap()["ui"]["resourceUri"],
            VIEW_URI
        );
        assert!(tools[1].meta.is_none());
        assert_eq!(
            tools[3].meta.as_ref().unwrap()["ui"]["visibility"],
            json!(["app"])
        );
    }

    #[test]
    fn the_embedded_view_is_one_file_within_its_bound() {
        assert!(VIEW_HTML.len() <= 150 * 1024, "{} bytes", VIEW_HTML.len());
        assert!(VIEW_HTML.starts_with("<!doctype html>"));
        for external in ["http://", "https://", "//cdn"] {
            let outside_comments = VIEW_HTML.split("-->").skip(1).collect::<String>();
            assert!(!outside_comments.contains(external), "{external}");
        }
    }

    #[test]
    fn a_page_holds_at_least_one_output_and_says_where_the_next_starts() {
        let big = json!({"output_type": "stream", "text": "x".repeat(PAGE_BYTES)});
        let small = json!({"output_type": "stream", "text": "y"});
        let (p, next) = page(vec![big.clone(), small.clone(), small.clone()], 0);
        assert_eq!((p.len(), next), (1, Some(1)));
        let (p, next) = page(vec![big, small.clone(), small], 1);
        assert_eq!((p.len(), next), (2, None));
        assert_eq!(page(vec![], 5), (vec![], None));
    }
}
