//! Commands on the session as a whole: its info, its idle expiry, a restart, the end, and
//! what it knows of its clients.

use std::ops::ControlFlow;
use std::time::Duration;

use super::{Activity, Answer, SessionCommand};
use crate::kernel::ShutdownRung;
use crate::session::actor::Actor;
use crate::session::history::JournalRecord;
use crate::session::types::SessionInfo;

/// The session now.
pub struct Info;

impl SessionCommand for Info {
    type Output = SessionInfo;
    const ACTIVITY: Activity = Activity::Glance;
}

impl Info {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let _ = answer.send(Ok(actor.info()));
    }
}

/// Set the idle expiry and restart its clock; answers the session.
pub struct Renew {
    /// The new expiry: `Some(None)` never, `Some(after)` after that long idle; `None` keeps
    /// the one it has.
    pub expires_after: Option<Option<Duration>>,
}

impl SessionCommand for Renew {
    type Output = SessionInfo;
    const ACTIVITY: Activity = Activity::Use;
}

impl Renew {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        if let Some(after) = self.expires_after {
            actor.expires_after = after;
        }
        let _ = answer.send(Ok(actor.info()));
    }
}

/// True when the session has been idle past its expiry; a busy session's idle clock starts
/// over instead (see `expiry.rs`). This check is not activity.
pub struct CheckExpired;

impl SessionCommand for CheckExpired {
    type Output = bool;
    const ACTIVITY: Activity = Activity::None;
}

impl CheckExpired {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let _ = answer.send(Ok(actor.check_expired()));
    }
}

/// Replace the kernel (stopping what runs, cancelling what waits); answers once the new one
/// is ready. Errors: `UNSUPPORTED` for a kernel the session did not start,
/// `KERNEL_START_FAILED` (or `SANDBOX_UNAVAILABLE`) when the new kernel does not start.
pub struct Restart {
    /// Empty the history too (journalled).
    pub clear_history: bool,
}

impl SessionCommand for Restart {
    type Output = SessionInfo;
    const ACTIVITY: Activity = Activity::Use;
}

impl Restart {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        if self.clear_history {
            actor.history.clear();
            actor.journal_append(&JournalRecord::Cleared);
            actor.history_changed();
        }
        actor.restart(answer)
    }
}

/// True when an MCP client has worked in the session: a run (with or without a history
/// entry), a request to the kernel (a checkpoint restored, a completion…), input answered,
/// or work queued or running now. Reads and the Jupyter face's own calls do not count.
pub struct UsedByAgents;

impl SessionCommand for UsedByAgents {
    type Output = bool;
    const ACTIVITY: Activity = Activity::Use;
}

impl UsedByAgents {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let used =
            actor.agent_used || actor.runs.current_id().is_some() || actor.runs.queue_len() > 0;
        let _ = answer.send(Ok(used));
    }
}

/// A face names the kernel client with Jupyter session id `session` (what the session's
/// notices call it; see `foreign.rs`). Sent with [`crate::session::SessionHandle::tell`]:
/// best effort, no answer.
pub struct NoteClient {
    pub session: String,
    pub who: String,
}

impl SessionCommand for NoteClient {
    type Output = ();
    const ACTIVITY: Activity = Activity::Use;
}

impl NoteClient {
    pub(super) fn apply(self, actor: &mut Actor) {
        actor.note_client(self.session, self.who)
    }
}

/// Shut the kernel down (the ladder) and end the actor; answers the rung that stopped it.
pub struct Destroy;

impl SessionCommand for Destroy {
    type Output = ShutdownRung;
    const ACTIVITY: Activity = Activity::Use;
}

impl Destroy {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) -> ControlFlow<()> {
        let rung = actor.destroy().await;
        let _ = answer.send(Ok(rung));
        ControlFlow::Break(())
    }
}
