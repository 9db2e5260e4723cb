//! Tools on sessions as a whole: list_sessions, get_session (with the Python variables
//! when asked), fork_session, restart_session and destroy_session. Each resolves the session
//! through its caller's scope, calls the registry or the session's handle and returns the
//! record; a session record renders as one line ([`line`]).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::out::{Json, Output};
use crate::kernel::ShutdownRung;
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::variables_note;
use crate::session::SessionInfo;
use crate::session::cmd;

/// One line per session field that matters.
pub(super) fn line(s: &SessionInfo) -> String {
    format!(
        "session '{}': kernel {} ({}), status {}, generation {}, pid {}, history {}, queue {}{}",
        s.session_id,
        s.kernel,
        s.display_name,
        s.status.as_str(),
        s.generation,
        s.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
        s.history_count,
        s.queue_length,
        s.current_run_id
            .as_ref()
            .map(|r| format!(", running {r}"))
            .unwrap_or_default()
    )
}

impl Output for SessionInfo {
    fn text(&self) -> String {
        line(self)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionIdParams {
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetSessionParams {
    pub session_id: String,
    /// Also list Python variables (calling no __repr__).
    pub include_variables: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForkSessionParams {
    pub session_id: String,
    pub new_session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestartSessionParams {
    pub session_id: String,
    /// Also forget its history.
    pub clear_history: Option<bool>,
}

/// `list_sessions`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
}

impl Output for SessionList {
    fn text(&self) -> String {
        if self.sessions.is_empty() {
            return "no sessions".to_string();
        }
        let lines: Vec<String> = self.sessions.iter().map(line).collect();
        lines.join("\n")
    }
}

/// `get_session`: SessionInfo, plus the variables when asked for.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub info: SessionInfo,
    /// name, type, summary per variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables: Option<Vec<Value>>,
    /// Why variables are missing or incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables_note: Option<String>,
}

impl Output for SessionDetail {
    /// The session's line, then `  name: type summary` per variable.
    fn text(&self) -> String {
        let mut t = line(&self.info);
        for var in self.variables.iter().flatten() {
            t.push_str(&format!(
                "\n  {}: {} {}",
                var["name"].as_str().unwrap_or(""),
                var["type"].as_str().unwrap_or(""),
                var["summary"].as_str().unwrap_or("")
            ));
        }
        t
    }
}

/// `destroy_session`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Destroyed {
    pub session_id: String,
    pub shutdown: ShutdownRung,
}

impl Output for Destroyed {
    fn text(&self) -> String {
        format!(
            "session '{}' destroyed (shutdown: {})",
            self.session_id,
            format!("{:?}", self.shutdown).to_lowercase()
        )
    }
}

#[tool_router(router = sessions_router, vis = "pub(crate)")]
impl KernelMcp {
    /// List the sessions.
    #[tool]
    async fn list_sessions(&self, caller: Caller) -> Result<Json<SessionList>, ToolError> {
        let sessions = caller.registry().list(&caller.scope.viewer()).await;
        Ok(Json(SessionList { sessions }))
    }

    /// Show one session.
    #[tool]
    async fn get_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<GetSessionParams>,
    ) -> Result<Json<SessionDetail>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let mut detail = SessionDetail {
            info: handle.call(cmd::Info).await?,
            variables: None,
            variables_note: None,
        };
        if p.include_variables.unwrap_or(false) {
            match crate::ops::variables(&handle).await {
                Ok((vars, total)) => {
                    detail.variables_note = variables_note(vars.len(), total)
                        .and_then(|n| n.as_str().map(String::from));
                    detail.variables = Some(vars);
                }
                Err(e) => detail.variables_note = Some(e.to_string()),
            }
        }
        Ok(Json(detail))
    }

    /// A new session whose kernel is a live copy (variables included) of an idle local Python
    /// session's; the source is untouched.
    #[tool]
    async fn fork_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ForkSessionParams>,
    ) -> Result<Json<SessionInfo>, ToolError> {
        if !crate::session::ids::is_valid_name(&p.new_session_id) {
            return Err(ToolError::invalid(format!(
                "Invalid new_session_id '{}': use 1-64 characters from letters, digits, '.', '_' and '-'.",
                p.new_session_id
            )));
        }
        let info = caller
            .registry()
            .fork_session(
                &caller.scope.key(&p.session_id),
                &caller.scope.key(&p.new_session_id),
            )
            .await?;
        Ok(Json(info))
    }

    /// Restart a session's kernel: variables are lost, generation +1.
    #[tool]
    async fn restart_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<RestartSessionParams>,
    ) -> Result<Json<SessionInfo>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        Ok(Json(
            handle
                .call(cmd::Restart {
                    clear_history: p.clear_history.unwrap_or(false),
                })
                .await?,
        ))
    }

    /// Shut a session's kernel down (and every process it started) and forget the session.
    #[tool]
    async fn destroy_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<SessionIdParams>,
    ) -> Result<Json<Destroyed>, ToolError> {
        let shutdown = caller
            .registry()
            .destroy(&caller.scope.key(&p.session_id))
            .await?;
        Ok(Json(Destroyed {
            session_id: p.session_id,
            shutdown,
        }))
    }
}
