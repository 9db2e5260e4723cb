//! What can go wrong in a session call, as a typed enum with the contract's codes
//! ([`ErrorCode`], docs/tools.md "Errors") and structured details. The messages state the facts
//! in the session's own words; what to do next in terms of MCP tools is added at the edge
//! (`mcp/error.rs`), so the CLI and other front ends can give their own advice.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use super::ids::RunId;
use crate::kernel::StartError;
use crate::kernel::remote::GatewayError;

/// Machine-readable error code (serialized as `SESSION_NOT_FOUND` etc.).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    SessionNotFound,
    SessionAlreadyExists,
    SessionBusy,
    SessionDead,
    QueueFull,
    KernelNotFound,
    KernelStartFailed,
    StateChanged,
    ExecutionNotFound,
    NotAwaitingInput,
    Unsupported,
    InvalidArgument,
    LimitExceeded,
    IoError,
    InternalError,
    SessionExpired,
    GatewayUnavailable,
    Unauthorized,
    SandboxUnavailable,
    NotebookInvalid,
    NotebookConflict,
    ArtifactNotFound,
}

impl ErrorCode {
    /// The contract's string, e.g. `"SESSION_NOT_FOUND"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::SessionAlreadyExists => "SESSION_ALREADY_EXISTS",
            ErrorCode::SessionBusy => "SESSION_BUSY",
            ErrorCode::SessionDead => "SESSION_DEAD",
            ErrorCode::QueueFull => "QUEUE_FULL",
            ErrorCode::KernelNotFound => "KERNEL_NOT_FOUND",
            ErrorCode::KernelStartFailed => "KERNEL_START_FAILED",
            ErrorCode::StateChanged => "STATE_CHANGED",
            ErrorCode::ExecutionNotFound => "EXECUTION_NOT_FOUND",
            ErrorCode::NotAwaitingInput => "NOT_AWAITING_INPUT",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::LimitExceeded => "LIMIT_EXCEEDED",
            ErrorCode::IoError => "IO_ERROR",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::SessionExpired => "SESSION_EXPIRED",
            ErrorCode::GatewayUnavailable => "GATEWAY_UNAVAILABLE",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            ErrorCode::NotebookInvalid => "NOTEBOOK_INVALID",
            ErrorCode::NotebookConflict => "NOTEBOOK_CONFLICT",
            ErrorCode::ArtifactNotFound => "ARTIFACT_NOT_FOUND",
        }
    }
}

/// An error from a session or the registry.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    /// No live session has this id (and, for history, no journal either).
    #[error("Session '{id}' not found.{}", if *.journal_checked { " No history journal for it was found either." } else { "" })]
    NotFound {
        id: String,
        /// The live sessions, sorted.
        known: Vec<String>,
        journal_checked: bool,
    },
    /// The session's actor ended while the call was in flight (it was destroyed).
    #[error("Session '{0}' was destroyed.")]
    Gone(String),
    /// The session expired after being idle; its kernel was shut down. Its history stays
    /// readable from the journal.
    #[error(
        "Session '{id}' expired at {expired_at} after being idle, and its kernel was shut down."
    )]
    Expired { id: String, expired_at: String },
    #[error("Session '{0}' already exists.")]
    AlreadyExists(String),
    /// A request that needs an idle kernel arrived while a run executes.
    #[error("Session '{session}' is running {run}.")]
    Busy { session: String, run: RunId },
    /// A fork of the session's kernel is being taken (its runs wait meanwhile).
    #[error("Session '{session}' is being forked; try again in a moment.")]
    Forking { session: String },
    /// The kernel did not answer a shell request in time.
    #[error("The kernel did not answer {msg_type} within {timeout_s} s (it may be busy).")]
    NoReply { msg_type: String, timeout_s: u64 },
    /// The kernel was replaced before it answered.
    #[error("The kernel was replaced before it answered {msg_type}.")]
    Replaced { msg_type: String },
    /// The session has no kernel right now (its start failed, or it is being replaced).
    #[error("Session '{session}' has no running kernel ({why}).")]
    Dead { session: String, why: String },
    #[error("Session '{session}' already has {waiting} runs waiting.")]
    QueueFull { session: String, waiting: usize },
    #[error("{message}")]
    KernelNotFound { message: String, details: Value },
    #[error("{0}")]
    KernelStartFailed(StartFailure),
    /// No environment is registered under this name.
    #[error("Environment '{name}' is not registered. {}", if known.is_empty() { "No environments are registered.".to_string() } else { format!("Registered: {}.", known.join(", ")) })]
    EnvironmentNotFound { name: String, known: Vec<String> },
    /// An interpreter that does not run (as asked to register, or found when validating).
    #[error("{message}")]
    PythonUnusable { python: String, message: String },
    /// `expected_generation` does not match.
    #[error(
        "Session '{session}' is at generation {generation}, not {expected}: its kernel was replaced and earlier state is gone."
    )]
    StateChanged {
        session: String,
        generation: u64,
        expected: u64,
    },
    /// No session knows this run (never existed, or forgotten).
    #[error("Run '{0}' not found (finished runs are kept for a while, then forgotten).")]
    RunNotFound(String),
    /// `get_history(run_id)` for a run the history does not hold.
    #[error(
        "Run '{run}' is not in the history of session '{session}' ({total} entries): runs with store_history=false, runs of other sessions and deleted entries are not there."
    )]
    RunNotInHistory {
        run: String,
        session: String,
        total: usize,
    },
    #[error("Run '{run}' is {status} and not waiting for input.")]
    NotAwaitingInput { run: RunId, status: &'static str },
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    LimitExceeded(String),
    /// A file could not be read or written.
    #[error("{message}")]
    Io { path: String, message: String },
    #[error("{0}")]
    Internal(String),
    /// A configured Jupyter server or gateway cannot be reached.
    #[error("{message}")]
    GatewayUnavailable { gateway: String, message: String },
    /// A gateway refused our token.
    #[error("{message}")]
    Unauthorized { gateway: String, message: String },
    /// The session's sandbox cannot be enforced (docs/sandbox.md): never started less
    /// sandboxed.
    #[error("{0}")]
    SandboxUnavailable(crate::kernel::SandboxUnavailable),
}

/// Why a session's kernel did not start (`KERNEL_START_FAILED`), as the part that saw it says.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StartFailure {
    /// The kernel `kernel` (the session's kernelspec) did not start.
    #[error("{error}")]
    Kernel {
        kernel: String,
        error: Arc<StartError>,
    },
    /// The fork of session `forked_from` (a kernel of `kernel`) did not come up.
    #[error("The fork of session '{forked_from}' did not come up: {error}")]
    Fork {
        kernel: String,
        forked_from: String,
        error: Arc<StartError>,
    },
    /// The gateway `gateway` answered the start with an error.
    #[error("{error}")]
    Gateway {
        gateway: String,
        error: GatewayError,
    },
    /// The interpreter `python` cannot import ipykernel; the message gives the install command
    /// (and uv's, when `has_uv`).
    #[error("{}", crate::kernel::advice::missing_ipykernel(.python, *.has_uv))]
    NoIpykernel { python: PathBuf, has_uv: bool },
}

impl StartFailure {
    /// The error's `details`: the kernelspec (and the forked session), the gateway, or the
    /// interpreter and its install command.
    pub fn details(&self) -> Value {
        match self {
            StartFailure::Kernel { kernel, .. } => json!({"kernel": kernel}),
            StartFailure::Fork {
                kernel,
                forked_from,
                ..
            } => json!({"kernel": kernel, "forked_from": forked_from}),
            StartFailure::Gateway { gateway, .. } => json!({"gateway": gateway}),
            StartFailure::NoIpykernel { python, .. } => json!({
                "python": python,
                "install_command": crate::kernel::advice::install_command(python),
            }),
        }
    }
}

impl SessionError {
    /// The contract's code for this error.
    pub fn code(&self) -> ErrorCode {
        use SessionError as E;
        match self {
            E::NotFound { .. } | E::Gone(_) => ErrorCode::SessionNotFound,
            E::AlreadyExists(_) => ErrorCode::SessionAlreadyExists,
            E::Expired { .. } => ErrorCode::SessionExpired,
            E::Busy { .. } | E::NoReply { .. } | E::Replaced { .. } | E::Forking { .. } => {
                ErrorCode::SessionBusy
            }
            E::Dead { .. } => ErrorCode::SessionDead,
            E::QueueFull { .. } => ErrorCode::QueueFull,
            E::KernelNotFound { .. } => ErrorCode::KernelNotFound,
            E::KernelStartFailed(_) => ErrorCode::KernelStartFailed,
            E::EnvironmentNotFound { .. } => ErrorCode::KernelNotFound,
            E::PythonUnusable { .. } => ErrorCode::InvalidArgument,
            E::StateChanged { .. } => ErrorCode::StateChanged,
            E::RunNotFound(_) | E::RunNotInHistory { .. } => ErrorCode::ExecutionNotFound,
            E::NotAwaitingInput { .. } => ErrorCode::NotAwaitingInput,
            E::Unsupported(_) => ErrorCode::Unsupported,
            E::InvalidArgument(_) => ErrorCode::InvalidArgument,
            E::LimitExceeded(_) => ErrorCode::LimitExceeded,
            E::Io { .. } => ErrorCode::IoError,
            E::Internal(_) => ErrorCode::InternalError,
            E::GatewayUnavailable { .. } => ErrorCode::GatewayUnavailable,
            E::Unauthorized { .. } => ErrorCode::Unauthorized,
            E::SandboxUnavailable(_) => ErrorCode::SandboxUnavailable,
        }
    }

    /// Structured details for the caller (`null` when there are none).
    pub fn details(&self) -> Value {
        use SessionError as E;
        match self {
            E::NotFound { id, known, .. } => json!({"session_id": id, "sessions": known}),
            E::Gone(id) | E::AlreadyExists(id) => json!({"session_id": id}),
            E::Forking { session } => json!({"session_id": session}),
            E::Expired { id, expired_at } => json!({"session_id": id, "expired_at": expired_at}),
            E::Busy { session, run } => json!({"session_id": session, "run_id": run}),
            E::QueueFull { session, waiting } => {
                json!({"session_id": session, "queue_length": waiting})
            }
            E::KernelNotFound { details, .. } => details.clone(),
            E::KernelStartFailed(failure) => failure.details(),
            E::StateChanged {
                generation,
                expected,
                ..
            } => json!({"generation": generation, "expected_generation": expected}),
            E::EnvironmentNotFound { name, known } => {
                json!({"environment": name, "environments": known})
            }
            E::PythonUnusable { python, .. } => json!({"python": python}),
            E::RunNotFound(run) => json!({"run_id": run}),
            E::RunNotInHistory {
                run,
                session,
                total,
            } => json!({"run_id": run, "session_id": session, "history_count": total}),
            E::NotAwaitingInput { run, status } => json!({"run_id": run, "status": status}),
            E::Io { path, .. } => json!({"path": path}),
            E::GatewayUnavailable { gateway, .. } | E::Unauthorized { gateway, .. } => {
                json!({"gateway": gateway})
            }
            E::SandboxUnavailable(e) => json!({
                "sandbox": e.sandbox.policy,
                "sandbox_network": e.sandbox.network,
                "missing": e.missing,
                "host": crate::kernel::sandbox::HostSupport::current(),
            }),
            _ => Value::Null,
        }
    }

    /// The session's actor is gone (destroyed meanwhile).
    pub(crate) fn gone(id: &str) -> SessionError {
        SessionError::Gone(id.to_string())
    }

    pub(crate) fn io(path: &std::path::Path, message: impl Into<String>) -> SessionError {
        SessionError::Io {
            path: path.display().to_string(),
            message: message.into(),
        }
    }
}
