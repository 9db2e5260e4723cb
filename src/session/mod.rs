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

use actor::Actor;
use actor::cmd::{Answer, Command, SessionCommand};
pub use actor::{
    ExecuteRequest, Follows, MAX_SIDE_RUNS, SIDE_RUN_TIMEOUT, SessionDesc, Settled, Started,
    Submitted, WhileBusy, cmd,
};
pub use error::{ErrorCode, SessionError, StartFailure};
pub use ids::RunId;
pub use run::Part;
pub use text::{StreamPage, clean_text};
pub use types::{ExecutionResult, RunStatus, SessionInfo, SessionStatus};

use crate::config::Limits;

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

    /// Send `cmd` to the session's actor and wait for its answer (see [`cmd`] for the
    /// commands, each with its answer and errors). Errors: `SESSION_NOT_FOUND` once the
    /// session is gone, and the command's own.
    pub async fn call<C>(&self, cmd: C) -> Result<C::Output, SessionError>
    where
        C: SessionCommand,
        Command: From<(C, Answer<C>)>,
    {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((cmd, tx).into())
            .await
            .map_err(|_| SessionError::gone(&self.id))?;
        rx.await.map_err(|_| SessionError::gone(&self.id))?
    }

    /// Send `cmd` without waiting for its answer; best effort: dropped when the actor's queue
    /// is full or the session is gone (e.g. [`cmd::NoteClient`]).
    pub fn tell<C>(&self, cmd: C)
    where
        C: SessionCommand,
        Command: From<(C, Answer<C>)>,
    {
        let (tx, _) = oneshot::channel();
        let _ = self.tx.try_send((cmd, tx).into());
    }

    /// A receiver that changes whenever the history does (an entry added, a display updated,
    /// entries deleted or cleared); it closes when the session ends.
    pub fn history_changes(&self) -> watch::Receiver<u64> {
        self.history.clone()
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
