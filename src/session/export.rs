//! Exporting history: a text transcript, a runnable script, or an nbformat 4 notebook.
//!
//! nbformat: <https://nbformat.readthedocs.io/en/latest/format_description.html>

use serde_json::Value;

use super::history::HistoryEntry;

/// Export formats of `export_history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Transcript,
    Script,
    Notebook,
}

/// What the exporter needs to know about the session.
#[derive(Debug, Clone)]
pub struct ExportContext {
    pub session_id: String,
    /// Kernelspec name and display name, and the language name.
    pub kernel: String,
    pub display_name: String,
    pub language: String,
    /// `language_info` from kernel_info_reply (`name`, `file_extension`, `mimetype`, …); may be null.
    pub language_info: Value,
    /// RFC 3339 time of the export.
    pub exported_at: String,
}

/// The file contents for `format`. Script: a comment header naming session, kernel and time
/// (comment syntax by language: `%` for octave/matlab, `#` otherwise), then each block's code
/// in order separated by a blank line. Transcript: `[n] code` then its outputs, like a REPL.
/// Notebook: nbformat 4.5 JSON with `metadata.kernelspec` {name, display_name, language} and
/// `metadata.language_info`, one code cell per entry (id, execution_count, source, outputs:
/// stream / execute_result / display_data (images included) / error), valid under the schema.
pub fn render(format: ExportFormat, ctx: &ExportContext, entries: &[HistoryEntry]) -> String {
    todo!()
}

/// The script file extension from `language_info.file_extension` (e.g. ".py"), else from the
/// language name, else ".txt".
pub fn script_extension(ctx: &ExportContext) -> String {
    todo!()
}
