//! What callers send the session actor: a validated [`ExecuteRequest`], the [`Command`]s
//! (each with the oneshot its answer goes back on), and what a submitted run hands back.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::kernel::ShutdownRung;
use crate::session::error::SessionError;
use crate::session::history::HistoryEntry;
use crate::session::ids::RunId;
use crate::session::run::Part;
use crate::session::text::StreamPage;
use crate::session::types::{ExecutionResult, RunStatus, SessionInfo};

/// A validated execute request.
#[derive(Debug, Clone)]
pub struct ExecuteRequest {
    pub run_id: RunId,
    pub code: String,
    pub store_history: bool,
    pub timeout: Option<Duration>,
    /// Longest wait before the code starts executing (behind the session's queue or another
    /// client's cell); past it the run ends `cancelled`. `None`: no limit.
    pub queue_timeout: Option<Duration>,
    pub stdin: Vec<String>,
    pub expected_generation: Option<u64>,
    /// Sentences the run's result carries from the start (e.g. how a file reached a remote
    /// kernel).
    pub notices: Vec<String>,
    /// Run beside the queue on a kernel subshell (never queued, never in history; see
    /// `actor/subshell.rs`).
    pub subshell: bool,
    /// The span the run's spans are children of: the request's that submitted it (see
    /// [`crate::telemetry::RunTrace`]); by default the span current where it was made.
    pub trace: tracing::Span,
}

impl ExecuteRequest {
    /// A request for `code` with the defaults (stored in history, no timeout, no input).
    pub fn new(code: impl Into<String>) -> ExecuteRequest {
        ExecuteRequest {
            run_id: RunId::new(),
            code: code.into(),
            store_history: true,
            timeout: None,
            queue_timeout: None,
            stdin: Vec::new(),
            expected_generation: None,
            notices: Vec::new(),
            subshell: false,
            trace: tracing::Span::current(),
        }
    }
}

/// What a shell request does while a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhileBusy {
    /// Fail with `SESSION_BUSY`.
    Refuse,
    /// Go to the kernel's subshell (created on first need); `SESSION_BUSY` where the kernel
    /// has none.
    Subshell,
}

/// What a submitted run gives back: its id and a receiver of its status changes.
pub type Submitted = (RunId, watch::Receiver<RunStatus>);

/// Receives a run's record once it settles (final, or awaiting input): one handoff from the
/// actor to the waiting caller, where watching the status and then asking for the record took
/// three. Dropped without a value when the run is gone before it settles.
pub type Settled = oneshot::Receiver<ExecutionResult>;

pub(super) type Reply<T> = oneshot::Sender<T>;

/// Commands to the actor; each carries its reply channel.
pub enum Command {
    /// Queue a run; with a sender, also deliver its record once it settles.
    Submit(
        ExecuteRequest,
        Reply<Result<Submitted, SessionError>>,
        Option<Reply<ExecutionResult>>,
    ),
    GetRun(RunId, Reply<Option<ExecutionResult>>),
    WatchRun(RunId, Reply<Option<watch::Receiver<RunStatus>>>),
    /// A page of one part of a run (stdout, stderr, result, traceback).
    Page {
        run: RunId,
        part: Part,
        offset: usize,
        limit: usize,
        reply: Reply<Option<StreamPage>>,
    },
    RunTail(RunId, Reply<Option<String>>),
    Info(Reply<SessionInfo>),
    /// Interrupt the current run; replies with the session, that run's id, and a notice when
    /// the kernel is in another client's cell, which is not interrupted (see `foreign.rs`).
    Interrupt(Reply<(SessionInfo, Option<RunId>, Option<String>)>),
    Restart {
        clear_history: bool,
        reply: Reply<Result<SessionInfo, SessionError>>,
    },
    SendInput(
        RunId,
        String,
        Reply<Result<watch::Receiver<RunStatus>, SessionError>>,
    ),
    Cancel(RunId, Reply<Result<(), SessionError>>),
    Destroy(Reply<ShutdownRung>),
    /// Entries `[start, end)` (Python slice) with their indices, and the total count.
    History {
        start: Option<i64>,
        end: Option<i64>,
        reply: Reply<(Vec<(usize, HistoryEntry)>, usize)>,
    },
    /// Set the idle expiry (`Some(None)`: never; `None`: keep it) and restart its clock.
    Renew(Option<Option<Duration>>, Reply<SessionInfo>),
    /// True when the session has been idle for its whole expiry (not counted as activity).
    CheckExpired(Reply<bool>),
    /// Cancel every queued run (not the running one); replies with their ids.
    ClearQueue(Reply<Vec<RunId>>),
    /// Send the fork helper's request (`content`, a silent execute_request) to the idle main
    /// shell and hold every run until [`Command::EndFork`] (see `fork.rs`).
    Fork {
        content: Value,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
    },
    /// The fork is taken (or failed): runs may start again.
    EndFork(Reply<()>),
    /// Append entries to the history (a fork's copy of its source's), journalled.
    SeedHistory(Vec<HistoryEntry>, Reply<()>),
    /// Interrupt whatever the kernel runs, for the client named first (e.g. "a person through
    /// the Jupyter API"): the current run as [`Command::Interrupt`] does, its notices naming
    /// who, else the kernel itself (another client's cell, e.g. a person's in Jupyter).
    InterruptKernel(String, Reply<(SessionInfo, Option<RunId>)>),
    /// True when an MCP client has worked in the session (runs, requests, queued or running
    /// work), whether or not it left history.
    UsedByAgents(Reply<bool>),
    /// A face names the client with this Jupyter session id (see `foreign.rs`).
    NoteClient {
        session: String,
        who: String,
    },
    /// Delete entries `[start, end)` (only `start` when `end` is `None`); replies with the
    /// count, or `INVALID_ARGUMENT` for indices that name no entry (nothing deleted).
    DeleteHistory {
        start: Option<i64>,
        end: Option<i64>,
        reply: Reply<Result<usize, SessionError>>,
    },
    /// A shell request (`complete_request`, `inspect_request`, a silent `execute_request`…)
    /// answered with the reply's content, or an error at `timeout`; while a run executes, as
    /// `busy` says.
    Request {
        msg_type: String,
        content: Value,
        busy: WhileBusy,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
    },
}
