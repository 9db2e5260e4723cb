//! Commands on the session's history: read a slice, delete entries, seed a fork's copy.

use super::{Activity, Answer, SessionCommand};
use crate::session::actor::Actor;
use crate::session::error::SessionError;
use crate::session::history::{HistoryEntry, JournalRecord};

/// History entries `[start, end)` (Python slice semantics) with their indices, and the total.
pub struct History {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// What [`History`] answers.
#[derive(Debug, Clone, Default)]
pub struct HistoryPage {
    /// The entries selected, each with its index.
    pub entries: Vec<(usize, HistoryEntry)>,
    /// How many entries the history holds.
    pub total: usize,
}

impl SessionCommand for History {
    type Output = HistoryPage;
    const ACTIVITY: Activity = Activity::Use;
}

impl History {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let page = HistoryPage {
            entries: actor.history.slice(self.start, self.end),
            total: actor.history.len(),
        };
        let _ = answer.send(Ok(page));
    }
}

/// Delete history entries `[start, end)` (only `start` when `end` is `None`), journalled;
/// answers how many. Errors: `INVALID_ARGUMENT` for an index that names no entry or an empty
/// selection (nothing is deleted; the message gives the valid range).
pub struct DeleteHistory {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

impl SessionCommand for DeleteHistory {
    type Output = usize;
    const ACTIVITY: Activity = Activity::Work;
}

impl DeleteHistory {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let removed = actor
            .history
            .delete(self.start, self.end)
            .map_err(|e| SessionError::InvalidArgument(format!("Nothing was deleted: {e}.")));
        if let Ok(removed) = &removed {
            actor.journal_append(&JournalRecord::Deleted(removed.clone()));
            actor.history_changed();
        }
        let _ = answer.send(removed.map(|r| r.len()));
    }
}

/// Append `entries` to the history in order, journalled (a fork's copy of its source's).
pub struct SeedHistory {
    pub entries: Vec<HistoryEntry>,
}

impl SessionCommand for SeedHistory {
    type Output = ();
    const ACTIVITY: Activity = Activity::Use;
}

impl SeedHistory {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        for entry in self.entries {
            actor.journal_append(&JournalRecord::Entry(entry.clone()));
            actor.history.push(entry);
        }
        let _ = answer.send(Ok(()));
    }
}
