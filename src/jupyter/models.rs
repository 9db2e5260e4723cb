//! The JSON the Jupyter face answers with, in the shapes of Jupyter Server's REST API
//! (<https://jupyter-server.readthedocs.io/en/latest/developers/rest-api.html>): kernel
//! models, kernelspec models, and errors as `{"message", "reason"}` with an HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::kernel::KernelSpec;
use crate::session::{ErrorCode, SessionError, SessionInfo, SessionStatus};

/// A kernel model: `id`, `name` (the kernelspec), `last_activity` (ISO 8601 with fractional
/// seconds and `Z`, as Jupyter Server's gateway client parses it), `execution_state`,
/// `connections` (the face's websockets open on it).
pub fn kernel(info: &SessionInfo, connections: usize) -> Value {
    json!({
        "id": info.kernel_id,
        "name": info.kernel,
        "last_activity": last_activity(&info.last_activity),
        "execution_state": execution_state(info.status),
        "connections": connections,
    })
}

/// Jupyter's word for a session status.
pub fn execution_state(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Starting => "starting",
        SessionStatus::Idle => "idle",
        SessionStatus::Busy | SessionStatus::AwaitingInput | SessionStatus::Unresponsive => "busy",
        SessionStatus::Restarting => "restarting",
        SessionStatus::Dead => "dead",
    }
}

/// An RFC 3339 time as `%Y-%m-%dT%H:%M:%S.%fZ` (UTC, microseconds), the one format Jupyter
/// Server's gateway client reads; a time that does not parse is now.
fn last_activity(rfc3339: &str) -> String {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|_| chrono::Utc::now());
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A kernelspec model: `name`, `spec` (argv, display_name, language, interrupt_mode,
/// metadata; `env` left out: its values may be secrets), `resources` (none served).
pub fn kernelspec(spec: &KernelSpec) -> Value {
    json!({
        "name": spec.name,
        "spec": {
            "argv": spec.argv,
            "display_name": spec.display_name,
            "language": spec.language,
            "interrupt_mode": match spec.interrupt_mode {
                crate::kernel::InterruptMode::Message => "message",
                crate::kernel::InterruptMode::Signal => "signal",
            },
            "env": {},
            "metadata": if spec.metadata.is_object() { spec.metadata.clone() } else { json!({}) },
        },
        "resources": {},
    })
}

pub use crate::ops::export::mirror::{
    SESSION_SPEC_PREFIX, session_display_name, session_spec_name,
};

/// The session a kernelspec name stands for, if it is a session's.
pub fn session_of_spec(name: &str) -> Option<&str> {
    name.strip_prefix(SESSION_SPEC_PREFIX)
        .filter(|id| !id.is_empty())
}

/// The kernelspec that stands for a running session: starting a kernel of it (`POST
/// /api/kernels`, what Jupyter Server does when a notebook picks it) attaches to that
/// session's kernel instead of starting one. Its display name says whose it is.
pub fn session_spec(info: &SessionInfo) -> Value {
    json!({
        "name": session_spec_name(&info.session_id),
        "spec": {
            "argv": [],
            "display_name": session_display_name(info),
            "language": info.language,
            "interrupt_mode": "message",
            "env": {},
            "metadata": {"kernel_mcp": {"session_id": info.session_id, "kernel_id": info.kernel_id}},
        },
        "resources": {},
    })
}

/// An error answer: `status` with `{"message", "reason"}`.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        json!({
            "message": message,
            "reason": status.canonical_reason().unwrap_or_default(),
        })
        .to_string(),
    )
        .into_response()
}

/// A JSON answer.
pub fn ok(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A session error as the HTTP status a Jupyter client understands, with its message.
pub fn session_error(e: &SessionError) -> Response {
    let status = match e.code() {
        ErrorCode::SessionNotFound | ErrorCode::SessionExpired => StatusCode::NOT_FOUND,
        ErrorCode::SessionAlreadyExists => StatusCode::CONFLICT,
        ErrorCode::InvalidArgument | ErrorCode::KernelNotFound => StatusCode::BAD_REQUEST,
        ErrorCode::Unsupported | ErrorCode::SandboxUnavailable => StatusCode::CONFLICT,
        ErrorCode::LimitExceeded | ErrorCode::QueueFull => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::GatewayUnavailable => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_activity_has_microseconds_and_z() {
        assert_eq!(
            last_activity("2026-12-01T10:20:30.123Z"),
            "2026-12-01T10:20:30.123000Z"
        );
        assert_eq!(
            last_activity("2026-12-01T11:20:30+01:00"),
            "2026-12-01T10:20:30.000000Z"
        );
        let now = last_activity("not a time");
        assert!(now.ends_with('Z') && now.contains('.'), "{now}");
    }
}
