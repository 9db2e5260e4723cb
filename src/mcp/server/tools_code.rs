//! Tools that work with code beyond running it: install packages into a Python session's
//! interpreter, complete, is_complete (may code typed so far run, or does it need another
//! line: what a console asks on Enter) and inspect.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::json;

use super::KernelMcp;
use crate::mcp::error::{ToolError, ToolResult};
use crate::mcp::params::{CompleteParams, InspectParams, InstallPackagesParams, IsCompleteParams};
use crate::mcp::render;
use crate::mcp::results::{Completeness, Completion, Inspection};
use crate::mcp::schema::output;
use crate::ops::packages::InstallOutcome;
use crate::session::WhileBusy;
use crate::session::output::clean_text;

/// How long complete/inspect wait for the kernel.
const INTROSPECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Matches returned by `complete` at most.
const MAX_MATCHES: usize = 500;

/// `cursor_pos` (code points) or the end of `code`. Errors: `INVALID_ARGUMENT` past the end.
fn cursor(code: &str, cursor_pos: Option<usize>) -> Result<usize, ToolError> {
    let len = code.chars().count();
    match cursor_pos {
        None => Ok(len),
        Some(p) if p <= len => Ok(p),
        Some(p) => Err(ToolError::invalid(format!(
            "cursor_pos {p} is past the end of the code ({len} characters); omit it to use the end."
        ))),
    }
}

#[tool_router(router = code_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Install packages into a Python session's interpreter (uv pip, else pip); says when a
    /// restart is recommended.
    #[tool(
        annotations(destructive_hint = false, open_world_hint = true),
        output_schema = output::<InstallOutcome>()
    )]
    async fn install_packages(
        &self,
        Parameters(p): Parameters<InstallPackagesParams>,
    ) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let outcome = crate::ops::install_packages(&handle, &p.packages).await?;
        let mut r = render::success(
            render::install_text(&outcome, &p.packages),
            &outcome,
            vec![],
        );
        r.is_error = Some(!outcome.ok);
        Ok(r)
    }

    /// Code completion at cursor_pos (default: end of code): matches and the range they replace.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<Completion>()
    )]
    async fn complete(&self, Parameters(p): Parameters<CompleteParams>) -> ToolResult {
        let cursor = cursor(&p.code, p.cursor_pos)?;
        let handle = self.session(&p.session_id)?;
        let content = json!({"code": p.code, "cursor_pos": cursor});
        let reply = handle
            .request(
                "complete_request",
                content,
                WhileBusy::Subshell,
                INTROSPECTION_TIMEOUT,
            )
            .await?;
        let matches: Vec<String> = reply["matches"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .take(MAX_MATCHES)
                    .collect()
            })
            .unwrap_or_default();
        let text = matches.join("\n");
        let v = Completion {
            matches,
            cursor_start: reply["cursor_start"].as_i64(),
            cursor_end: reply["cursor_end"].as_i64(),
        };
        Ok(render::success(text, &v, vec![]))
    }

    /// Whether code can run as typed (a console's Enter): status, and indent for the next line.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<Completeness>()
    )]
    async fn is_complete(&self, Parameters(p): Parameters<IsCompleteParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let reply = handle
            .request(
                "is_complete_request",
                json!({"code": p.code}),
                WhileBusy::Subshell,
                INTROSPECTION_TIMEOUT,
            )
            .await?;
        let v = Completeness {
            status: reply["status"].as_str().unwrap_or("unknown").to_string(),
            indent: reply["indent"].as_str().map(String::from),
        };
        Ok(render::success(v.status.clone(), &v, vec![]))
    }

    /// Documentation for the name at cursor_pos (default: end of code), as the kernel gives it.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<Inspection>()
    )]
    async fn inspect(&self, Parameters(p): Parameters<InspectParams>) -> ToolResult {
        let cursor = cursor(&p.code, p.cursor_pos)?;
        let handle = self.session(&p.session_id)?;
        let content = json!({"code": p.code, "cursor_pos": cursor, "detail_level": p.detail_level.unwrap_or(0).min(1)});
        let reply = handle
            .request(
                "inspect_request",
                content,
                WhileBusy::Subshell,
                INTROSPECTION_TIMEOUT,
            )
            .await?;
        let found = reply["found"].as_bool().unwrap_or(false);
        let text = reply["data"]["text/plain"]
            .as_str()
            .map(|t| crate::session::output::head_tail(&clean_text(t), 20_000).0)
            .unwrap_or_default();
        let shown = if found {
            text.clone()
        } else {
            format!("nothing found for {:?}", p.code)
        };
        Ok(render::success(shown, &Inspection { found, text }, vec![]))
    }
}
