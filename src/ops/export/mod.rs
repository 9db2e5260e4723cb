//! Exporting history: a text transcript, a runnable script, or an nbformat 4 notebook.
//!
//! nbformat: <https://nbformat.readthedocs.io/en/latest/format_description.html>

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::session::history::{
    EntrySlot, HistoryEntry, HistoryOutput, describe_output, error_line, indent,
};
use crate::session::types::{ErrorInfo, RunStatus};

/// Export formats of `export_history` (its `format`, which the schema shows as an `enum`
/// with no description: the tool's own says what each is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, description = "")]
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

impl ExportContext {
    /// The export context of a live session.
    pub fn from_info(info: &crate::session::SessionInfo) -> ExportContext {
        ExportContext {
            session_id: info.session_id.clone(),
            kernel: info.kernel.clone(),
            display_name: info.display_name.clone(),
            language: info.language.clone(),
            language_info: info.kernel_info["language_info"].clone(),
            exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }
}

/// The file contents for `format`. Script: a comment header naming session, kernel and time
/// (comment syntax by language: `%` for octave/matlab, `#` otherwise), then each block's code
/// in order separated by a blank line. Transcript: `[n] code` then its outputs, like a REPL.
/// Notebook: nbformat 4.5 JSON with `metadata.kernelspec` {name, display_name, language} and
/// `metadata.language_info`, one code cell per entry (id, execution_count, source, outputs:
/// stream / execute_result / display_data (every MIME type history kept, images included,
/// with the output's metadata) / error), valid under the schema.
///
/// Transcript, per entry (blank line between entries):
///
/// ```text
/// [2] x = 1 / 0
///     → error: ZeroDivisionError: division by zero
///     Traceback (most recent call last):
///     …
/// ```
///
/// all code lines (continuations indented by 4), then indented by 4: the status line, the
/// full stdout, `stderr:` and the full stderr, `= result`, `[image/png]` / display text, and
/// the error traceback.
///
/// Script: a block that did not finish `ok` is preceded by a comment saying so
/// (`# (this block raised ZeroDivisionError when recorded)`); its code is kept as it was, so
/// running the script stops there just as the session did.
///
/// Notebook: sorted keys, 1-space indent, trailing newline (as Jupyter writes them). Each
/// cell's outputs are in the kernel's order (stream stretches as nbclient coalesces them,
/// displays, the `execute_result` with its whole bundle, the `error`). Entries from older
/// journals, which did not keep the order, get stdout, stderr, the displays, an
/// `execute_result` with text/plain when the entry has a result but no such output, then
/// the `error`. Cell ids come from run ids (made unique and schema-safe).
pub fn render(format: ExportFormat, ctx: &ExportContext, entries: &[HistoryEntry]) -> String {
    match format {
        ExportFormat::Transcript => render_transcript(entries),
        ExportFormat::Script => render_script(ctx, entries),
        ExportFormat::Notebook => render_notebook(ctx, entries),
    }
}

/// The script file extension from `language_info.file_extension` (e.g. ".py"), else from the
/// language name, else ".txt".
///
/// `file_extension` is used when it is `.` followed by 1–15 ASCII letters, digits, `_` or `-`
/// (a kernel's odd value cannot put a path into the name). Languages known by name (case
/// insensitive, `ctx.language` then `language_info.name`): python `.py`, r `.r`,
/// octave/matlab `.m`, bash/sh `.sh`, julia `.jl`.
pub fn script_extension(ctx: &ExportContext) -> String {
    if let Some(ext) = ctx
        .language_info
        .get("file_extension")
        .and_then(Value::as_str)
    {
        let tail = ext.strip_prefix('.').unwrap_or("");
        if (1..16).contains(&tail.len())
            && tail
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return ext.to_string();
        }
    }
    let info_name = ctx.language_info.get("name").and_then(Value::as_str);
    [Some(ctx.language.as_str()), info_name]
        .into_iter()
        .flatten()
        .find_map(|lang| {
            Some(match lang.to_ascii_lowercase().as_str() {
                "python" | "python3" => ".py",
                "r" => ".r",
                "octave" | "matlab" => ".m",
                "bash" | "sh" => ".sh",
                "julia" => ".jl",
                _ => return None,
            })
        })
        .unwrap_or(".txt")
        .to_string()
}

/// Code without leading/trailing blank lines' newlines (inner blank lines kept).
fn trimmed_code(code: &str) -> &str {
    code.trim_matches(|c| c == '\n' || c == '\r')
}

fn render_transcript(entries: &[HistoryEntry]) -> String {
    let mut blocks = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let mut lines = Vec::new();
        let code = trimmed_code(&entry.code);
        let mut code_lines = code.lines();
        lines.push(format!("[{}] {}", i + 1, code_lines.next().unwrap_or("")));
        lines.extend(code_lines.map(indent));

        let mut out: Vec<String> = Vec::new();
        let mut status = format!("→ {}", entry.status.as_str());
        if let Some(err) = &entry.error {
            status.push_str(": ");
            status.push_str(&error_line(err));
        }
        out.push(status);
        push_text_lines(&mut out, &entry.stdout);
        if !entry.stderr.trim_end_matches(['\n', '\r']).is_empty() {
            out.push("stderr:".to_string());
            push_text_lines(&mut out, &entry.stderr);
        }
        if let Some(result) = &entry.result {
            let mut result_lines = result.trim_end_matches(['\n', '\r']).lines();
            out.push(format!("= {}", result_lines.next().unwrap_or("")));
            out.extend(result_lines.map(|l| format!("  {l}")));
        }
        for output in &entry.outputs {
            out.extend(describe_output(output, |text| {
                let mut lines = Vec::new();
                push_text_lines(&mut lines, text);
                lines
            }));
        }
        if let Some(err) = &entry.error {
            for tb in &err.traceback {
                push_text_lines(&mut out, tb);
            }
        }
        lines.extend(out.iter().map(|l| indent(l)));
        blocks.push(lines.join("\n"));
    }
    let mut text = blocks.join("\n\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

/// Push each line of `text` (trailing newlines dropped).
fn push_text_lines(out: &mut Vec<String>, text: &str) {
    let text = text.trim_end_matches(['\n', '\r']);
    if !text.is_empty() {
        out.extend(text.lines().map(str::to_string));
    }
}

fn render_script(ctx: &ExportContext, entries: &[HistoryEntry]) -> String {
    let comment = match ctx.language.to_ascii_lowercase().as_str() {
        "octave" | "matlab" => "%",
        _ => "#",
    };
    // Header values are single-line so they cannot end the comment.
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    let mut out = String::new();
    out.push_str(&format!("{comment} kernel-mcp export\n"));
    out.push_str(&format!(
        "{comment} session: {}\n",
        one_line(&ctx.session_id)
    ));
    out.push_str(&format!(
        "{comment} kernel: {} [{}]\n",
        one_line(&ctx.display_name),
        one_line(&ctx.kernel)
    ));
    out.push_str(&format!(
        "{comment} exported_at: {}\n",
        one_line(&ctx.exported_at)
    ));
    for entry in entries {
        out.push('\n');
        if entry.status != RunStatus::Ok {
            let what = match (&entry.error, entry.status) {
                (Some(err), _) if !err.ename.is_empty() => {
                    format!("raised {}", one_line(&err.ename))
                }
                (_, RunStatus::Error) => "raised an error".to_string(),
                (_, status) => format!("ended with status {}", status.as_str()),
            };
            // Commented out, so the script runs to the end and rebuilds what did succeed.
            out.push_str(&format!(
                "{comment} (this block {what} when recorded; commented out)\n"
            ));
            for line in trimmed_code(&entry.code).lines() {
                out.push_str(&format!("{comment} {line}\n"));
            }
            continue;
        }
        let python = ctx.language.eq_ignore_ascii_case("python");
        for line in trimmed_code(&entry.code).lines() {
            // IPython magics and shell escapes are not Python.
            let t = line.trim_start();
            if python && (t.starts_with('%') || t.starts_with('!')) {
                out.push_str(&format!("# {line}  (IPython-only, not run by python)\n"));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A notebook cell id from a run id: the characters nbformat allows (`[a-zA-Z0-9-_]`, at
/// most 64), made unique with a numeric suffix when needed.
fn cell_id(run_id: &str, index: usize, used: &mut HashSet<String>) -> String {
    let base: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(48)
        .collect();
    let base = if base.is_empty() {
        format!("cell-{}", index + 1)
    } else {
        base
    };
    let mut id = base.clone();
    let mut n = 1;
    while used.contains(&id) {
        n += 1;
        id = format!("{base}-{n}");
    }
    used.insert(id.clone());
    id
}

fn render_notebook(ctx: &ExportContext, entries: &[HistoryEntry]) -> String {
    let mut used = HashSet::new();
    let cells: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| notebook_cell(entry, cell_id(&entry.run_id, i, &mut used)))
        .collect();

    let mut language_info = match &ctx.language_info {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    // The schema requires language_info.name.
    if !language_info.get("name").is_some_and(Value::is_string) {
        language_info.insert("name".into(), Value::String(ctx.language.clone()));
    }
    let notebook = json!({
        "cells": cells,
        "metadata": {
            "kernelspec": {
                "name": ctx.kernel,
                "display_name": ctx.display_name,
                "language": ctx.language,
            },
            "language_info": language_info,
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    });
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    notebook
        .serialize(&mut ser)
        .expect("serializing a serde_json::Value to memory cannot fail");
    let mut text = String::from_utf8(buf).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

/// The entry's execution count as nbformat allows it (a non-negative integer, else null).
pub fn execution_count(entry: &HistoryEntry) -> Option<i64> {
    entry.execution_count.filter(|n| *n >= 0)
}

/// A history entry's outputs as nbformat writes them in a code cell (see [`render`]).
pub fn cell_outputs(entry: &HistoryEntry) -> Vec<Value> {
    match &entry.order {
        Some(order) => ordered_outputs(entry, order),
        None => unordered_outputs(entry),
    }
}

/// One history entry as an nbformat 4 code cell with id `id` (also what the MCP Apps view
/// shows of a run, see `mcp/ui.rs`).
pub fn notebook_cell(entry: &HistoryEntry, id: String) -> Value {
    let outputs = cell_outputs(entry);
    // Another client's cell (a person's in Jupyter) says so; nbformat allows any metadata.
    let metadata = if entry.other_client {
        json!({"kernel_mcp": {"other_client": true}})
    } else {
        json!({})
    };
    json!({
        "cell_type": "code",
        "id": id,
        "execution_count": execution_count(entry),
        "metadata": metadata,
        "source": trimmed_code(&entry.code),
        "outputs": outputs,
    })
}

/// A kept display output as nbformat writes it.
fn display_output(entry: &HistoryEntry, output: &HistoryOutput) -> Value {
    if output.kind == "execute_result" {
        json!({
            "output_type": "execute_result",
            "execution_count": execution_count(entry),
            "data": output.data,
            "metadata": output.metadata,
        })
    } else {
        json!({
            "output_type": "display_data",
            "data": output.data,
            "metadata": output.metadata,
        })
    }
}

fn error_output(err: &ErrorInfo) -> Value {
    json!({
        "output_type": "error",
        "ename": err.ename,
        "evalue": err.evalue,
        "traceback": err.traceback,
    })
}

/// The outputs in the kernel's order (entries that kept [`HistoryEntry::order`]): only what
/// came on iopub. An error with no place in the order (one only the `execute_reply` or a
/// kernel's error line reported) is the run's status, not an output, as in nbclient's
/// notebook.
fn ordered_outputs(entry: &HistoryEntry, order: &[EntrySlot]) -> Vec<Value> {
    let mut outputs = Vec::with_capacity(order.len());
    let mut error_written = false;
    for slot in order {
        match slot {
            EntrySlot::Stream { name, text } if !text.is_empty() => {
                outputs.push(json!({"output_type": "stream", "name": name, "text": text}));
            }
            EntrySlot::Stream { .. } => {}
            EntrySlot::Output { index } => {
                if let Some(o) = entry.outputs.get(*index) {
                    outputs.push(display_output(entry, o));
                }
            }
            EntrySlot::Error => {
                if let (Some(err), false) = (&entry.error, error_written) {
                    outputs.push(error_output(err));
                    error_written = true;
                }
            }
        }
    }
    outputs
}

/// Entries from journals that did not keep the order: stdout, stderr, the displays, an
/// `execute_result` with the text/plain result when no such output was kept, the error.
fn unordered_outputs(entry: &HistoryEntry) -> Vec<Value> {
    let mut outputs = Vec::new();
    for (name, text) in [("stdout", &entry.stdout), ("stderr", &entry.stderr)] {
        if !text.is_empty() {
            outputs.push(json!({"output_type": "stream", "name": name, "text": text}));
        }
    }
    for output in &entry.outputs {
        outputs.push(display_output(entry, output));
    }
    let has_execute_result = entry.outputs.iter().any(|o| o.kind == "execute_result");
    if let (Some(result), false) = (&entry.result, has_execute_result) {
        outputs.push(json!({
            "output_type": "execute_result",
            "execution_count": execution_count(entry),
            "data": {"text/plain": result},
            "metadata": {},
        }));
    }
    if let Some(err) = &entry.error {
        outputs.push(error_output(err));
    }
    outputs
}

pub mod mirror;

#[cfg(test)]
mod tests;
