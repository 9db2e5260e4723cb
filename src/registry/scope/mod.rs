//! Who may reach which session: the registry as one MCP connection sees it.
//!
//! Named sessions belong to the process and every connection reaches the same one. The
//! implicit `default` session is different in the per-user service: each connection gets its
//! own, shown to it as `default`, out of every other connection's reach (its runs, tasks,
//! resources, history, journal and log events included), and destroyed when the connection
//! ends. A standalone server has one client, so its scope is [`Scope::standalone`] and
//! `default` is simply the session named `default`, as it always was.
//!
//! A [`Scope`] is the only maker of the keys the registry takes ([`SessionKey`], [`RunKey`],
//! see [`key`]): every registry call that touches a session or a run takes one, so a tool
//! cannot reach a session without resolving the caller's scope first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

pub mod key;

use key::{ConnectionId, DEFAULT_SESSION, RunKey, SessionKey, Slot, Viewer};

use super::Registry;
use crate::session::RunId;

/// Numbers the connections of this process.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// One connection of the service. Dropping the last clone of its scope ends what belongs to
/// it: its `default` session is destroyed (the fallback for transports that end without
/// telling us), and its expired and ended `default` are forgotten.
struct Connection {
    id: ConnectionId,
    registry: Arc<Registry>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let (registry, id) = (self.registry.clone(), self.id);
        registry.forget_connection(id);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                registry.end_default(id).await;
            });
        }
    }
}

/// The registry seen by one caller.
#[derive(Clone)]
pub struct Scope {
    registry: Arc<Registry>,
    /// `None`: a standalone server's only client; `default` is the session named `default`.
    connection: Option<Arc<Connection>>,
}

impl Scope {
    /// The whole registry, `default` included: a standalone server's only client.
    pub fn standalone(registry: Arc<Registry>) -> Scope {
        Scope {
            registry,
            connection: None,
        }
    }

    /// A new connection of the service, with a `default` session of its own.
    pub fn connection(registry: Arc<Registry>) -> Scope {
        let id = ConnectionId(CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1);
        Scope {
            connection: Some(Arc::new(Connection {
                id,
                registry: registry.clone(),
            })),
            registry,
        }
    }

    /// The registry (limits, kernel sources); reaching a session needs a key from here.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Who asks.
    pub fn viewer(&self) -> Viewer {
        Viewer(self.connection.as_ref().map(|c| c.id))
    }

    /// The connection asking (`None` for a standalone server's client).
    pub fn connection_id(&self) -> Option<ConnectionId> {
        self.viewer().connection()
    }

    /// The key of session `id` as this caller names it: `default` is its own.
    pub fn key(&self, id: &str) -> SessionKey {
        SessionKey::new(self.slot(id), self.viewer(), false)
    }

    /// The key of the session `execute` uses without `session_id`: this caller's `default`,
    /// created on first use.
    pub fn default_key(&self) -> SessionKey {
        SessionKey::new(self.slot(DEFAULT_SESSION), self.viewer(), true)
    }

    /// The key of `id` when given, else [`Self::default_key`].
    pub fn key_or_default(&self, id: Option<&str>) -> SessionKey {
        match id {
            Some(id) => self.key(id),
            None => self.default_key(),
        }
    }

    /// A key for a new session with a name no session has (`session-N`).
    pub fn new_key(&self) -> SessionKey {
        SessionKey::new(
            Slot::Named(self.registry.unused_name()),
            self.viewer(),
            false,
        )
    }

    /// The key of run `run` as this caller names it.
    pub fn run_key(&self, run: impl Into<RunId>) -> RunKey {
        RunKey::new(run.into(), self.viewer())
    }

    /// True while this connection holds a `default` session, live or recently expired (an
    /// HTTP session that does must not be ended for being idle: see `mcp/http_sessions.rs`).
    pub fn holds_default(&self) -> bool {
        self.connection
            .as_ref()
            .is_some_and(|c| self.registry.holds_default(c.id))
    }

    /// This scope, without keeping its connection alive (`None` for a standalone client,
    /// which has no `default` of its own).
    pub fn downgrade(&self) -> Option<WeakScope> {
        self.connection.as_ref().map(|c| WeakScope {
            registry: Arc::downgrade(&self.registry),
            connection: Arc::downgrade(c),
            id: c.id,
        })
    }

    /// This connection has ended: destroy its `default` session, if it has one.
    pub async fn close(&self) {
        if let Some(c) = &self.connection {
            self.registry.end_default(c.id).await;
        }
    }

    fn slot(&self, id: &str) -> Slot {
        match &self.connection {
            Some(c) if id == DEFAULT_SESSION => Slot::Default(c.id),
            _ => Slot::Named(id.to_string()),
        }
    }
}

/// A connection's scope that does not keep the connection alive.
#[derive(Clone)]
pub struct WeakScope {
    registry: Weak<Registry>,
    connection: Weak<Connection>,
    id: ConnectionId,
}

impl WeakScope {
    /// [`Scope::holds_default`], while the connection lives; false after.
    pub fn holds_default(&self) -> bool {
        match (self.registry.upgrade(), self.connection.strong_count() > 0) {
            (Some(registry), true) => registry.holds_default(self.id),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limits;
    use crate::kernel::discovery::KernelSearch;

    fn registry() -> Arc<Registry> {
        Arc::new(Registry::new(
            KernelSearch::new(&[], None, None),
            None,
            Limits::default(),
            tokio::runtime::Handle::current(),
        ))
    }

    #[tokio::test]
    async fn a_named_session_is_one_key_for_every_connection_and_default_is_each_ones_own() {
        let registry = registry();
        let (a, b) = (
            Scope::connection(registry.clone()),
            Scope::connection(registry.clone()),
        );
        assert_eq!(a.key("shared").slot(), b.key("shared").slot());
        assert_ne!(a.key("default").slot(), b.key("default").slot());
        assert_eq!(a.key("default").name(), "default");
        assert_eq!(a.default_key().slot(), a.key("default").slot());
        assert!(a.default_key().is_lazy() && !a.key("default").is_lazy());
        assert!(a.key("default").is_private() && !a.key("shared").is_private());
        assert!(a.viewer().sees(a.key("default").slot()));
        assert!(!b.viewer().sees(a.key("default").slot()));
        assert!(b.viewer().sees(a.key("shared").slot()));
    }

    #[tokio::test]
    async fn a_standalone_default_is_the_session_named_default() {
        let registry = registry();
        let s = Scope::standalone(registry.clone());
        assert_eq!(s.key("default").slot(), &Slot::Named("default".into()));
        assert!(!s.key("default").is_private());
        let c = Scope::connection(registry);
        assert!(!s.viewer().sees(c.key("default").slot()));
    }

    #[tokio::test]
    async fn a_run_key_carries_its_callers_view() {
        let registry = registry();
        let (a, b) = (
            Scope::connection(registry.clone()),
            Scope::connection(registry),
        );
        let (ka, kb) = (a.run_key("run-1"), b.run_key("run-1"));
        assert_eq!(ka.run(), kb.run());
        assert_ne!(ka.viewer(), kb.viewer());
    }
}
