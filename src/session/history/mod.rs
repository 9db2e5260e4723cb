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
pub use slice::{RangeError, RangeUse, select_range, slice_range};
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
    /// Display outputs in order (for notebook export): every `display_data` and
    /// `execute_result`. Journals written before [`HistoryEntry::order`] existed hold only
    /// the displays the agent's `outputs` showed.
    pub outputs: Vec<HistoryOutput>,
    /// Every output in the kernel's order, as the notebook export writes them; `None` in
    /// journals written before it was kept (the export then writes stdout, stderr, the
    /// displays, the result and the error, in that order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<EntrySlot>>,
    /// RFC 3339.
    pub finished_at: String,
    /// Another client of the kernel ran it (a person in Jupyter, `jupyter console
    /// --existing`), not a call of this server: its `run_id` names no run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other_client: bool,
}

/// One display output of a history entry: its MIME bundle as the notebook export writes it.
///
/// Journals written before whole bundles were kept hold only text/plain (the text the agent
/// saw) and the image, and no `metadata`; they load the same way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// The `display_id` it was shown with (`update_display_data` replaces its data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_id: Option<String>,
    /// The agent read it as the entry's `result` (a text-only `execute_result`, IRkernel's
    /// value display), not among the run's `outputs`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_result: bool,
}

/// One output of a history entry in the kernel's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EntrySlot {
    /// A stream output (`stdout` / `stderr`): its cleaned text, bounded so that one
    /// stream's slots hold about [`ENTRY_STREAM_BYTES`] in all.
    Stream { name: String, text: String },
    /// `outputs[index]`.
    Output { index: usize },
    /// The entry's `error`.
    Error,
}

/// Apply a display update (`update_display_data`, or a later display with the same
/// `display_id`) to `entry`: every output with that id takes the update's data and metadata
/// and keeps its kind. Returns true when one did.
pub(crate) fn update_entry_display(entry: &mut HistoryEntry, update: &HistoryOutput) -> bool {
    let Some(id) = &update.display_id else {
        return false;
    };
    let mut any = false;
    for o in entry
        .outputs
        .iter_mut()
        .filter(|o| o.display_id.as_ref() == Some(id))
    {
        o.data = update.data.clone();
        o.metadata = update.metadata.clone();
        any = true;
    }
    any
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
        order: None,
        finished_at: "2025-01-02T03:04:05Z".to_string(),
        other_client: false,
    }
}
