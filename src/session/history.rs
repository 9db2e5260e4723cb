//! A session's history: every executed code block in order with its status and outputs, Python
//! slice semantics for ranges, the REPL-like text rendering, and the on-disk journal.
//!
//! The journal is one JSON Lines file per session instance under
//! `$XDG_STATE_HOME/kernel-mcp/history/` (default `~/.local/state/kernel-mcp/history/`), named
//! `<session_id>-<created, UTC %Y%m%dT%H%M%S>-<4 hex>.jsonl`. Line 1 is a [`JournalHeader`];
//! each later line is a [`JournalRecord`]. Each record is appended and flushed when it happens,
//! so a crash of the server loses nothing that was already returned.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{ErrorInfo, RunStatus};

/// One executed block, as kept in history and written to the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub run_id: String,
    pub code: String,
    pub status: RunStatus,
    pub execution_count: Option<i64>,
    /// Generation of the kernel it ran in.
    pub generation: u64,
    /// Cleaned stdout/stderr, each bounded (head + tail) to [`ENTRY_STREAM_BYTES`].
    pub stdout: String,
    pub stderr: String,
    /// text/plain of the execute_result.
    pub result: Option<String>,
    pub error: Option<ErrorInfo>,
    /// Display outputs in order (for notebook export).
    pub outputs: Vec<HistoryOutput>,
    /// RFC 3339.
    pub finished_at: String,
}

/// One display output of a history entry: a MIME bundle reduced to what we keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryOutput {
    /// `display_data` or `execute_result`.
    pub kind: String,
    /// MIME type → value (text/plain string; images base64), as nbformat stores them.
    pub data: serde_json::Map<String, Value>,
}

/// Per-stream bytes kept in a history entry.
pub const ENTRY_STREAM_BYTES: usize = 64 * 1024;

/// The half-open index range `[start, end)` that Python's `entries[start:end]` selects in a
/// list of `len`: negatives count from the end, out-of-range values clamp, `None` = open.
pub fn slice_range(len: usize, start: Option<i64>, end: Option<i64>) -> Range<usize> {
    todo!()
}

/// The REPL-like rendering of entries: `[n] <code>` (n = index + 1) followed by a short
/// output summary for each.
pub fn render_text(entries: &[(usize, &HistoryEntry)]) -> String {
    todo!()
}

/// A one-paragraph output summary of an entry (status, result, first/last lines of output, error).
pub fn output_summary(entry: &HistoryEntry) -> String {
    todo!()
}

/// First line of a journal file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    pub session_id: String,
    pub kernel: String,
    pub display_name: String,
    pub language: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Every later line of a journal file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalRecord {
    /// A block finished executing.
    Entry(HistoryEntry),
    /// `delete_history` removed these run ids.
    Deleted(Vec<String>),
    /// `restart_session(clear_history=true)` emptied the history.
    Cleared,
    /// The kernel's language_info (from kernel_info_reply) became known or changed.
    LanguageInfo(Value),
}

/// An open journal: appends records, one flushed line each.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

impl Journal {
    /// The directory journals go in (created 0700 if missing).
    pub fn dir() -> std::io::Result<PathBuf> {
        todo!()
    }

    /// Create a new journal in `dir` for this session, writing the header line.
    pub fn create(dir: &Path, header: &JournalHeader) -> std::io::Result<Journal> {
        todo!()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record and flush it to the OS.
    pub fn append(&mut self, record: &JournalRecord) -> std::io::Result<()> {
        todo!()
    }
}

/// A journal read back: its header, the surviving entries in order, and the last language_info.
#[derive(Debug, Clone)]
pub struct JournalContents {
    pub header: JournalHeader,
    pub entries: Vec<HistoryEntry>,
    pub language_info: Value,
}

/// Read a journal, applying deletions and clears. A torn last line (a crash mid-write) is ignored.
pub fn read_journal(path: &Path) -> std::io::Result<JournalContents> {
    todo!()
}

/// The most recent journal of `session_id` in `dir` (by file name timestamp), if any.
pub fn latest_journal(dir: &Path, session_id: &str) -> Option<PathBuf> {
    todo!()
}
