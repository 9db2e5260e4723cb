//! A session's history: every executed code block in order with its status and outputs.
//!
//! This file owns the model ([`HistoryEntry`], [`HistoryOutput`], [`ENTRY_STREAM_BYTES`]); the
//! rest is split by responsibility and re-exported here so callers keep using
//! `crate::session::history::…`: `slice` (Python-slice ranges), `render` (text renderings),
//! `journal` (the JSONL journal on disk), `store` (the bounded in-memory `History`).

mod journal;
mod render;
mod slice;
mod store;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{ErrorInfo, RunStatus};

pub use journal::{
    JOURNAL_RETENTION, Journal, JournalContents, JournalHeader, JournalRecord, latest_journal,
    prune_journals, read_journal,
};
pub(crate) use render::{describe_output, error_line, indent};
pub use render::{output_summary, render_text};
pub use slice::slice_range;
// Used by the session actor after the merge of the actor rewrite; until then only by tests.
#[allow(unused_imports)]
pub(crate) use store::History;

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

/// One display output of a history entry: its MIME bundle as the notebook export writes it.
///
/// Journals written before whole bundles were kept hold only text/plain (the text the agent
/// saw) and the image, and no `metadata`; they load the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryOutput {
    /// `display_data` or `execute_result`.
    pub kind: String,
    /// MIME type → value as nbformat stores them (text as strings, images base64, JSON as
    /// JSON): every type the kernel sent, except values over the per-value cap.
    pub data: serde_json::Map<String, Value>,
    /// The output's metadata as the kernel sent it, plus a `kernel_mcp` note naming values
    /// left out of `data`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, Value>,
}

/// Per-stream bytes kept in a history entry.
pub const ENTRY_STREAM_BYTES: usize = 64 * 1024;

/// The bytes `v` takes as JSON text (a string's own length for a string): the size estimate
/// used for MIME values.
pub(crate) fn value_bytes(v: &Value) -> usize {
    /// Counts what is written to it.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    match v {
        Value::String(s) => s.len(),
        _ => {
            let mut counter = Counter(0);
            // Writing a Value to a sink that never fails cannot fail.
            let _ = serde_json::to_writer(&mut counter, v);
            counter.0
        }
    }
}

/// An entry with the given id, code and status and nothing else, for tests.
#[cfg(test)]
pub(crate) fn sample_entry(run_id: &str, code: &str, status: RunStatus) -> HistoryEntry {
    HistoryEntry {
        run_id: run_id.to_string(),
        code: code.to_string(),
        status,
        execution_count: Some(1),
        generation: 1,
        stdout: String::new(),
        stderr: String::new(),
        result: None,
        error: None,
        outputs: Vec::new(),
        finished_at: "2025-01-02T03:04:05Z".to_string(),
    }
}
