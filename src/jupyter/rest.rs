//! The REST routes of the Jupyter face: kernelspecs and kernels, as Jupyter Server answers
//! them (see [`super::models`] for the shapes).
//!
//! - `GET /api/kernels` lists the named sessions, never an MCP connection's own `default`
//!   (see [`super::adapter`]).
//! - `POST /api/kernels` `{"name"?, "env"?, "metadata"?: {"session_id"?}}` starts a session
//!   named after its new kernel id (a UUID) unless `metadata.session_id` names it (not
//!   `default`: 400); the env's
//!   `KERNEL_WORKING_DIR` (what Jupyter Server sends for the notebook's directory) is its
//!   cwd when it is an existing directory. 201 with the kernel model.
//! - `DELETE /api/kernels/{id}`: 204 once the session is destroyed; 409, saying why, for an
//!   adopted kernel (kernel-mcp never ends a kernel it did not start) and for a session an
//!   agent uses or created (the agent's `destroy_session` ends it).
//! - `POST …/restart`: 200 with the model once the new kernel is ready (generation + 1, the
//!   state is gone, as `restart_session`); 409 for an adopted kernel.
//! - `POST …/interrupt`: 204; interrupts what the kernel runs (the agent's run, or a
//!   person's cell), never restarts it.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::adapter::{Found, Sessions, StartKernel};
use super::{Face, lock, models};
use crate::principal::Authenticated;
use crate::session::cmd;

/// The Jupyter Server REST API version the face speaks.
const API_VERSION: &str = "2.0.0";
/// The most of a request body read (bytes): a kernel start is a few hundred.
const MAX_BODY: usize = 64 * 1024;

/// `GET /api`.
pub async fn api() -> Response {
    models::ok(
        StatusCode::OK,
        json!({"version": API_VERSION, "kernel_mcp": env!("CARGO_PKG_VERSION")}),
    )
}

/// `GET /api/kernelspecs`: the local kernelspecs, and one for each session
/// ([`models::session_spec`]), so that a Jupyter client (JupyterLab's kernel picker) can
/// choose an agent's session as a notebook's kernel.
pub async fn kernelspecs(Seen { sessions, .. }: Seen) -> Response {
    let (specs, default) = sessions.kernelspecs();
    let mut map: serde_json::Map<String, Value> = specs
        .iter()
        .map(|s| (s.name.clone(), models::kernelspec(s)))
        .collect();
    for info in sessions.list().await {
        map.insert(
            models::session_spec_name(&info.session_id),
            models::session_spec(&info),
        );
    }
    models::ok(
        StatusCode::OK,
        json!({"default": default, "kernelspecs": map}),
    )
}

/// `GET /api/kernelspecs/{name}`.
pub async fn kernelspec(Seen { sessions, .. }: Seen, Path(name): Path<String>) -> Response {
    if let Some(id) = models::session_of_spec(&name) {
        if let Ok(h) = sessions.get(id)
            && let Ok(info) = h.call(cmd::Info).await
        {
            return models::ok(StatusCode::OK, models::session_spec(&info));
        }
        return models::error(StatusCode::NOT_FOUND, format!("No session '{id}'"));
    }
    let (specs, _) = sessions.kernelspecs();
    match specs.iter().find(|s| s.name == name) {
        Some(s) => models::ok(StatusCode::OK, models::kernelspec(s)),
        None => models::error(
            StatusCode::NOT_FOUND,
            format!("Kernel spec {name} not found"),
        ),
    }
}

/// `GET /api/kernels`: every session the face may show, as a running kernel.
pub async fn list(Seen { face, sessions }: Seen) -> Response {
    let kernels: Vec<Value> = sessions
        .list()
        .await
        .iter()
        .filter(|i| i.kernel_id.is_some())
        .map(|i| models::kernel(i, face.connections(i.kernel_id.as_deref().unwrap_or(""))))
        .collect();
    models::ok(StatusCode::OK, Value::Array(kernels))
}

/// `GET /api/kernels/{id}`.
pub async fn get(
    Kernel {
        face, id, found, ..
    }: Kernel,
) -> Response {
    models::ok(
        StatusCode::OK,
        models::kernel(&found.info, face.connections(&id)),
    )
}

/// `POST /api/kernels`.
pub async fn start(Seen { face, sessions }: Seen, body: Bytes) -> Response {
    if body.len() > MAX_BODY {
        return models::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request body is over {MAX_BODY} bytes."),
        );
    }
    let req: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return models::error(
                    StatusCode::BAD_REQUEST,
                    "The body must be a JSON object such as {\"name\": \"python3\"}.",
                );
            }
        }
    };
    let start = match start_request(&req) {
        Ok(s) => s,
        Err(why) => return models::error(StatusCode::BAD_REQUEST, why.to_string()),
    };
    // A session's own kernelspec: the notebook attaches to that session's running kernel.
    if let Some(id) = start.kernel.as_deref().and_then(models::session_of_spec) {
        return match sessions.get(id) {
            Ok(h) => match h.call(cmd::Info).await {
                Ok(info) => {
                    tracing::info!(session = %id, "a Jupyter client attached to the session through its kernelspec");
                    let id = info.kernel_id.clone().unwrap_or_default();
                    models::ok(
                        StatusCode::CREATED,
                        models::kernel(&info, face.connections(&id)),
                    )
                }
                Err(e) => models::session_error(&e),
            },
            Err(e) => models::session_error(&e),
        };
    }
    let kernel_id = start.kernel_id.clone();
    match sessions.start(start).await {
        Ok(info) => {
            lock(&face.started).insert(kernel_id.clone());
            tracing::info!(session = %info.session_id, kernel_id = %kernel_id, "kernel started through the Jupyter API");
            let mut r = models::ok(StatusCode::CREATED, models::kernel(&info, 0));
            if let Ok(v) = header::HeaderValue::from_str(&format!("/api/kernels/{kernel_id}")) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        Err(e) => models::session_error(&e),
    }
}

/// Why a `POST /api/kernels` body names no session to start (a 400's message).
#[derive(Debug, thiserror::Error)]
enum BadStart {
    #[error("`name` must be a kernelspec name.")]
    Name,
    #[error("`metadata.session_id` must be a session name.")]
    SessionId,
    #[error("{0:?} in `env` is not an environment variable name.")]
    EnvName(String),
    #[error("`env`: {0}")]
    Env(String),
}

/// The session to start for a `POST /api/kernels` body.
fn start_request(req: &Value) -> Result<StartKernel, BadStart> {
    let kernel = match &req["name"] {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        _ => return Err(BadStart::Name),
    };
    let session_id = match &req["metadata"]["session_id"] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        _ => return Err(BadStart::SessionId),
    };
    let mut env = BTreeMap::new();
    if let Some(map) = req["env"].as_object() {
        for (k, v) in map {
            if let Some(v) = v.as_str() {
                env.insert(k.clone(), v.to_string());
            } else if k.is_empty() || k.contains(['=', '\0']) {
                return Err(BadStart::EnvName(k.clone()));
            }
        }
        if let Some(problem) = crate::kernel::env_problem(&env) {
            return Err(BadStart::Env(problem));
        }
    }
    let cwd = env
        .get("KERNEL_WORKING_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    Ok(StartKernel {
        session_id,
        kernel,
        cwd,
        env,
        kernel_id: uuid::Uuid::new_v4().to_string(),
    })
}

/// `DELETE /api/kernels/{id}`.
pub async fn delete(
    Kernel {
        face,
        sessions,
        id,
        found,
    }: Kernel,
) -> Response {
    if let Some(why) = refuse_delete(&face, &sessions, &found).await {
        tracing::info!(session = %found.info.session_id, kernel_id = %id, "refused a Jupyter DELETE: {why}");
        return models::error(StatusCode::CONFLICT, why);
    }
    match sessions.destroy(&found.info.session_id).await {
        Ok(()) => {
            lock(&face.started).remove(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => models::session_error(&e),
    }
}

/// Why `DELETE` may not end this session, if it may not (docs/jupyter.md, "What the API may do
/// to a session").
async fn refuse_delete(face: &Face, sessions: &Sessions, found: &Found) -> Option<String> {
    let name = &found.info.session_id;
    if found.info.attached {
        return Some(format!(
            "Session '{name}' drives a kernel someone else started; kernel-mcp never shuts down a kernel it did not start. Stop it where it was started."
        ));
    }
    if !face.started_here(found.info.kernel_id.as_deref().unwrap_or("")) {
        return Some(format!(
            "Session '{name}' belongs to an MCP client (an agent created it); it keeps running. The agent ends it with destroy_session, or `kernel-mcp session destroy -s {name}`."
        ));
    }
    if sessions.used_by_agents(found).await {
        return Some(format!(
            "Session '{name}' is in use by another client (an agent has worked in it: run code, restored a checkpoint, or has work queued); it keeps running. End it with destroy_session, or `kernel-mcp session destroy -s {name}`."
        ));
    }
    None
}

/// `POST /api/kernels/{id}/interrupt`.
pub async fn interrupt(Kernel { found, .. }: Kernel) -> Response {
    match found
        .handle
        .call(cmd::InterruptKernel {
            by: super::PERSON.into(),
        })
        .await
    {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => models::session_error(&e),
    }
}

/// `POST /api/kernels/{id}/restart`.
pub async fn restart(
    Kernel {
        face, id, found, ..
    }: Kernel,
) -> Response {
    if found.info.attached {
        return models::error(
            StatusCode::CONFLICT,
            format!(
                "Session '{}' drives a kernel someone else started; kernel-mcp never restarts a kernel it did not start.",
                found.info.session_id
            ),
        );
    }
    tracing::info!(session = %found.info.session_id, kernel_id = %id, "restart through the Jupyter API");
    match found
        .handle
        .call(cmd::Restart {
            clear_history: false,
        })
        .await
    {
        Ok(info) => {
            let _ = face.restarted.send(id.clone());
            models::ok(StatusCode::OK, models::kernel(&info, face.connections(&id)))
        }
        Err(e) => models::session_error(&e),
    }
}

/// What every handler starts from: the face, and the sessions the request's principal sees
/// ([`Sessions::of`]; a request no face stamped with a principal is the owner's).
pub struct Seen {
    pub face: Arc<Face>,
    pub sessions: Sessions,
}

impl FromRequestParts<Arc<Face>> for Seen {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, face: &Arc<Face>) -> Result<Seen, Infallible> {
        Ok(Seen::of(parts, face))
    }
}

impl Seen {
    fn of(parts: &Parts, face: &Arc<Face>) -> Seen {
        let sessions = face.sessions.of(parts.extensions.get::<Authenticated>());
        Seen {
            face: face.clone(),
            sessions,
        }
    }
}

/// The kernel a `/api/kernels/{id}` route names, among the sessions the request's principal
/// sees; there being none is the 404 [`no_kernel`].
pub struct Kernel {
    pub face: Arc<Face>,
    pub sessions: Sessions,
    /// The kernel id from the path.
    pub id: String,
    pub found: Found,
}

impl FromRequestParts<Arc<Face>> for Kernel {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, face: &Arc<Face>) -> Result<Kernel, Response> {
        let Path(id) = Path::<String>::from_request_parts(parts, face)
            .await
            .map_err(IntoResponse::into_response)?;
        let Seen { face, sessions } = Seen::of(parts, face);
        let Some(found) = sessions.by_kernel(&id).await else {
            return Err(no_kernel(&id));
        };
        Ok(Kernel {
            face,
            sessions,
            id,
            found,
        })
    }
}

/// The 404 of a kernel id that names no session the request's principal sees.
pub fn no_kernel(id: &str) -> Response {
    models::error(
        StatusCode::NOT_FOUND,
        format!("Kernel does not exist: {id}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_request_names_the_session_after_the_kernel_unless_metadata_names_it() {
        let s = start_request(&json!({"name": "python3"})).unwrap();
        assert_eq!(s.kernel.as_deref(), Some("python3"));
        assert_eq!(s.session_id, None);
        assert_eq!(s.kernel_id.len(), 36);
        let s = start_request(&json!({"metadata": {"session_id": "mine"}})).unwrap();
        assert_eq!(s.session_id.as_deref(), Some("mine"));
        assert_eq!(s.kernel, None);
        let dir = std::env::temp_dir();
        let s = start_request(&json!({"env": {"KERNEL_WORKING_DIR": dir, "X": 1}})).unwrap();
        assert_eq!(s.cwd.as_deref(), Some(dir.as_path()));
        assert!(!s.env.contains_key("X"), "non-strings are left out");
        assert!(start_request(&json!({"name": 3})).is_err());
        assert!(start_request(&json!({"env": {"A=B": "1"}})).is_err());
        let none = start_request(&json!({"env": {"KERNEL_WORKING_DIR": "/no/such/dir"}}));
        assert_eq!(none.unwrap().cwd, None);
    }
}
