//! The Jupyter face of `kernel-mcp service --http` (docs/jupyter.md): the Jupyter Server
//! kernels API, so that Jupyter's own clients reach the agent's sessions — Jupyter Server as a
//! gateway client (`jupyter lab --gateway-url …`), VS Code's "existing Jupyter server",
//! nbclient through a gateway kernel manager.
//!
//! Routes, next to `/mcp` on the same listener and behind the same authentication
//! ([`crate::auth`]: the static token or, when configured, an OAuth access token, presented as
//! `Authorization: token …`, `Authorization: Bearer …` or `?token=`; without one every route
//! answers 401 and a websocket is refused before it upgrades; a foreign `Host` or browser
//! `Origin` answers 403). Under OAuth, `GET` routes need the read scope and everything else,
//! the channels websocket included, the execute scope ([`need`]).
//! - `GET /api` — the API version;
//! - `GET /api/kernelspecs`, `GET /api/kernelspecs/{name}` — the local kernelspecs ([`rest`]);
//! - `GET|POST /api/kernels`, `GET|DELETE /api/kernels/{id}`, `POST …/interrupt`,
//!   `POST …/restart` — every session is a running kernel (its id is the session's
//!   `kernel_id`), a kernel started here is a session agents list ([`rest`]);
//! - `GET /api/kernels/{id}/channels` — the channels websocket, `v1.kernel.websocket.jupyter.org`
//!   or JSON framing, relayed to the kernel over a connection of its own ([`channels`],
//!   [`link`]).
//!
//! The face reaches the registry only through [`adapter`]. What the API does to a session
//! follows the session's rules: an adopted kernel is never restarted or deleted, and a
//! session an agent uses (or that an agent created) is not deleted from here (409, saying
//! so): `destroy_session` ends it.

pub mod adapter;
pub mod channels;
pub mod link;
pub mod models;
pub mod rest;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};

use crate::auth::{Face as AuthFace, Gate, HttpAccess, Need, Presentation};
use crate::principal::Access;
use crate::registry::Registry;

/// The ways the Jupyter face accepts its token: Jupyter's clients send `Authorization:
/// token …` (Jupyter Server's gateway client) or `?token=` (browsers, websockets), MCP's
/// `Bearer` works too.
pub const JUPYTER_PRESENTATIONS: &[Presentation] = &[
    Presentation::JupyterHeader,
    Presentation::Bearer,
    Presentation::Query,
];

/// Who a client of the face is, in a session's notices (an interrupt, a cell the agent's run
/// waited for).
pub const PERSON: &str = "a person through the Jupyter API";

/// Websockets open on the face at once; one more is answered 503.
pub const MAX_CONNECTIONS: usize = 64;

/// The face's state, shared by its handlers.
pub struct Face {
    pub sessions: adapter::Sessions,
    /// Kernel ids of the sessions started through `POST /api/kernels`.
    started: Mutex<HashSet<String>>,
    /// Open websockets per kernel id.
    connections: Mutex<HashMap<String, usize>>,
    /// Tells each relay of a kernel that the face restarted it (the kernel id).
    restarted: tokio::sync::broadcast::Sender<String>,
}

impl Face {
    /// The face of `registry`.
    pub fn new(registry: Arc<Registry>) -> Arc<Face> {
        Arc::new(Face {
            sessions: adapter::Sessions::new(registry),
            started: Mutex::default(),
            connections: Mutex::default(),
            restarted: tokio::sync::broadcast::channel(16).0,
        })
    }

    /// Websockets open on kernel `id`.
    pub fn connections(&self, id: &str) -> usize {
        lock(&self.connections).get(id).copied().unwrap_or(0)
    }

    /// Count a websocket on kernel `id` open, unless [`MAX_CONNECTIONS`] are.
    fn connect(&self, id: &str) -> bool {
        let mut c = lock(&self.connections);
        if c.values().sum::<usize>() >= MAX_CONNECTIONS {
            return false;
        }
        *c.entry(id.to_string()).or_default() += 1;
        true
    }

    /// A websocket on kernel `id` closed.
    fn disconnect(&self, id: &str) {
        let mut c = lock(&self.connections);
        if let Some(n) = c.get_mut(id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.remove(id);
            }
        }
    }

    fn started_here(&self, id: &str) -> bool {
        lock(&self.started).contains(id)
    }
}

/// The face's routes, behind `access` (tokens in [`JUPYTER_PRESENTATIONS`]).
pub fn router(face: Arc<Face>, access: HttpAccess) -> axum::Router {
    let access = access.with_presentations(JUPYTER_PRESENTATIONS);
    let gate = Gate {
        access: access.clone(),
        need: Need::Route(need),
        face: JUPYTER_FACE,
    };
    axum::Router::new()
        .route("/api", get(rest::api))
        .route("/api/", get(rest::api))
        .route("/api/kernelspecs", get(rest::kernelspecs))
        .route("/api/kernelspecs/{name}", get(rest::kernelspec))
        .route("/api/kernels", get(rest::list).post(rest::start))
        .route("/api/kernels/{id}", get(rest::get).delete(rest::delete))
        .route("/api/kernels/{id}/interrupt", post(rest::interrupt))
        .route("/api/kernels/{id}/restart", post(rest::restart))
        .route("/api/kernels/{id}/channels", get(channels::upgrade))
        .route_layer(axum::middleware::from_fn(traced))
        .with_state(face)
        .layer(axum::middleware::from_fn_with_state(
            gate,
            crate::auth::gate,
        ))
        .layer(axum::middleware::from_fn_with_state(access, foreign))
}

/// Each request in a server span named by its route (see
/// [`crate::telemetry::spans::jupyter`]), continuing a `traceparent` header.
async fn traced(
    route: Option<axum::extract::MatchedPath>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use tracing::Instrument;
    let route = route.as_ref().map_or("unmatched", |r| r.as_str());
    let span = crate::telemetry::spans::jupyter(req.method().as_str(), route);
    if !span.is_disabled() {
        let mut carrier = serde_json::Map::new();
        for key in crate::telemetry::context::KEYS {
            if let Some(v) = req.headers().get(key).and_then(|v| v.to_str().ok()) {
                carrier.insert(key.to_string(), v.into());
            }
        }
        crate::telemetry::context::continue_from(&span, &carrier);
        let who = req.extensions().get::<crate::principal::Authenticated>();
        if let Some(a) = who {
            span.record("kernel_mcp.principal", a.principal.id());
        }
    }
    let resp = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", resp.status().as_u16());
    if resp.status().is_server_error() {
        crate::telemetry::spans::failed(&span, resp.status().as_str());
    }
    resp
}

/// How the Jupyter face words its refusals (Jupyter Server's JSON error body).
const JUPYTER_FACE: AuthFace = AuthFace {
    name: "Jupyter API",
    body: error_body,
    scheme: "token",
    hint: "send the service's token as `Authorization: token <TOKEN>` or `?token=<TOKEN>` (`kernel-mcp token` says where it is).",
};

fn error_body(status: StatusCode, message: &str) -> Response {
    models::error(status, message)
}

/// What a request to the API needs: reads are `GET` (the channels websocket, which runs
/// code, aside); everything else changes kernels.
pub fn need(method: &Method, path: &str) -> Access {
    let read = matches!(*method, Method::GET | Method::HEAD) && !path.ends_with("/channels");
    if read { Access::Read } else { Access::Execute }
}

/// 403 for a foreign `Host` or `Origin`, before authentication; then the route. A websocket
/// request is answered here too, before any upgrade.
async fn foreign(State(access): State<HttpAccess>, request: Request, next: Next) -> Response {
    if !access.host_allowed(request.headers()) || !access.origin_allowed(request.headers()) {
        return models::error(
            StatusCode::FORBIDDEN,
            "Forbidden: this Host or Origin may not use kernel-mcp's Jupyter API.",
        );
    }
    next.run(request).await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
