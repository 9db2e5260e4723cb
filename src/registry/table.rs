//! The session table: live sessions by [`Slot`], the slots that expired recently
//! ([`Tombstones`]), and the journal of each connection's last `default` session that ended
//! (so that connection, and only it, can still read that history). One owner: the registry
//! keeps it behind one `std::sync::Mutex`, and every method here is a plain map update (no
//! await, no I/O), so no call holds the lock for long.

use std::collections::HashMap;
use std::path::PathBuf;

use super::expiry::Tombstones;
use super::scope::key::{ConnectionId, Slot, Viewer};
use crate::session::{SessionError, SessionHandle};

/// A live session: its handle, where it journals its history, and its sandbox.
#[derive(Clone)]
pub struct Live {
    pub handle: SessionHandle,
    pub journal: Option<PathBuf>,
    pub sandbox: crate::kernel::Sandbox,
}

/// See the module docs.
#[derive(Default)]
pub struct Table {
    live: HashMap<Slot, Live>,
    expired: Tombstones,
    /// Journal of the last `default` of each connection that ended.
    ended: HashMap<ConnectionId, PathBuf>,
}

impl Table {
    /// The live session in `slot`; else `SESSION_EXPIRED` for a slot that expired recently,
    /// else `SESSION_NOT_FOUND` listing what `viewer` sees.
    pub fn get(&mut self, slot: &Slot, viewer: &Viewer) -> Result<SessionHandle, SessionError> {
        if let Some(live) = self.live.get(slot) {
            return Ok(live.handle.clone());
        }
        if let Some(e) = self.expired.check(slot) {
            return Err(e);
        }
        Err(self.not_found(slot, viewer, false))
    }

    /// `SESSION_NOT_FOUND` for `slot`, listing the sessions `viewer` sees.
    pub fn not_found(&self, slot: &Slot, viewer: &Viewer, journal_checked: bool) -> SessionError {
        SessionError::NotFound {
            id: slot.name().to_string(),
            known: self.names(viewer),
            journal_checked,
        }
    }

    /// The live session in `slot`, if any.
    pub fn live(&self, slot: &Slot) -> Option<&Live> {
        self.live.get(slot)
    }

    /// True when `slot` expired recently (it answers `SESSION_EXPIRED`).
    pub fn is_expired(&mut self, slot: &Slot) -> bool {
        self.expired.check(slot).is_some()
    }

    /// The session ids `viewer` sees, sorted: every named session and its own `default`.
    pub fn names(&self, viewer: &Viewer) -> Vec<String> {
        let mut names: Vec<String> = self
            .live
            .keys()
            .filter(|s| viewer.sees(s))
            .map(|s| viewer.id_of(s))
            .collect();
        names.sort();
        names
    }

    /// The sessions `viewer` sees: each one's slot and handle.
    pub fn seen_by(&self, viewer: &Viewer) -> Vec<(Slot, SessionHandle)> {
        self.live
            .iter()
            .filter(|(s, _)| viewer.sees(s))
            .map(|(s, l)| (s.clone(), l.handle.clone()))
            .collect()
    }

    /// Every live session with its slot (the reaper and the server's exit).
    pub fn all(&self) -> Vec<(Slot, SessionHandle)> {
        self.live
            .iter()
            .map(|(s, l)| (s.clone(), l.handle.clone()))
            .collect()
    }

    /// The names of the live sessions, whoever owns them.
    pub fn live_names(&self) -> impl Iterator<Item = &str> {
        self.live.keys().map(Slot::name)
    }

    /// Live sessions.
    pub fn count(&self) -> usize {
        self.live.len()
    }

    /// File a new session in `slot`. Errors: `SESSION_ALREADY_EXISTS` when the slot is taken.
    pub fn insert(&mut self, slot: Slot, live: Live) -> Result<(), SessionError> {
        if self.live.contains_key(&slot) {
            return Err(SessionError::AlreadyExists(slot.name().to_string()));
        }
        self.live.insert(slot, live);
        Ok(())
    }

    /// The session in `slot` started: it is no longer expired (a new session took the slot).
    pub fn started(&mut self, slot: &Slot, journal: Option<PathBuf>) {
        self.expired.remove(slot);
        if let Some(live) = self.live.get_mut(slot) {
            live.journal = journal;
        }
    }

    /// Take the session out of `slot` if it is still `handle`'s (not a newer session's);
    /// with `expired`, the slot answers `SESSION_EXPIRED` from now on. A connection's
    /// `default` leaves its journal behind for that connection.
    pub fn remove(&mut self, slot: &Slot, handle: &SessionHandle, expired: bool) -> bool {
        if !self
            .live
            .get(slot)
            .is_some_and(|l| l.handle.same_session(handle))
        {
            return false;
        }
        let Some(live) = self.live.remove(slot) else {
            return false;
        };
        if let (Some(owner), Some(journal)) = (slot.connection(), live.journal) {
            self.ended.insert(owner, journal);
        }
        if expired {
            self.expired.insert(slot.clone());
        }
        true
    }

    /// The journal of the last `default` of `owner` that ended.
    pub fn ended_journal(&self, owner: ConnectionId) -> Option<PathBuf> {
        self.ended.get(&owner).cloned()
    }

    /// Connection `owner` is gone: nobody can name its `default` any more.
    pub fn forget_connection(&mut self, owner: ConnectionId) {
        self.ended.remove(&owner);
        self.expired.remove(&Slot::Default(owner));
    }

    /// Take every live session out (server exit).
    pub fn drain(&mut self) -> Vec<SessionHandle> {
        self.live.drain().map(|(_, l)| l.handle).collect()
    }
}
