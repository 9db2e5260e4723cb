//! The audit trail (docs/auth.md, "The audit trail"): one line per tool call in the server's
//! log (the service log for the service), at target `kernel_mcp::audit`: who called (the
//! principal's id), which tool, the session it named, the run it made or read, the outcome and
//! how long it took — never code, arguments, outputs or tokens. `kernel-mcp log --audit` reads
//! them back.
//!
//! Outcome: `ok`, a run's status (`error`, `timeout`, `running`…), a tool error's code
//! (`SESSION_NOT_FOUND`…), `task` for a call that became a task, or `rejected` for a
//! JSON-RPC error (an unknown tool).

use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use serde_json::Value;

use super::caller::Caller;

/// The target audit lines are logged at.
pub const TARGET: &str = "kernel_mcp::audit";

/// A tool call under way, to be logged when it ends.
pub struct Audit {
    principal: String,
    tool: String,
    session: Option<String>,
    started: Instant,
}

impl Audit {
    /// `caller` calls `request`'s tool.
    pub fn start(caller: &Caller, request: &CallToolRequestParams) -> Audit {
        let session = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("session_id"))
            .and_then(Value::as_str)
            .map(|s| s.chars().take(128).collect());
        Audit {
            principal: caller.scope.viewer().owner().to_string(),
            tool: request.name.chars().take(128).collect(),
            session,
            started: Instant::now(),
        }
    }

    /// The call ended with `response`: log its line.
    pub fn finish(self, response: &Result<CallToolResponse, ErrorData>) {
        let (outcome, run, session) = outcome(response);
        let session = self.session.or(session).unwrap_or_else(|| "-".into());
        tracing::info!(
            target: TARGET,
            principal = %self.principal,
            tool = %self.tool,
            session = %session,
            run = %run.unwrap_or_else(|| "-".into()),
            outcome = %outcome,
            ms = self.started.elapsed().as_millis() as u64,
            "tool call"
        );
    }
}

/// The outcome, run id and session id a response reports.
fn outcome(
    response: &Result<CallToolResponse, ErrorData>,
) -> (String, Option<String>, Option<String>) {
    let r = match response {
        Ok(CallToolResponse::Complete(r)) => r,
        Ok(_) => return ("task".into(), None, None),
        Err(_) => return ("rejected".into(), None, None),
    };
    let s = r.structured_content.as_ref();
    let field = |k: &str| {
        s.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let outcome = field("error_code")
        .or_else(|| field("status"))
        .unwrap_or_else(|| match r.is_error {
            Some(true) => "error".into(),
            _ => "ok".into(),
        });
    (outcome, field("run_id"), field("session_id"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;
    use serde_json::json;

    #[test]
    fn the_outcome_is_the_error_code_else_the_runs_status_else_ok() {
        let with = |v: Value, err: bool| {
            let mut r = CallToolResult::success(vec![]);
            r.structured_content = Some(v);
            r.is_error = Some(err);
            Ok(CallToolResponse::Complete(r))
        };
        let (o, run, s) = outcome(&with(
            json!({"status": "timeout", "run_id": "run-1", "session_id": "a"}),
            true,
        ));
        assert_eq!(
            (o.as_str(), run.as_deref(), s.as_deref()),
            ("timeout", Some("run-1"), Some("a"))
        );
        assert_eq!(
            outcome(&with(json!({"error_code": "SESSION_NOT_FOUND"}), true)).0,
            "SESSION_NOT_FOUND"
        );
        assert_eq!(outcome(&with(json!({"sessions": []}), false)).0, "ok");
        assert_eq!(
            outcome(&Err(ErrorData::invalid_params("x", None))).0,
            "rejected"
        );
    }
}
