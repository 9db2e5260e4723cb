//! Sessions: policy and state. One actor task per session ([`actor`]) owns the kernel, the
//! FIFO queue, the runs and the generation; callers hold a cloneable [`SessionHandle`]. The
//! [`Registry`] belongs to the process (not to an MCP connection) and maps names and run ids
//! to sessions.

pub mod actor;
pub mod display;
pub mod error;
pub mod export;
pub mod files;
pub mod history;
pub mod output;
pub mod packages;
pub mod python;
pub mod quirks;
pub mod registry;
pub mod run;
pub mod types;

use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use actor::Command;
pub use actor::ExecuteRequest;
pub use error::{ErrorCode, SessionError};
pub use registry::{CreateRequest, Registry};
pub use types::{ExecutionResult, RunStatus, SessionInfo, SessionStatus};

use crate::kernel::ShutdownRung;

/// A cheap, cloneable handle to one session's actor.
#[derive(Clone)]
pub struct SessionHandle {
    id: String,
    tx: mpsc::Sender<Command>,
}

impl SessionHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// True if both handles talk to the same actor (not merely the same session name).
    pub fn same_session(&self, other: &SessionHandle) -> bool {
        self.tx.same_channel(&other.tx)
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, SessionError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| SessionError::gone(&self.id))?;
        rx.await.map_err(|_| SessionError::gone(&self.id))
    }

    /// Queue a run; returns its id and a receiver of its status.
    pub async fn submit(&self, req: ExecuteRequest) -> Result<actor::Submitted, SessionError> {
        self.call(|tx| Command::Submit(req, tx)).await?
    }

    /// The run's record now, or `None` if this session does not know it.
    pub async fn get_run(&self, run_id: &str) -> Result<Option<ExecutionResult>, SessionError> {
        self.call(|tx| Command::GetRun(run_id.to_string(), tx))
            .await
    }

    /// A receiver of the run's status changes. Errors: `EXECUTION_NOT_FOUND`.
    pub async fn watch_run(
        &self,
        run_id: &str,
    ) -> Result<watch::Receiver<RunStatus>, SessionError> {
        self.call(|tx| Command::WatchRun(run_id.to_string(), tx))
            .await?
    }

    /// A page of one stream of a run (bytes of its cleaned UTF-8 text).
    pub async fn stream_page(
        &self,
        run_id: &str,
        stream: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Option<output::StreamPage>, SessionError> {
        self.call(|tx| {
            Command::StreamPage(run_id.to_string(), stream.to_string(), offset, limit, tx)
        })
        .await
    }

    /// The run's latest output line (or its status), for progress messages.
    pub async fn run_tail(&self, run_id: &str) -> Result<Option<String>, SessionError> {
        self.call(|tx| Command::RunTail(run_id.to_string(), tx))
            .await
    }

    pub async fn info(&self) -> Result<SessionInfo, SessionError> {
        self.call(Command::Info).await
    }

    /// Interrupt the running run, if any; returns its id.
    pub async fn interrupt(&self) -> Result<(SessionInfo, Option<String>), SessionError> {
        self.call(Command::Interrupt).await
    }

    /// Replace the kernel; answers once the new one is ready.
    pub async fn restart(&self, clear_history: bool) -> Result<SessionInfo, SessionError> {
        self.call(|tx| Command::Restart(clear_history, tx)).await?
    }

    /// History entries `[start, end)` (Python slice semantics) with indices, and the total.
    pub async fn history(
        &self,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<(Vec<(usize, history::HistoryEntry)>, usize), SessionError> {
        self.call(|tx| Command::History(start, end, tx)).await
    }

    /// Delete history entries `[start, end)`; returns how many.
    pub async fn delete_history(
        &self,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<usize, SessionError> {
        self.call(|tx| Command::DeleteHistory(start, end, tx)).await
    }

    /// Send a shell request and wait up to `timeout` for its reply's content.
    /// Errors: `SESSION_BUSY` (with `idle_only` while a run executes, or on timeout).
    pub async fn request(
        &self,
        msg_type: &str,
        content: serde_json::Value,
        idle_only: bool,
        timeout: Duration,
    ) -> Result<serde_json::Value, SessionError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Request {
                msg_type: msg_type.to_string(),
                content,
                idle_only,
                reply: tx,
            })
            .await
            .map_err(|_| SessionError::gone(&self.id))?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(SessionError::gone(&self.id)),
            Err(_) => Err(SessionError::new(
                ErrorCode::SessionBusy,
                format!(
                    "The kernel did not answer {msg_type} within {} s (it may be busy).",
                    timeout.as_secs()
                ),
            )),
        }
    }

    /// Names and language_info for exporting this session's history.
    pub async fn export_context(&self) -> Result<export::ExportContext, SessionError> {
        self.call(Command::ExportContext).await
    }

    pub async fn send_input(
        &self,
        run_id: &str,
        value: String,
    ) -> Result<watch::Receiver<RunStatus>, SessionError> {
        self.call(|tx| Command::SendInput(run_id.to_string(), value, tx))
            .await?
    }

    /// Remove a queued run, or interrupt a running one.
    pub async fn cancel(&self, run_id: &str) -> Result<(), SessionError> {
        self.call(|tx| Command::Cancel(run_id.to_string(), tx))
            .await?
    }

    /// Shut the kernel down (ladder) and end the actor.
    pub async fn destroy(&self) -> Result<ShutdownRung, SessionError> {
        self.call(Command::Destroy).await
    }
}

/// Wait until `rx` shows a final status or `awaiting_input`, for at most `wait`.
/// Returns false on timeout.
pub async fn wait_settled(rx: &mut watch::Receiver<RunStatus>, wait: Duration) -> bool {
    let settled = |s: &RunStatus| s.is_final() || *s == RunStatus::AwaitingInput;
    matches!(
        tokio::time::timeout(wait, rx.wait_for(settled)).await,
        Ok(Ok(_)) | Ok(Err(_))
    )
}
