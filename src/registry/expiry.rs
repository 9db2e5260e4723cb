//! Expired sessions. A session created with an idle expiry (`expires_after_s`, the service's
//! default a day) is shut down once it has been idle that long; for a day after that, its
//! name answers `SESSION_EXPIRED` rather than `SESSION_NOT_FOUND`, while its history stays
//! readable and exportable from the journal. The registry's reaper asks each session once a
//! second whether it is due (the actor keeps the idle clock, see `actor/expiry.rs`), files the
//! due ones here and destroys them.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Registry, lock};
use crate::session::{SessionError, SessionHandle};

/// How long an expired session's name answers `SESSION_EXPIRED`.
pub const TOMBSTONE_TTL: Duration = Duration::from_secs(86_400);
/// Expired sessions remembered at most (the oldest are forgotten first).
pub const MAX_TOMBSTONES: usize = 4096;
/// How often the reaper looks for expired sessions.
pub const REAP_EVERY: Duration = Duration::from_secs(1);

/// Recently expired sessions: registry key → (session id, when it expired).
#[derive(Debug, Default)]
pub struct Tombstones(HashMap<String, (String, DateTime<Utc>)>);

impl Tombstones {
    /// `SESSION_EXPIRED` for `key` if it expired less than [`TOMBSTONE_TTL`] ago.
    pub fn check(&mut self, key: &str) -> Option<SessionError> {
        self.prune();
        self.0.get(key).map(|(id, at)| SessionError::Expired {
            id: id.clone(),
            expired_at: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
    }

    /// Remember that the session under `key` (id `id`) expired now.
    pub fn insert(&mut self, key: String, id: String) {
        self.prune();
        if self.0.len() >= MAX_TOMBSTONES
            && let Some(oldest) = self
                .0
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
        {
            self.0.remove(&oldest);
        }
        self.0.insert(key, (id, Utc::now()));
    }

    /// Forget `key` (a new session took the name).
    pub fn remove(&mut self, key: &str) {
        self.0.remove(key);
    }

    fn prune(&mut self) {
        let ttl = chrono::Duration::from_std(TOMBSTONE_TTL).unwrap_or(chrono::Duration::MAX);
        let now = Utc::now();
        self.0.retain(|_, (_, at)| *at + ttl > now);
    }
}

impl Registry {
    /// Expire every session that is due: file it as expired, then shut its kernel down.
    pub async fn reap_expired(&self) {
        let handles: Vec<(String, SessionHandle)> = lock(self.sessions_table())
            .iter()
            .map(|(k, h)| (k.clone(), h.clone()))
            .collect();
        for (key, handle) in handles {
            if !matches!(handle.check_expired().await, Ok(true)) {
                continue;
            }
            {
                // One critical section: a session created under this name meanwhile is not
                // touched, and no call sees the name neither live nor expired.
                let mut sessions = lock(self.sessions_table());
                if !sessions.get(&key).is_some_and(|h| h.same_session(&handle)) {
                    continue;
                }
                sessions.remove(&key);
                lock(&self.expired).insert(key.clone(), handle.id().to_string());
            }
            self.forget_runs(&key);
            let rung = handle.destroy().await;
            tracing::info!(
                session = handle.id(),
                ?rung,
                "session expired after being idle"
            );
        }
    }

    /// Run [`Registry::reap_expired`] every [`REAP_EVERY`] on the current runtime for as long
    /// as the registry exists.
    pub fn spawn_reaper(registry: &Arc<Registry>) {
        let weak: Weak<Registry> = Arc::downgrade(registry);
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
        assert!(t.check("a").is_none());
        t.insert("a".into(), "a".into());
        let e = t.check("a").expect("expired");
        assert_eq!(e.code(), crate::session::ErrorCode::SessionExpired);
        t.remove("a");
        assert!(t.check("a").is_none());
    }

    #[test]
    fn tombstones_are_bounded() {
        let mut t = Tombstones::default();
        for i in 0..MAX_TOMBSTONES + 10 {
            t.insert(format!("s{i}"), format!("s{i}"));
        }
        assert_eq!(t.0.len(), MAX_TOMBSTONES);
    }
}
