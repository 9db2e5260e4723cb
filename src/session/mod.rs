//! Sessions: the actor core. One actor task per session (`actor`) owns the kernel, the FIFO
//! queue, the runs, the history and the generation; callers hold a cloneable
//! [`SessionHandle`]. Which sessions exist, and who may reach them, is the registry's
//! (`crate::registry`); operations built from several actor calls are in `crate::ops`.
//!
//! Layout: `actor/` (the loop and its handlers), `run/` (one run: phase, collected output,
//! bounded response), `runs.rs` (a session's runs), `ids.rs`, `history/` (history and its
//! journal), `display.rs` and `output.rs` (what the agent sees of outputs), `quirks.rs`,
//! `language.rs` and `octave.rs` (per-kernel and per-language behaviour), `trace_env.rs` (the
//! run's `TRACEPARENT` in a Python kernel), `error.rs`, `types.rs`.

pub(crate) mod actor;
pub(crate) mod display;
pub mod error;
pub mod history;
pub(crate) mod ids;
pub(crate) mod language;
pub mod observer;
pub(crate) mod octave;
pub(crate) mod quirks;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod text;
pub(crate) mod trace_env;
pub mod types;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use actor::{Actor, Command};
pub use actor::{
    ExecuteRequest, MAX_SIDE_RUNS, SIDE_RUN_TIMEOUT, SessionDesc, Settled, Started, Submitted,
    WhileBusy,
};
pub use error::{ErrorCode, SessionError, StartFailure};
pub use ids::RunId;
pub use run::Part;
pub use text::{StreamPage, clean_text};
pub use types::{ExecutionResult, RunStatus, SessionInfo, SessionStatus};

use crate::config::Limits;
use crate::kernel::ShutdownRung;

/// Commands buffered per session actor.
const COMMAND_BUFFER: usize = 64;

/// A cheap, cloneable handle to one session's actor.
#[derive(Clone)]
pub struct SessionHandle {
    id: String,
    tx: mpsc::Sender<Command>,
    /// What the session is (kernelspec, cwd, launcher): a fresh-kernel run starts its helper
    /// kernel from the same launcher.
    desc: Arc<SessionDesc>,
    /// Changes whenever the session's history does (see [`SessionHandle::history_changes`]).
    history: watch::Receiver<u64>,
}

/// The outcome of a session's first kernel start.
pub type Created = oneshot::Receiver<Result<Started, SessionError>>;

impl SessionHandle {
    /// Spawn a session actor on `runtime`; it starts its first kernel at once, and `Created`
    /// resolves when that kernel is ready (or failed to start).
    pub fn spawn(
        runtime: &tokio::runtime::Handle,
        desc: SessionDesc,
        limits: Arc<Limits>,
    ) -> (SessionHandle, Created) {
        let (tx, rx) = mpsc::channel(COMMAND_BUFFER);
        let (created_tx, created_rx) = oneshot::channel();
        let (history_tx, history) = watch::channel(0);
        let handle = SessionHandle {
            id: desc.id.clone(),
            tx,
            desc: Arc::new(desc.clone()),
            history,
        };
        Actor::spawn(runtime, desc, limits, rx, created_tx, history_tx);
        (handle, created_rx)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the session is: its kernelspec, cwd and kernel launcher (fixed for its life).
    pub fn desc(&self) -> &SessionDesc {
        &self.desc
    }

    /// The span the session's actor logs in (see [`SessionDesc::span`]).
    pub fn span(&self) -> &tracing::Span {
        &self.desc.span
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
    /// Errors: `SESSION_DEAD`, `STATE_CHANGED`, `QUEUE_FULL`.
    pub async fn submit(&self, req: ExecuteRequest) -> Result<Submitted, SessionError> {
        self.call(|tx| Command::Submit(req, tx, None)).await?
    }

    /// [`Self::submit`], plus a receiver of the run's record once it settles (final or
    /// awaiting input). Errors: as `submit`.
    pub async fn submit_settled(
        &self,
        req: ExecuteRequest,
    ) -> Result<(Submitted, Settled), SessionError> {
        let (settled_tx, settled_rx) = oneshot::channel();
        let submitted = self
            .call(|tx| Command::Submit(req, tx, Some(settled_tx)))
            .await??;
        Ok((submitted, settled_rx))
    }

    /// The run's record now (every part bounded). Errors: `EXECUTION_NOT_FOUND`.
    pub async fn get_run(&self, run: &RunId) -> Result<ExecutionResult, SessionError> {
        self.call(|tx| Command::GetRun(run.clone(), tx))
            .await?
            .ok_or_else(|| SessionError::RunNotFound(run.to_string()))
    }

    /// A receiver of the run's status changes. Errors: `EXECUTION_NOT_FOUND`.
    pub async fn watch_run(&self, run: &RunId) -> Result<watch::Receiver<RunStatus>, SessionError> {
        self.call(|tx| Command::WatchRun(run.clone(), tx))
            .await?
            .ok_or_else(|| SessionError::RunNotFound(run.to_string()))
    }

    /// A page of one part of a run: bytes `[offset, offset + limit)` of its full text.
    /// Errors: `EXECUTION_NOT_FOUND`.
    pub async fn page(
        &self,
        run: &RunId,
        part: Part,
        offset: usize,
        limit: usize,
    ) -> Result<text::StreamPage, SessionError> {
        self.call(|reply| Command::Page {
            run: run.clone(),
            part,
            offset,
            limit,
            reply,
        })
        .await?
        .ok_or_else(|| SessionError::RunNotFound(run.to_string()))
    }

    /// The run's latest output line (or its status), for progress messages.
    pub async fn run_tail(&self, run: &RunId) -> Result<Option<String>, SessionError> {
        self.call(|tx| Command::RunTail(run.clone(), tx)).await
    }

    pub async fn info(&self) -> Result<SessionInfo, SessionError> {
        self.call(Command::Info).await
    }

    /// The session's language, from what its kernel reported.
    pub async fn language(&self) -> Result<language::Language, SessionError> {
        Ok(language::Language::from_name(&self.info().await?.language))
    }

    /// Interrupt the running run, if any; returns its id. Never restarts the kernel, and
    /// never interrupts another client's cell.
    pub async fn interrupt(&self) -> Result<(SessionInfo, Option<RunId>), SessionError> {
        let (info, run, _) = self.interrupt_explained().await?;
        Ok((info, run))
    }

    /// [`Self::interrupt`], plus a sentence when the kernel is in another client's cell,
    /// which is not interrupted: whose it is and what the caller can do.
    pub async fn interrupt_explained(
        &self,
    ) -> Result<(SessionInfo, Option<RunId>, Option<String>), SessionError> {
        self.call(Command::Interrupt).await
    }

    /// Interrupt whatever the kernel is running, for `by` (e.g. "a person through the Jupyter
    /// API"): the session's current run (as [`Self::interrupt`], its notices naming `by`), or
    /// else the kernel itself, for a cell another client of the kernel runs (a person's,
    /// through the Jupyter face). Never restarts the kernel.
    pub async fn interrupt_kernel(
        &self,
        by: &str,
    ) -> Result<(SessionInfo, Option<RunId>), SessionError> {
        let by = by.to_string();
        self.call(|tx| Command::InterruptKernel(by, tx)).await
    }

    /// True when an MCP client has worked in the session: a run (with or without a history
    /// entry), a request to the kernel (a checkpoint restored, a completion…), input
    /// answered, or work queued or running now. Reads and the Jupyter face's own calls do
    /// not count.
    pub async fn used_by_agents(&self) -> Result<bool, SessionError> {
        self.call(Command::UsedByAgents).await
    }

    /// Tell the session who the kernel client with Jupyter session id `session` is (what its
    /// notices call it). Best effort: dropped when the actor is busy.
    pub fn note_client(&self, session: &str, who: &str) {
        let _ = self.tx.try_send(Command::NoteClient {
            session: session.to_string(),
            who: who.to_string(),
        });
    }

    /// A receiver that changes whenever the history does (an entry added, a display updated,
    /// entries deleted or cleared); it closes when the session ends.
    pub fn history_changes(&self) -> watch::Receiver<u64> {
        self.history.clone()
    }

    /// Replace the kernel; answers once the new one is ready.
    pub async fn restart(&self, clear_history: bool) -> Result<SessionInfo, SessionError> {
        self.call(|reply| Command::Restart {
            clear_history,
            reply,
        })
        .await?
    }

    /// History entries `[start, end)` (Python slice semantics) with indices, and the total.
    pub async fn history(
        &self,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<(Vec<(usize, history::HistoryEntry)>, usize), SessionError> {
        self.call(|reply| Command::History { start, end, reply })
            .await
    }

    /// Delete history entries `[start, end)` (only `start` when `end` is `None`); returns
    /// how many. Errors: `INVALID_ARGUMENT` for an index that names no entry or an empty
    /// selection (nothing is deleted; the message gives the valid range).
    pub async fn delete_history(
        &self,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<usize, SessionError> {
        self.call(|reply| Command::DeleteHistory { start, end, reply })
            .await?
    }

    /// Send a shell request and wait up to `timeout` for its reply's content; while a run
    /// executes, as `busy` says (refused, or sent to the kernel's subshell).
    /// Errors: `SESSION_BUSY` (refused while a run executes, or no reply came in time),
    /// `SESSION_DEAD`, `LIMIT_EXCEEDED` (too many requests waiting).
    pub async fn request(
        &self,
        msg_type: &str,
        content: serde_json::Value,
        busy: WhileBusy,
        timeout: Duration,
    ) -> Result<serde_json::Value, SessionError> {
        self.call(|reply| Command::Request {
            msg_type: msg_type.to_string(),
            content,
            busy,
            timeout,
            reply,
        })
        .await?
    }

    /// Send the fork helper's request (a silent execute_request) to the idle kernel and hold
    /// every run until [`Self::end_fork`]; returns the reply's content.
    /// Errors: `SESSION_BUSY` while a run executes or another fork is taken, `SESSION_DEAD`.
    pub async fn fork_request(
        &self,
        content: serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, SessionError> {
        self.call(|reply| Command::Fork {
            content,
            timeout,
            reply,
        })
        .await?
    }

    /// The fork is taken (or failed): the held runs may start.
    pub async fn end_fork(&self) -> Result<(), SessionError> {
        self.call(Command::EndFork).await
    }

    /// Append `entries` to the session's history (journalled), e.g. a fork's copy of its
    /// source's.
    pub async fn seed_history(
        &self,
        entries: Vec<history::HistoryEntry>,
    ) -> Result<(), SessionError> {
        self.call(|reply| Command::SeedHistory(entries, reply))
            .await
    }

    /// Answer the run's `input()` prompt. Errors: `EXECUTION_NOT_FOUND`, `NOT_AWAITING_INPUT`.
    pub async fn send_input(
        &self,
        run: &RunId,
        value: String,
    ) -> Result<watch::Receiver<RunStatus>, SessionError> {
        self.call(|tx| Command::SendInput(run.clone(), value, tx))
            .await?
    }

    /// Remove a queued run, or interrupt a running one. Errors: `EXECUTION_NOT_FOUND`.
    pub async fn cancel(&self, run: &RunId) -> Result<(), SessionError> {
        self.call(|tx| Command::Cancel(run.clone(), tx)).await?
    }

    /// Set the idle expiry (`Some(None)`: never; `None`: keep it) and restart its clock.
    pub async fn renew(
        &self,
        after: Option<Option<Duration>>,
    ) -> Result<SessionInfo, SessionError> {
        self.call(|tx| Command::Renew(after, tx)).await
    }

    /// True when the session has been idle past its expiry (this check is not activity).
    pub async fn check_expired(&self) -> Result<bool, SessionError> {
        self.call(Command::CheckExpired).await
    }

    /// Cancel every queued run (the running one goes on); returns their ids.
    pub async fn clear_queue(&self) -> Result<Vec<RunId>, SessionError> {
        self.call(Command::ClearQueue).await
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
