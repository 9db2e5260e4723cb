//! Errors a caller can act on, with the contract's codes (DESIGN §4 "Errors").

use serde::Serialize;
use serde_json::Value;

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
}

/// An error with its code, a message that says what to do next, and structured details.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SessionError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Value,
}

impl SessionError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> SessionError {
        SessionError {
            code,
            message: message.into(),
            details: Value::Null,
        }
    }

    pub fn with_details(mut self, details: Value) -> SessionError {
        self.details = details;
        self
    }

    pub fn session_not_found(id: &str, known: &[String]) -> SessionError {
        let hint = if known.is_empty() {
            "There are no sessions; create one with create_session (or call execute without session_id for the default session).".to_string()
        } else {
            format!("Existing sessions: {}.", known.join(", "))
        };
        SessionError::new(
            ErrorCode::SessionNotFound,
            format!("Session '{id}' not found. {hint}"),
        )
        .with_details(serde_json::json!({"session_id": id, "sessions": known}))
    }

    /// The session's actor is gone (destroyed meanwhile).
    pub fn gone(id: &str) -> SessionError {
        SessionError::new(
            ErrorCode::SessionNotFound,
            format!("Session '{id}' was destroyed. Create a new one with create_session."),
        )
    }
}
