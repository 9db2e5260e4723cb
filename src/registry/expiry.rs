//! Expired sessions. A session created with an idle expiry (`expires_after_s`, the service's
//! default a day) is shut down once it has been idle that long; for a day after that, its
//! name answers `SESSION_EXPIRED` rather than `SESSION_NOT_FOUND`, while its history stays
//! readable and exportable from the journal. The registry's reaper asks each session once a
//! second whether it is due (the actor keeps the idle clock, see `actor/expiry.rs`), files the
//! due ones here and destroys them.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::scope::key::Slot;
use crate::session::{SessionError, cmd};

/// How long an expired session's name answers `SESSION_EXPIRED`.
pub const TOMBSTONE_TTL: Duration = Duration::from_secs(86_400);
/// Expired sessions remembered at most (the oldest are forgotten first).
pub const MAX_TOMBSTONES: usize = 4096;
/// How often the reaper looks for expired sessions.
pub const REAP_EVERY: Duration = Duration::from_secs(1);

/// Recently expired sessions: slot → when it expired.
#[derive(Debug, Default)]
pub struct Tombstones(HashMap<Slot, DateTime<Utc>>);

impl Tombstones {
    /// `SESSION_EXPIRED` for `slot` if it expired less than [`TOMBSTONE_TTL`] ago.
    pub fn check(&mut self, slot: &Slot) -> Option<SessionError> {
        self.prune();
        self.0.get(slot).map(|at| SessionError::Expired {
            id: slot.name().to_string(),
            expired_at: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
    }

    /// Remember that the session in `slot` expired now.
    pub fn insert(&mut self, slot: Slot) {
        self.prune();
        if self.0.len() >= MAX_TOMBSTONES
            && let Some(oldest) = self
                .0
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(k, _)| k.clone())
        {
            self.0.remove(&oldest);
        }
        self.0.insert(slot, Utc::now());
    }

    /// Forget `slot` (a new session took it, or its connection ended).
    pub fn remove(&mut self, slot: &Slot) {
        self.0.remove(slot);
    }

    fn prune(&mut self) {
        let ttl = chrono::Duration::from_std(TOMBSTONE_TTL).unwrap_or(chrono::Duration::MAX);
        let now = Utc::now();
        self.0.retain(|_, at| *at + ttl > now);
    }
}

impl super::Registry {
    /// Expire every session that is due: file it as expired, then shut its kernel down.
    pub async fn reap_expired(&self) {
        let sessions = super::lock(&self.table).all();
        for (slot, handle) in sessions {
            if !matches!(handle.call(cmd::CheckExpired).await, Ok(true)) {
                continue;
            }
            // One critical section: a session created in this slot meanwhile is not touched,
            // and no call sees the slot neither live nor expired.
            if !self.forget(&slot, &handle, true) {
                continue;
            }
            let rung = handle.call(cmd::Destroy).await;
            tracing::info!(parent: handle.span(), ?rung, "session expired after being idle");
        }
    }

    /// Run [`Registry::reap_expired`] every [`REAP_EVERY`] on the current runtime
    /// for as long as the registry exists.
    pub fn spawn_reaper(registry: &std::sync::Arc<super::Registry>) {
        let weak: std::sync::Weak<super::Registry> = std::sync::Arc::downgrade(registry);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(REAP_EVERY);
            loop {
                tick.tick().await;
                let Some(registry) = weak.upgrade() else {
                    return;
                };
                registry.reap_expired().await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_name_answers_session_expired_until_a_new_session_takes_it() {
        let mut t = Tombstones::default();
        let a = Slot::named("a");
        assert!(t.check(&a).is_none());
        t.insert(a.clone());
        let e = t.check(&a).expect("expired");
        assert_eq!(e.code(), crate::session::ErrorCode::SessionExpired);
        t.remove(&a);
        assert!(t.check(&a).is_none());
    }

    #[test]
    fn tombstones_are_bounded() {
        let mut t = Tombstones::default();
        for i in 0..MAX_TOMBSTONES + 10 {
            t.insert(Slot::named(&format!("s{i}")));
        }
        assert_eq!(t.0.len(), MAX_TOMBSTONES);
    }
}
