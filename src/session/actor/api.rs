//! What callers hand the session actor besides its commands (`cmd/`): a validated
//! [`ExecuteRequest`], what a shell request does while a run executes, and what a submitted
//! run hands back.

use std::time::Duration;

use tokio::sync::{oneshot, watch};

use crate::session::ids::RunId;
use crate::session::types::{ExecutionResult, RunStatus};

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
    /// The run, queued before it, this one follows as the next step of one piece of work (a
    /// notebook batch queues its next cell this way while the cell before it runs, so the
    /// kernel goes from one cell to the next without waiting on the batch). A follower
    /// outlives a restart or a kernel's death before it starts, as the batch's next request
    /// would: it runs in the new kernel.
    pub follows: Option<Follows>,
}

/// What a queued run follows: [`ExecuteRequest::follows`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follows {
    pub run: RunId,
    /// Run only if `run` ended `ok`; otherwise end `cancelled` without running (a batch with
    /// `stop_on_error`).
    pub only_if_ok: bool,
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
            follows: None,
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
