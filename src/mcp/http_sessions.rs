//! How long a streamable-HTTP MCP session (an `Mcp-Session-Id`) lives (a `default`
//! session lives as long as its connection, whatever the transport: docs/semantics.md).
//!
//! rmcp ends a session after `keep_alive` (5 minutes) without a request, and with it the
//! connection's `default` session and kernel, although the client still holds its id and
//! may come back at any time. Here rmcp's own timer is off, and [`HttpSessions`] ends an
//! idle session only when nothing of the client's would go with it: an `Mcp-Session-Id`
//! whose connection holds a `default` session — live, or expired recently (it must answer
//! `SESSION_EXPIRED`, not be replaced by a fresh one after a new `initialize`) — lives until
//! the client deletes it (`DELETE /mcp`) or the server stops; the default's own idle expiry
//! (a day in the service) bounds it. Any other session idle past `keep_alive` is closed, as
//! rmcp would have (a client that vanished leaves nothing running behind).
//!
//! [`track`] (an axum middleware) notes each session id's last request, including the one a
//! new session's `initialize` response names; the handler binds its connection's scope to
//! its id when the client's first request after `initialize` arrives
//! ([`HttpSessions::bind`]), and holds a [`Busy`] guard while a tool call runs (a session is
//! never idle while its client waits for an answer); a reaper task checks once a second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::time::Instant;

use crate::registry::scope::WeakScope;

/// rmcp's default: an HTTP session with nothing of its own is closed after this long idle.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(300);
/// How often idle sessions are looked for (at most).
const REAP_EVERY: Duration = Duration::from_secs(1);
/// The header that names an MCP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// One session id as seen by [`track`] and the handler.
struct Seen {
    last: Instant,
    scope: Option<WeakScope>,
    /// Tool calls of the session running now.
    calls: usize,
}

/// A tool call of one session under way: the session is not idle until it is dropped.
pub struct Busy {
    sessions: Arc<HttpSessions>,
    id: Arc<str>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut seen = lock(&self.sessions.seen);
        if let Some(s) = seen.get_mut(&self.id) {
            s.calls = s.calls.saturating_sub(1);
            s.last = Instant::now();
        }
    }
}

/// The lifetime policy described in the module docs, for one HTTP endpoint.
pub struct HttpSessions {
    keep_alive: Duration,
    manager: Arc<LocalSessionManager>,
    seen: Mutex<HashMap<Arc<str>, Seen>>,
}

impl HttpSessions {
    /// The policy over `manager`'s sessions (whose own keep-alive must be off).
    pub fn new(manager: Arc<LocalSessionManager>, keep_alive: Duration) -> Arc<HttpSessions> {
        Arc::new(HttpSessions {
            keep_alive,
            manager,
            seen: Mutex::default(),
        })
    }

    /// A request for session `id` arrived (or its `initialize` answered).
    pub fn touch(&self, id: &str) {
        let mut seen = lock(&self.seen);
        match seen.get_mut(id) {
            Some(s) => s.last = Instant::now(),
            None => {
                seen.insert(
                    Arc::from(id),
                    Seen {
                        last: Instant::now(),
                        scope: None,
                        calls: 0,
                    },
                );
            }
        }
    }

    /// Session `id` is the connection of `scope` (told by its handler; `None` for a
    /// standalone server's client, which holds no `default` of its own).
    pub fn bind(&self, id: &str, scope: Option<WeakScope>) {
        self.touch(id);
        if let (Some(s), Some(scope)) = (lock(&self.seen).get_mut(id), scope) {
            s.scope.get_or_insert(scope);
        }
    }

    /// A tool call of session `id` (the connection of `scope`) starts; it ends when the guard
    /// is dropped.
    pub fn call(self: &Arc<Self>, id: &str, scope: Option<WeakScope>) -> Busy {
        self.bind(id, scope);
        let mut seen = lock(&self.seen);
        let key = match seen.get_key_value(id) {
            Some((k, _)) => k.clone(),
            None => Arc::from(id),
        };
        if let Some(s) = seen.get_mut(id) {
            s.calls += 1;
        }
        Busy {
            sessions: self.clone(),
            id: key,
        }
    }

    /// Close every session idle past the keep-alive that holds no `default` session, and
    /// forget the ones rmcp no longer has.
    pub async fn reap(&self) {
        let ids: Vec<(Arc<str>, bool)> = lock(&self.seen)
            .iter()
            .map(|(id, s)| {
                let idle = s.calls == 0 && s.last.elapsed() >= self.keep_alive;
                let holds = s.scope.as_ref().is_some_and(WeakScope::holds_default);
                (id.clone(), idle && !holds)
            })
            .collect();
        for (id, expired) in ids {
            if !self.manager.has_session(&id).await.unwrap_or(false) {
                lock(&self.seen).remove(&id);
                continue;
            }
            if expired {
                tracing::info!(
                    session = %id,
                    idle_s = self.keep_alive.as_secs(),
                    "closing an idle HTTP session that holds no default session"
                );
                let _ = self.manager.close_session(&id).await;
                lock(&self.seen).remove(&id);
            }
        }
    }

    /// Run [`Self::reap`] until `stop` is cancelled.
    pub fn spawn_reaper(self: &Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let this = self.clone();
        let every = REAP_EVERY
            .min(self.keep_alive / 2)
            .max(Duration::from_millis(50));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => this.reap().await,
                    _ = stop.cancelled() => return,
                }
            }
        });
    }
}

/// The middleware described in the module docs.
pub async fn track(
    State(sessions): State<Arc<HttpSessions>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(id) = session_id(request.headers()) {
        sessions.touch(id);
    }
    let response = next.run(request).await;
    if let Some(id) = session_id(response.headers()) {
        sessions.touch(id);
    }
    response
}

/// The MCP session a request or response names.
pub fn session_id(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
