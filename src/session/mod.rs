//! Sessions: policy and state. One actor task per session ([`actor`]) owns the kernel, the
//! FIFO queue, the runs and the generation; callers hold a cloneable [`SessionHandle`]. The
//! [`Registry`] belongs to the process (not to an MCP connection) and maps names and run ids
//! to sessions.

pub mod actor;
pub mod error;
pub mod export;
pub mod history;
pub mod output;
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
    pub async fn restart(&self) -> Result<SessionInfo, SessionError> {
        self.call(Command::Restart).await?
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
