//! The keys a caller holds to reach a session or a run. Only the connection's view
//! ([`super::Scope`]) makes them: their constructors are private to `scope`, so a tool cannot
//! name a session or a run without going through the caller's scope (DESIGN §12).
//!
//! A [`SessionKey`] names a registry [`Slot`]: a named session (the same slot for every
//! connection) or one connection's own `default`. It also carries who asks (a [`Viewer`]),
//! so errors list only what that caller may see. A [`RunKey`] is a run id and its viewer; the
//! registry answers it only when the run's session is one the viewer sees.

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

/// Where a session is filed in the registry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// A session by its name; every connection reaches the same one.
    Named(String),
    /// One connection's own `default` session; no other connection can name it.
    Default(ConnectionId),
}

impl Slot {
    /// The session id clients see: the name, or `default`.
    pub fn name(&self) -> &str {
        match self {
            Slot::Named(n) => n,
            Slot::Default(_) => DEFAULT_SESSION,
        }
    }

    /// The connection the session belongs to, for a connection's own `default`.
    pub fn owner(&self) -> Option<ConnectionId> {
        match self {
            Slot::Named(_) => None,
            Slot::Default(c) => Some(*c),
        }
    }
}

/// Who asks: a standalone server's only client, or one connection of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewer(pub(super) Option<ConnectionId>);

impl Viewer {
    /// A standalone server's only client (tests of the registry's parts).
    #[cfg(test)]
    pub(crate) const STANDALONE: Viewer = Viewer(None);

    /// True when this caller may reach the session in `slot`: every named session, and only
    /// its own `default`.
    pub fn sees(self, slot: &Slot) -> bool {
        match slot {
            Slot::Named(_) => true,
            Slot::Default(c) => self.0 == Some(*c),
        }
    }

    /// The connection asking; `None` for a standalone server's client.
    pub fn connection(self) -> Option<ConnectionId> {
        self.0
    }

    /// Connection `n` (tests of the registry's parts).
    #[cfg(test)]
    pub(crate) fn of_connection(n: u64) -> Viewer {
        Viewer(Some(ConnectionId(n)))
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
    pub fn viewer(&self) -> Viewer {
        self.viewer
    }

    /// True for the session `execute` makes when no `session_id` is given.
    pub fn is_lazy(&self) -> bool {
        self.lazy
    }

    /// True when the session belongs to one connection (a service connection's `default`):
    /// its journal is never found by name, and its log events go to that connection only.
    pub fn is_private(&self) -> bool {
        self.slot.owner().is_some()
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
    pub fn viewer(&self) -> Viewer {
        self.viewer
    }
}
