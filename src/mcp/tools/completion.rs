//! Editor help from the kernel (the `completion` tool set): `complete`, `is_complete` (may
//! the code typed so far run, or does it need another line: what a console asks on Enter)
//! and `inspect`. Each is one request to the kernel, answered on a subshell when the kernel
//! is busy and has one.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::session::WhileBusy;
use crate::session::cmd;
use crate::session::text::clean_text;

/// How long complete/inspect wait for the kernel.
const INTROSPECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Matches returned by `complete` at most.
const MAX_MATCHES: usize = 500;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompleteParams {
    pub session_id: String,
    pub code: String,
    /// In Unicode code points.
    pub cursor_pos: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct IsCompleteParams {
    pub session_id: String,
    /// Code typed so far.
    pub code: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InspectParams {
    pub session_id: String,
    pub code: String,
    /// In Unicode code points.
    pub cursor_pos: Option<usize>,
    /// 0 (signature and docstring) or 1 (also source, when available).
    pub detail_level: Option<u8>,
}

/// `complete`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Completion {
    pub matches: Vec<String>,
    pub cursor_start: Option<i64>,
    pub cursor_end: Option<i64>,
}

impl Output for Completion {
    fn text(&self) -> String {
        self.matches.join("\n")
    }
}

/// `is_complete`: the kernel's `is_complete_reply`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Completeness {
    /// complete, incomplete, invalid or unknown.
    pub status: String,
    /// For incomplete code: the indent of the next line.
    pub indent: Option<String>,
}

impl Output for Completeness {
    fn text(&self) -> String {
        self.status.clone()
    }
}

/// `inspect`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Inspection {
    pub found: bool,
    pub text: String,
    /// The code asked about, for the text when nothing was found.
    #[serde(skip)]
    code: String,
}

impl Output for Inspection {
    fn text(&self) -> String {
        if self.found {
            self.text.clone()
        } else {
            format!("nothing found for {:?}", self.code)
        }
    }
}

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

#[tool_router(router = completion_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Code completion at cursor_pos (default: end of code): matches and the range they replace.
    #[tool]
    async fn complete(
        &self,
        caller: Caller,
        Parameters(p): Parameters<CompleteParams>,
    ) -> Result<Json<Completion>, ToolError> {
        let cursor = cursor(&p.code, p.cursor_pos)?;
        let handle = caller.session(&p.session_id)?;
        let content = json!({"code": p.code, "cursor_pos": cursor});
        let reply = handle
            .call(cmd::Request {
                msg_type: "complete_request".into(),
                content,
                busy: WhileBusy::Subshell,
                timeout: INTROSPECTION_TIMEOUT,
            })
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
        Ok(Json(Completion {
            matches,
            cursor_start: reply["cursor_start"].as_i64(),
            cursor_end: reply["cursor_end"].as_i64(),
        }))
    }

    /// Whether code can run as typed (a console's Enter): status, and indent for the next line.
    #[tool]
    async fn is_complete(
        &self,
        caller: Caller,
        Parameters(p): Parameters<IsCompleteParams>,
    ) -> Result<Json<Completeness>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let reply = handle
            .call(cmd::Request {
                msg_type: "is_complete_request".into(),
                content: json!({"code": p.code}),
                busy: WhileBusy::Subshell,
                timeout: INTROSPECTION_TIMEOUT,
            })
            .await?;
        Ok(Json(Completeness {
            status: reply["status"].as_str().unwrap_or("unknown").to_string(),
            indent: reply["indent"].as_str().map(String::from),
        }))
    }

    /// Documentation for the name at cursor_pos (default: end of code), as the kernel gives it.
    #[tool]
    async fn inspect(
        &self,
        caller: Caller,
        Parameters(p): Parameters<InspectParams>,
    ) -> Result<Json<Inspection>, ToolError> {
        let cursor = cursor(&p.code, p.cursor_pos)?;
        let handle = caller.session(&p.session_id)?;
        let detail_level = p.detail_level.unwrap_or(0).min(1);
        let content = json!({"code": p.code, "cursor_pos": cursor, "detail_level": detail_level});
        let reply = handle
            .call(cmd::Request {
                msg_type: "inspect_request".into(),
                content,
                busy: WhileBusy::Subshell,
                timeout: INTROSPECTION_TIMEOUT,
            })
            .await?;
        let text = reply["data"]["text/plain"]
            .as_str()
            .map(|t| crate::session::text::head_tail(&clean_text(t), 20_000).0)
            .unwrap_or_default();
        Ok(Json(Inspection {
            found: reply["found"].as_bool().unwrap_or(false),
            text,
            code: p.code,
        }))
    }
}
