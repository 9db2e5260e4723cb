//! Idle expiry: the clock the registry's reaper reads.
//!
//! A session with `expires_after` set expires once it has been idle that long: no run
//! executing or queued, no command from a client (reading `get_session`/`list_sessions`
//! does not count; the reaper's own check never does), and no cell of another client of the
//! kernel in progress (a person's in JupyterLab or `jupyter console --existing`: its
//! `execute_input` on iopub opens it, its `status: idle` ends it; see `others.rs`). A busy
//! session restarts its idle clock at every check, so a long run never expires under the
//! agent's feet. The actor only answers "expired or not"; the registry then files the session
//! as expired and destroys it.

use super::*;

impl Actor {
    /// When the session expires if it stays idle, or `None` (no expiry).
    pub(super) fn expires_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let after = chrono::Duration::from_std(self.expires_after?).ok()?;
        self.idle_since.checked_add_signed(after)
    }

    /// True when idle past the expiry; a busy session's clock starts over instead.
    pub(super) fn check_expired(&mut self) -> bool {
        if self.expires_after.is_none() {
            return false;
        }
        let now = chrono::Utc::now();
        if self.runs.current().is_some()
            || self.runs.queue_len() > 0
            || self.starting.is_some()
            || self.others.any_open()
        {
            self.idle_since = now;
            return false;
        }
        self.expires_at().is_some_and(|at| at <= now)
    }
}
