//! The keys a caller holds to reach a session or a run. Only the connection's view
//! ([`super::Scope`]) makes them: their constructors are private to `scope`, so a tool cannot
//! name a session or a run without going through the caller's scope.
//!
//! A [`SessionKey`] names a registry [`Slot`]: a named session (the same slot for every
//! connection) or one connection's own `default`. It also carries who asks (a [`Viewer`]),
//! so errors list only what that caller may see. A [`RunKey`] is a run id and its viewer; the
//! registry answers it only when the run's session is one the viewer sees.

use std::sync::Arc;

use crate::principal::Principal;
use crate::session::RunId;

/// Name of the session `execute` uses when no `session_id` is given.
pub const DEFAULT_SESSION: &str = "default";

/// One connection of this process (numbered from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub(super) u64);

impl ConnectionId {
    /// The number, for logs.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Connection `n` (tests of the registry's parts).
    #[cfg(test)]
    pub(crate) fn for_test(n: u64) -> ConnectionId {
        ConnectionId(n)
    }
}

/// Who a session belongs to: a principal's id ([`crate::principal::Principal::id`]).
/// `owner` is today's single user (the stdio client, the socket's own uid, the static token).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(Arc<str>);

impl Owner {
    /// The owner of principal `p`.
    pub fn of(p: &Principal) -> Owner {
        if p.is_owner() {
            return Owner::process();
        }
        Owner(Arc::from(p.id()))
    }

    /// The user this process runs as (and whoever proves to be them).
    pub fn process() -> Owner {
        static OWNER: std::sync::OnceLock<Owner> = std::sync::OnceLock::new();
        OWNER
            .get_or_init(|| Owner(Arc::from(Principal::Owner.id())))
            .clone()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the process's own user.
    pub fn is_process(&self) -> bool {
        *self == Owner::process()
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a session is filed in the registry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// A session by its owner and name: each principal has names of its own, and every
    /// connection of that principal reaches the same session. A caller without a connection
    /// of its own (a standalone server's client, a 2026-07-28 stateless request) has its
    /// `default` here too, under the name `default`.
    Named(Owner, String),
    /// One connection's own `default` session (stdio through the service, a socket, a legacy
    /// HTTP session): no other connection can name it, and it ends with the connection.
    Default(ConnectionId),
}

impl Slot {
    /// A session named `name` of the process's own user (tests of the registry's parts).
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> Slot {
        Slot::Named(Owner::process(), name.to_string())
    }

    /// The session id clients see: the name, or `default`.
    pub fn name(&self) -> &str {
        match self {
            Slot::Named(_, n) => n,
            Slot::Default(_) => DEFAULT_SESSION,
        }
    }

    /// The connection the session belongs to, for a connection's own `default`.
    pub fn connection(&self) -> Option<ConnectionId> {
        match self {
            Slot::Default(c) => Some(*c),
            Slot::Named(..) => None,
        }
    }

    /// The principal a named session belongs to (`None`: a connection's own `default`).
    pub fn principal(&self) -> Option<&Owner> {
        match self {
            Slot::Named(o, _) => Some(o),
            Slot::Default(_) => None,
        }
    }
}

/// Who asks: a principal, through a connection of the service or without one, and whether
/// it may see every principal's sessions (the admin scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    pub(super) owner: Owner,
    pub(super) connection: Option<ConnectionId>,
    pub(super) admin: bool,
    /// The name a gateway's kernels run as for this caller (`KERNEL_USERNAME`).
    pub(super) username: Arc<str>,
}

impl Viewer {
    /// A standalone server's only client (tests of the registry's parts).
    #[cfg(test)]
    pub(crate) fn standalone() -> Viewer {
        Viewer {
            owner: Owner::process(),
            connection: None,
            admin: false,
            username: Arc::from("test"),
        }
    }

    /// Connection `n` of the process's own user (tests of the registry's parts).
    #[cfg(test)]
    pub(crate) fn of_connection(n: u64) -> Viewer {
        Viewer {
            owner: Owner::process(),
            connection: Some(ConnectionId(n)),
            admin: false,
            username: Arc::from("test"),
        }
    }

    /// True when this caller may reach the session in `slot`: its principal's sessions and
    /// only its own connection's `default`; an admin reaches every principal's sessions too
    /// (never another connection's own `default`, which is that connection's alone).
    pub fn sees(&self, slot: &Slot) -> bool {
        match slot {
            Slot::Named(o, _) => self.admin || *o == self.owner,
            Slot::Default(c) => self.connection == Some(*c),
        }
    }

    /// The connection asking; `None` for a standalone server's client or a request without
    /// a connection of its own.
    pub fn connection(&self) -> Option<ConnectionId> {
        self.connection
    }

    /// The principal asking.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The name a Kernel Gateway or Enterprise Gateway runs this caller's kernels as
    /// (`KERNEL_USERNAME`): the principal's name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// True when the caller sees every principal's sessions.
    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// The session id this caller uses for the session in `slot`: its own sessions by name,
    /// another principal's (an admin's view) as `OWNER/NAME`.
    pub fn id_of(&self, slot: &Slot) -> String {
        match slot.principal() {
            Some(o) if *o != self.owner => format!("{o}/{}", slot.name()),
            _ => slot.name().to_string(),
        }
    }
}

/// A session as one caller names it. Made only by [`super::Scope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey {
    slot: Slot,
    viewer: Viewer,
    /// The implicit session of `execute` without `session_id`: created on first use.
    lazy: bool,
}

impl SessionKey {
    pub(super) fn new(slot: Slot, viewer: Viewer, lazy: bool) -> SessionKey {
        SessionKey { slot, viewer, lazy }
    }

    /// The session id the caller sees (`default` for its own default session).
    pub fn name(&self) -> &str {
        self.slot.name()
    }

    /// Where the session is filed.
    pub fn slot(&self) -> &Slot {
        &self.slot
    }

    /// Who asks.
    pub fn viewer(&self) -> &Viewer {
        &self.viewer
    }

    /// True for the session `execute` makes when no `session_id` is given.
    pub fn is_lazy(&self) -> bool {
        self.lazy
    }

    /// True when the session belongs to one connection (a service connection's `default`):
    /// its journal is never found by name, and its log events go to that connection only.
    pub fn is_private(&self) -> bool {
        self.slot.connection().is_some()
    }
}

/// A run as one caller names it. Made only by [`super::Scope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKey {
    run: RunId,
    viewer: Viewer,
}

impl RunKey {
    pub(super) fn new(run: RunId, viewer: Viewer) -> RunKey {
        RunKey { run, viewer }
    }

    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// Who asks.
    pub fn viewer(&self) -> &Viewer {
        &self.viewer
    }
}

impl Owner {
    /// The owner whose id is `id` (an admin's `OWNER/NAME`).
    pub(super) fn from_id(id: &str) -> Owner {
        if id == Owner::process().as_str() {
            return Owner::process();
        }
        Owner(Arc::from(id))
    }
}
