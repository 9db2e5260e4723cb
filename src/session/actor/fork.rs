//! The source's side of `fork_session` (see `kernel::fork`): the fork helper's request goes
//! to the main shell only when nothing runs or waits, and from then until the registry says
//! the fork is taken (`EndFork`, once the child met it) — or [`FORK_HOLD_LIMIT`] at the
//! latest — no run starts. So the copy holds exactly the state after the last finished run,
//! and runs submitted meanwhile start afterwards, in order, in the source only. The source's
//! pid, generation and status are not touched; the request is silent and out of history.
//!
//! The fork session's history starts as a copy of the source's (`SeedHistory`), journalled
//! like its own runs, so `get_history`, `export_history` and `rerun_history` explain its state.

use super::*;

/// The longest a fork may hold the source's runs.
pub const FORK_HOLD_LIMIT: Duration = Duration::from_secs(60);

impl Actor {
    /// Send the fork helper's request if the session is idle, and hold the runs.
    pub(super) async fn begin_fork(
        &mut self,
        content: Value,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
    ) {
        if self.runs.current_id().is_some() || self.fork_hold.is_some() {
            let _ = reply.send(Err(self.busy_error()));
            return;
        }
        if self.runs.queue_len() > 0 {
            // Cannot happen after `advance` (a queued run starts at once), but a fork must
            // never be taken in front of waiting runs.
            let _ = reply.send(Err(SessionError::Forking {
                session: self.desc.id.clone(),
            }));
            return;
        }
        self.fork_hold = Some(Instant::now() + FORK_HOLD_LIMIT);
        let sent = self
            .send_request("execute_request".into(), content, timeout, reply, None)
            .await;
        if !sent {
            // No kernel, or it took nothing: there is no fork to wait for.
            self.fork_hold = None;
        }
    }

    /// The registry never ended the fork: let the runs go.
    pub(super) fn fork_hold_expired(&mut self) {
        if self.fork_hold.is_some_and(|at| at <= Instant::now()) {
            tracing::warn!(session = %self.desc.id, "a fork held the runs past {} s; releasing them", FORK_HOLD_LIMIT.as_secs());
            self.fork_hold = None;
        }
    }
}
