//! Who may reach which session: the registry as one caller sees it (docs/auth.md, "Several
//! users on one service").
//!
//! Sessions belong to a principal (who is calling, decided by the face the request came
//! through: [`crate::principal`]). A named session is its principal's: every connection of
//! that principal reaches the same one, and another principal gets `SESSION_NOT_FOUND` for
//! it exactly as for a name that does not exist (each principal has names of its own); a
//! caller with the admin scope reaches every principal's sessions, another's named
//! `OWNER/NAME`. The implicit `default` session is different in the per-user service: each
//! connection gets its own, shown to it as `default`, out of every other connection's reach
//! (its runs, tasks, resources, history, journal and log events included), and destroyed when
//! the connection ends. A caller without a connection of its own — a standalone server's
//! client ([`Scope::standalone`]), a 2026-07-28 request with no connection
//! ([`Scope::for_request`] with `stateless`) — has its principal's session named `default`,
//! kept across requests like any named session.
//!
//! A scope is built per request: the connection's scope says what ends with the connection,
//! [`Scope::for_request`] adds who makes this request.
//!
//! A [`Scope`] is the only maker of the keys the registry takes ([`SessionKey`], [`RunKey`],
//! see [`key`]): every registry call that touches a session or a run takes one, so a tool
//! cannot reach a session without resolving the caller's scope first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

pub mod key;

use key::{ConnectionId, DEFAULT_SESSION, Owner, RunKey, SessionKey, Slot, Viewer};

use super::Registry;
use crate::principal::{Access, Authenticated, Principal};
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
    /// Who makes the request, and how far it may go.
    who: Authenticated,
    /// A request without a connection of its own (a 2026-07-28 stateless request): its
    /// `default` is its principal's, not the connection's.
    stateless: bool,
}

impl Scope {
    /// The whole registry, `default` included: a standalone server's only client.
    pub fn standalone(registry: Arc<Registry>) -> Scope {
        Scope {
            registry,
            connection: None,
            who: Authenticated::owner(),
            stateless: false,
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
            who: Authenticated::owner(),
            stateless: false,
        }
    }

    /// This connection's scope for one request of `who`; `stateless`: the request has no
    /// connection of its own (its `default` is its principal's session named `default`).
    pub fn for_request(&self, who: Authenticated, stateless: bool) -> Scope {
        Scope {
            registry: self.registry.clone(),
            connection: self.connection.clone(),
            who,
            stateless,
        }
    }

    /// Who makes the request.
    pub fn who(&self) -> &Authenticated {
        &self.who
    }

    /// True for a request without a connection of its own (see [`Self::for_request`]).
    pub fn is_stateless(&self) -> bool {
        self.stateless
    }

    /// The registry (limits, kernel sources); reaching a session needs a key from here.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry, for work that outlives the request (a notebook's batch of cells).
    pub fn registry_arc(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Who asks.
    pub fn viewer(&self) -> Viewer {
        Viewer {
            owner: Owner::of(&self.who.principal),
            connection: self.own_connection(),
            admin: self.who.access >= Access::Admin,
            username: Arc::from(username(&self.who.principal)),
        }
    }

    /// The connection asking (`None` for a standalone server's client).
    pub fn connection_id(&self) -> Option<ConnectionId> {
        self.connection.as_ref().map(|c| c.id)
    }

    /// The connection whose own `default` this caller has (`None` without one).
    fn own_connection(&self) -> Option<ConnectionId> {
        self.connection
            .as_ref()
            .filter(|_| !self.stateless)
            .map(|c| c.id)
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
        let viewer = self.viewer();
        let slot = Slot::Named(viewer.owner.clone(), self.registry.unused_name());
        SessionKey::new(slot, viewer, false)
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

    /// The slot `id` names for this caller: its own `default`; `OWNER/NAME` (another
    /// principal's, as an admin names it; a caller who is not admin sees nothing there); else
    /// its principal's session of that name.
    fn slot(&self, id: &str) -> Slot {
        let own = Owner::of(&self.who.principal);
        if let Some((owner, name)) = id.rsplit_once('/') {
            return Slot::Named(Owner::from_id(owner), name.to_string());
        }
        match self.own_connection() {
            Some(c) if id == DEFAULT_SESSION => Slot::Default(c),
            _ => Slot::Named(own, id.to_string()),
        }
    }
}

/// The name `principal`'s gateway kernels run as: the OS user of this process (the owner) or
/// of a local uid, or an OAuth subject's name.
/// Login names are looked up once per uid (a `getpwuid` reads the password database).
fn username(principal: &Principal) -> String {
    static LOGINS: std::sync::Mutex<Vec<(u32, String)>> = std::sync::Mutex::new(Vec::new());
    let login = |uid: u32| {
        let mut known = LOGINS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, name)) = known.iter().find(|(u, _)| *u == uid) {
            return name.clone();
        }
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| format!("uid-{uid}"));
        if known.len() < 256 {
            known.push((uid, name.clone()));
        }
        name
    };
    match principal {
        Principal::Owner => login(nix::unistd::getuid().as_raw()),
        Principal::LocalUser { uid } => login(*uid),
        p => p.name(),
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
    use crate::principal::{Access, Authenticated};

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
        assert_eq!(s.key("default").slot(), &Slot::named("default"));
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

    fn user(name: &str, access: Access) -> Authenticated {
        Authenticated {
            principal: crate::principal::Principal::oauth("https://issuer", name, Some(name)),
            access,
        }
    }

    #[tokio::test]
    async fn each_principal_has_names_of_its_own_and_an_admin_names_anothers_as_owner_slash_name() {
        let registry = registry();
        let conn = Scope::connection(registry.clone());
        let alice = conn.for_request(user("alice", Access::Execute), false);
        let bob = conn.for_request(user("bob", Access::Execute), false);
        let admin = conn.for_request(user("root", Access::Admin), false);
        assert_ne!(alice.key("analysis").slot(), bob.key("analysis").slot());
        assert!(!bob.viewer().sees(alice.key("analysis").slot()));
        assert!(alice.viewer().sees(alice.key("analysis").slot()));
        assert!(admin.viewer().sees(alice.key("analysis").slot()));
        let qualified = admin.viewer().id_of(alice.key("analysis").slot());
        assert_eq!(qualified, "oauth:https://issuer#alice/analysis");
        assert_eq!(admin.key(&qualified).slot(), alice.key("analysis").slot());
        // Naming another's session that way gets a non-admin nothing.
        assert!(!bob.viewer().sees(bob.key(&qualified).slot()));
    }

    #[tokio::test]
    async fn a_stateless_requests_default_is_its_principals_not_the_connections() {
        let registry = registry();
        let conn = Scope::connection(registry.clone());
        let one = conn.for_request(user("alice", Access::Execute), true);
        let other = Scope::connection(registry).for_request(user("alice", Access::Execute), true);
        assert_eq!(one.key("default").slot(), other.key("default").slot());
        assert!(matches!(one.default_key().slot(), Slot::Named(_, n) if n == "default"));
        let connected = conn.for_request(user("alice", Access::Execute), false);
        assert_ne!(connected.key("default").slot(), one.key("default").slot());
    }
}
