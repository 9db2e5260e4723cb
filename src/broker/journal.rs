//! A session's call journal (`mcp.journal()`): one entry per call the broker sent to a server,
//! newest last, at most [`MAX_ENTRIES`]. Metadata only (server, tool, start, duration,
//! outcome), never arguments or results.

use std::collections::VecDeque;

use serde::Serialize;

/// Entries kept per session; the oldest go first.
pub const MAX_ENTRIES: usize = 256;

/// How a dispatched call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A result with `isError` false.
    Ok,
    /// A result with `isError` true, or a JSON-RPC error from the server.
    Error,
    /// The call was sent but abandoned before its answer (interrupt, timeout, the kernel or
    /// the connection gone): it may or may not have taken effect.
    OutcomeUnknown,
}

/// One call's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalEntry {
    pub server: String,
    pub tool: String,
    /// RFC 3339, milliseconds.
    pub started: String,
    /// Milliseconds from dispatch to the end.
    pub ms: u64,
    pub outcome: Outcome,
}

/// The bounded journal of one session.
#[derive(Debug, Default)]
pub struct Journal {
    entries: VecDeque<JournalEntry>,
}

impl Journal {
    pub fn record(&mut self, entry: JournalEntry) {
        if self.entries.len() == MAX_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> Vec<JournalEntry> {
        self.entries.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_keeps_the_newest_entries() {
        let mut j = Journal::default();
        for i in 0..MAX_ENTRIES + 10 {
            j.record(JournalEntry {
                server: "s".into(),
                tool: format!("t{i}"),
                started: String::new(),
                ms: 1,
                outcome: Outcome::Ok,
            });
        }
        let e = j.entries();
        assert_eq!(e.len(), MAX_ENTRIES);
        assert_eq!(e[0].tool, "t10");
        assert_eq!(
            serde_json::to_value(Outcome::OutcomeUnknown).unwrap(),
            "outcome_unknown"
        );
    }
}
