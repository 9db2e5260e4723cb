//! Errors at the MCP edge: one [`ToolError`] that every tool returns with `?`, turned into the
//! contract's tool result (`isError: true`, `structuredContent` `{error_code, message,
//! details}`, docs/tools.md "Errors"). Here, and only here, a session error's facts get the advice
//! that names MCP tools ("create one with create_session…").

use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::session::{ErrorCode, SessionError};

/// A tool failure the model can act on.
#[derive(Debug, Clone)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Value,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: Value::Null,
        }
    }

    /// An `INVALID_ARGUMENT` error.
    pub fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorCode::InvalidArgument, message)
    }

    /// The tool result: `isError`, a `CODE: message` text block and the structured error.
    pub fn to_result(&self) -> CallToolResult {
        let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
            "{}: {}",
            self.code.as_str(),
            self.message
        ))]);
        r.structured_content = Some(json!({
            "error_code": self.code,
            "message": self.message,
            "details": self.details,
        }));
        r
    }
}

impl From<SessionError> for ToolError {
    fn from(e: SessionError) -> ToolError {
        let mut message = e.to_string();
        message.push_str(&hint(&e));
        ToolError {
            code: e.code(),
            message,
            details: e.details(),
        }
    }
}

impl From<crate::artifacts::ArtifactError> for ToolError {
    fn from(e: crate::artifacts::ArtifactError) -> ToolError {
        use crate::artifacts::ArtifactError as E;
        let (code, next) = match &e {
            E::NotFound(_) => (
                ErrorCode::ArtifactNotFound,
                " list_artifacts shows the artifacts kept.",
            ),
            E::TooLarge { .. } => (
                ErrorCode::LimitExceeded,
                " Keep a smaller value, or write it to a file.",
            ),
            E::PastEnd { .. } => (ErrorCode::InvalidArgument, ""),
            E::Io(_) => (ErrorCode::IoError, ""),
        };
        ToolError::new(code, format!("{e}{next}"))
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        Ok(self.to_result().into())
    }
}

/// What to do next, in terms of the tools.
fn hint(e: &SessionError) -> String {
    use SessionError as E;
    match e {
        E::NotFound { known, .. } if known.is_empty() => " There are no sessions; create one with create_session (or call execute without session_id for the default session).".into(),
        E::NotFound { known, .. } => format!(" Existing sessions: {}.", known.join(", ")),
        E::Gone(_) => " Create a new one with create_session.".into(),
        E::Expired { id, .. } if id == "default" => " Its history is still readable with get_history and export_history. It is not replaced by itself: create_session(session_id=\"default\") starts a new default session (its variables are gone; pass expires_after_s, 0 = never, or call renew_session to keep it alive), or use a named session.".into(),
        E::Expired { .. } => " Its history is still readable with get_history and export_history; create_session makes a new session (pass expires_after_s, 0 = never, and call renew_session to keep it alive).".into(),
        E::AlreadyExists(_) => {
            " Use it, pick another session_id, or destroy_session it first.".into()
        }
        E::Busy { .. } => {
            " Try again when it has finished (or interrupt_session it).".into()
        }
        E::Replaced { .. } => " Try again.".into(),
        E::Dead { .. } => {
            " Call restart_session to try again, or destroy_session.".into()
        }
        E::QueueFull { .. } => {
            " Wait for them (get_execution) or cancel some (cancel_execution).".into()
        }
        E::StateChanged { generation, .. } => format!(
            " Re-run the setup code, then pass expected_generation={generation}."
        ),
        E::EnvironmentNotFound { .. } => {
            " Register one with register_environment(name, python); list_environments shows them.".into()
        }
        E::RunNotFound(_) => {
            " Run ids come from execute results; runs of destroyed sessions are forgotten.".into()
        }
        E::GatewayUnavailable { .. } => " Check that the server runs and its URL (--gateway); list_kernels shows each gateway's state, and local kernels still work.".into(),
        E::Unauthorized { .. } => " Give kernel-mcp the server's token (KERNEL_MCP_GATEWAY_TOKEN or --gateway-token-file).".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_default_says_how_to_start_a_new_one() {
        let e = ToolError::from(SessionError::Expired {
            id: "default".into(),
            expired_at: "2026-01-01T00:00:00Z".into(),
        });
        assert_eq!(e.code, ErrorCode::SessionExpired);
        assert!(
            e.message
                .contains(r#"create_session(session_id="default")"#),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_session_error_keeps_its_code_and_details_and_gains_the_next_step() {
        let e = ToolError::from(SessionError::NotFound {
            id: "x".into(),
            known: vec!["a".into(), "b".into()],
            journal_checked: false,
        });
        assert_eq!(e.code, ErrorCode::SessionNotFound);
        assert_eq!(e.message, "Session 'x' not found. Existing sessions: a, b.");
        assert_eq!(e.details["sessions"], json!(["a", "b"]));
        let r = e.to_result();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.structured_content.expect("structured")["error_code"],
            "SESSION_NOT_FOUND"
        );
    }
}
