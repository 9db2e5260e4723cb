//! `interrupt_session`: interrupt the running code (Ctrl-C), keeping the kernel and its
//! state, then wait up to the interrupt grace (5 s) and say whether the run stopped (its
//! status) or goes on, and that `restart_session` (which loses state) will stop it.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Serialize;

use super::out::{Json, Output};
use super::sessions::{SessionIdParams, line};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::session::cmd;
use crate::session::{RunId, RunStatus, SessionHandle, SessionInfo};

/// `interrupt_session`: SessionInfo (after the wait), the run it interrupted, and whether
/// that run stopped within the interrupt grace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Interrupted {
    #[serde(flatten)]
    pub info: SessionInfo,
    pub interrupted_run_id: Option<RunId>,
    /// The interrupted run's status when the call returned: final when it stopped, else
    /// `running` (or `awaiting_input`); null when nothing was running.
    pub run_status: Option<RunStatus>,
    /// True when the run reached a final status within the grace; null when nothing ran.
    pub stopped: Option<bool>,
    /// Plain sentences: how long it took, or that the run goes on and what will stop it.
    pub notices: Vec<String>,
}

impl Output for Interrupted {
    /// What happened to the run (or that nothing was running), then the session's line.
    fn text(&self) -> String {
        match self.notices.first() {
            Some(n) => format!("{n}\n{}", line(&self.info)),
            None => format!("nothing was running\n{}", line(&self.info)),
        }
    }
}

#[tool_router(router = interrupt_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Interrupt the running code (Ctrl-C), keeping state; says within 5 s whether it stopped
    /// (if not, restart_session stops it, losing state).
    #[tool]
    async fn interrupt_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<SessionIdParams>,
    ) -> Result<Json<Interrupted>, ToolError> {
        let handle = caller.session(&p.session_id)?;
        let cmd::Interrupted {
            run,
            notice: other_cell,
            ..
        } = handle.call(cmd::Interrupt).await?;
        let grace = caller.limits().interrupt_grace();
        let outcome = match &run {
            Some(r) => Some(stop_outcome(&handle, r, grace).await),
            None => None,
        };
        let info = handle.call(cmd::Info).await?;
        let (run_status, stopped, notice) = match (&run, outcome) {
            (Some(r), Some((status, waited))) => {
                let stopped = status.is_final();
                let notice = stop_notice(r, status, waited, &info.session_id);
                (Some(status), Some(stopped), Some(notice))
            }
            _ => (None, None, other_cell),
        };
        Ok(Json(Interrupted {
            info,
            interrupted_run_id: run,
            run_status,
            stopped,
            notices: notice.into_iter().collect(),
        }))
    }
}

/// What became of run `r` of `session` `waited` after the interrupt: it stopped (and the
/// variables are kept), or it goes on and what will stop it.
fn stop_notice(r: &RunId, status: RunStatus, waited: Duration, session: &str) -> String {
    if status.is_final() {
        format!(
            "Run {r} stopped ({}) {} ms after the interrupt; the session's variables are kept.",
            status.as_str(),
            waited.as_millis()
        )
    } else {
        format!(
            "Run {r} is still {} {} s after the interrupt: the code ignores SIGINT or is blocked \
             where an interrupt cannot reach it. It goes on (get_execution(run_id=\"{r}\") waits for it); \
             restart_session(session_id=\"{session}\") will stop it, and loses the session's variables.",
            status.as_str(),
            waited.as_secs_f64().round(),
        )
    }
}

/// Wait up to `grace` for `run` to stop after an interrupt: its status then (final, or still
/// `running` / `awaiting_input`) and how long the wait took. A run that is no longer kept
/// counts as stopped (`interrupted`).
async fn stop_outcome(
    handle: &SessionHandle,
    run: &RunId,
    grace: Duration,
) -> (RunStatus, Duration) {
    let started = tokio::time::Instant::now();
    let Ok(mut rx) = handle.call(cmd::WatchRun { run: run.clone() }).await else {
        return (RunStatus::Interrupted, started.elapsed());
    };
    // An input() after the KeyboardInterrupt is a prompt, not a stop: only a final status
    // ends the wait (the prompt shows as awaiting_input).
    let _ = tokio::time::timeout(grace, rx.wait_for(|s| s.is_final())).await;
    let status = *rx.borrow();
    (status, started.elapsed())
}
