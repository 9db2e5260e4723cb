//! Text renderings of history entries: the REPL-like listing of `history` ([`render_text`]),
//! the short per-entry [`output_summary`], and the line helpers the transcript export shares
//! ([`describe_output`], [`error_line`], [`indent`]).

use super::{HistoryEntry, HistoryOutput};
use crate::session::display::readable_text;
use crate::session::types::ErrorInfo;

/// Code lines shown per entry by [`render_text`].
const TEXT_CODE_LINES: usize = 20;
/// Characters shown per line in [`render_text`] / [`output_summary`]; longer lines end in `…`.
const TEXT_LINE_CHARS: usize = 200;
/// Head and tail lines of each stream shown by [`output_summary`].
const SUMMARY_HEAD_LINES: usize = 3;
const SUMMARY_TAIL_LINES: usize = 2;

/// The REPL-like rendering of entries: `[n] <code>` (n = index + 1) followed by a short
/// output summary for each.
///
/// Shape, per entry:
///
/// ```text
/// [3] def f(x):
///         return 1 / x
///     f(0)
///     → error: ZeroDivisionError: division by zero
/// ```
///
/// The first code line follows `[n] `; continuation lines are indented by 4 spaces, at most
/// 20 code lines are shown, then `    … (k more lines)`. The [`output_summary`] lines follow,
/// indented by 4. Lines are joined with `\n` (no trailing newline); an empty slice gives "".
pub fn render_text(entries: &[(usize, &HistoryEntry)]) -> String {
    let mut lines: Vec<String> = Vec::new();
    for (index, entry) in entries {
        let code = entry.code.trim_matches(|c| c == '\n' || c == '\r');
        let code_lines: Vec<&str> = code.lines().collect();
        let first = code_lines.first().copied().unwrap_or("");
        // Another client's cell (a person in Jupyter) is marked as theirs.
        let whose = if entry.other_client {
            "(other client) "
        } else {
            ""
        };
        lines.push(format!(
            "[{}] {whose}{}",
            index + 1,
            clip_line(first, TEXT_LINE_CHARS)
        ));
        for line in code_lines.iter().take(TEXT_CODE_LINES).skip(1) {
            lines.push(indent(&clip_line(line, TEXT_LINE_CHARS)));
        }
        if code_lines.len() > TEXT_CODE_LINES {
            lines.push(format!(
                "    … ({} more lines)",
                code_lines.len() - TEXT_CODE_LINES
            ));
        }
        for line in output_summary(entry).lines() {
            lines.push(indent(line));
        }
    }
    lines.join("\n")
}

/// A one-paragraph output summary of an entry (status, result, first/last lines of output, error).
///
/// Lines, in order (absent parts are left out):
/// - the status: `→ ok`, `→ error: ZeroDivisionError: division by zero`, `→ timeout`,
///   `→ interrupted: KeyboardInterrupt` (the error's name and first line of its value, if any);
/// - stdout: its first 3 and last 2 lines with `… (k lines)` between when longer;
/// - stderr: `stderr:` then its lines, bounded the same way;
/// - the result: `= 2` (a multi-line result continues indented by 2, bounded the same way);
/// - display outputs: `[image/png]` per image, else the first line of a `display_data`'s
///   readable text (markdown, JSON, LaTeX, text/plain or HTML text), else its MIME types in
///   brackets.
///
/// Lines longer than 200 characters are cut with `…`. Joined with `\n`, no trailing newline.
pub fn output_summary(entry: &HistoryEntry) -> String {
    let mut lines = Vec::new();

    let mut status = format!("→ {}", entry.status.as_str());
    if let Some(err) = &entry.error {
        status.push_str(": ");
        status.push_str(&error_line(err));
    }
    lines.push(clip_line(&status, TEXT_LINE_CHARS));

    lines.extend(head_tail_lines(&entry.stdout));
    let stderr = head_tail_lines(&entry.stderr);
    if !stderr.is_empty() {
        lines.push("stderr:".to_string());
        lines.extend(stderr);
    }
    if let Some(result) = &entry.result {
        let result_lines = head_tail_lines(result);
        if result_lines.is_empty() {
            lines.push("=".to_string());
        }
        for (i, line) in result_lines.into_iter().enumerate() {
            lines.push(if i == 0 {
                format!("= {line}")
            } else {
                format!("  {line}")
            });
        }
    }
    for output in &entry.outputs {
        lines.extend(describe_output(output, |text| {
            vec![clip_line(
                text.lines().next().unwrap_or(""),
                TEXT_LINE_CHARS,
            )]
        }));
    }
    lines.join("\n")
}

/// How a display output reads as text: `[image/png]` per image; else a `display_data`'s
/// readable text (its richest readable form, as the agent saw it: see
/// [`crate::session::display::readable_text`]), shown through `text`; else its MIME types in
/// brackets. An `execute_result` without images, or a display read as the result (IRkernel),
/// adds nothing (its text is the entry's `result`).
pub(crate) fn describe_output(
    output: &HistoryOutput,
    text: impl FnOnce(&str) -> Vec<String>,
) -> Vec<String> {
    let images: Vec<String> = output
        .data
        .keys()
        .filter(|m| m.starts_with("image/"))
        .map(|m| format!("[{m}]"))
        .collect();
    if !images.is_empty() || output.kind != "display_data" || output.is_result {
        return images;
    }
    match readable_text(&output.data) {
        Some(t) => text(&t),
        None => {
            let mimes: Vec<&str> = output.data.keys().map(String::as_str).collect();
            vec![format!("[{}]", mimes.join(", "))]
        }
    }
}

/// `ename: first line of evalue`, or just `ename` when the value is empty.
pub(crate) fn error_line(err: &ErrorInfo) -> String {
    match err.evalue.lines().next().filter(|l| !l.is_empty()) {
        Some(value) if !err.ename.is_empty() => format!("{}: {value}", err.ename),
        Some(value) => value.to_string(),
        None => err.ename.clone(),
    }
}

/// The first 3 and last 2 lines of `text` with `… (k lines)` between when it has more than
/// 6 lines (hiding a single line would not save anything). Empty text gives no lines.
fn head_tail_lines(text: &str) -> Vec<String> {
    let text = text.trim_end_matches(['\n', '\r']);
    if text.is_empty() {
        return Vec::new();
    }
    let all: Vec<&str> = text.lines().collect();
    let clip = |l: &&str| clip_line(l, TEXT_LINE_CHARS);
    if all.len() <= SUMMARY_HEAD_LINES + SUMMARY_TAIL_LINES + 1 {
        return all.iter().map(clip).collect();
    }
    let omitted = all.len() - SUMMARY_HEAD_LINES - SUMMARY_TAIL_LINES;
    let mut out: Vec<String> = all[..SUMMARY_HEAD_LINES].iter().map(clip).collect();
    out.push(format!("… ({omitted} lines)"));
    out.extend(all[all.len() - SUMMARY_TAIL_LINES..].iter().map(clip));
    out
}

/// `line` indented by 4 spaces (an empty line stays empty: no trailing whitespace).
pub(crate) fn indent(line: &str) -> String {
    if line.is_empty() {
        String::new()
    } else {
        format!("    {line}")
    }
}

/// `line` cut to `max` characters, ending in `…` when cut.
fn clip_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::session::history::sample_entry as entry;
    use crate::session::types::RunStatus;

    #[test]
    fn render_text_numbers_from_one_with_summaries() {
        let a = HistoryEntry {
            result: Some("2".into()),
            ..entry("run-a", "1 + 1\n", RunStatus::Ok)
        };
        let b = HistoryEntry {
            error: Some(ErrorInfo {
                ename: "ZeroDivisionError".into(),
                evalue: "division by zero".into(),
                traceback: vec!["Traceback …".into()],
            }),
            stdout: "hi\n".into(),
            ..entry(
                "run-b",
                "def f(x):\n    return 1 / x\nf(0)",
                RunStatus::Error,
            )
        };
        let text = render_text(&[(0, &a), (4, &b)]);
        assert_eq!(
            text,
            "[1] 1 + 1\n    → ok\n    = 2\n\
             [5] def f(x):\n        return 1 / x\n    f(0)\n    \
             → error: ZeroDivisionError: division by zero\n    hi"
        );
        assert_eq!(render_text(&[]), "");
    }

    #[test]
    fn render_text_bounds_code_and_streams() {
        let code: Vec<String> = (1..=25).map(|i| format!("x{i} = {i}")).collect();
        let stdout: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let mut data = serde_json::Map::new();
        data.insert("image/png".into(), Value::String("iVBORw0KGgo=".into()));
        data.insert("text/plain".into(), Value::String("<Figure>".into()));
        let e = HistoryEntry {
            stdout,
            stderr: "warn\n".into(),
            outputs: vec![HistoryOutput {
                kind: "display_data".into(),
                data,
                metadata: serde_json::Map::new(),
                ..Default::default()
            }],
            ..entry("run-c", &code.join("\n"), RunStatus::Ok)
        };
        let text = render_text(&[(2, &e)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "[3] x1 = 1");
        assert_eq!(lines[19], "    x20 = 20");
        assert_eq!(lines[20], "    … (5 more lines)");
        assert_eq!(
            &lines[21..],
            &[
                "    → ok",
                "    line 1",
                "    line 2",
                "    line 3",
                "    … (5 lines)",
                "    line 9",
                "    line 10",
                "    stderr:",
                "    warn",
                "    [image/png]",
            ]
        );
    }

    #[test]
    fn output_summary_shapes() {
        let six: String = (1..=6).map(|i| format!("{i}\n")).collect();
        let e = HistoryEntry {
            stdout: six,
            ..entry("r", "x", RunStatus::Timeout)
        };
        assert_eq!(output_summary(&e), "→ timeout\n1\n2\n3\n4\n5\n6");
        let long = "y".repeat(300);
        let e = HistoryEntry {
            result: Some(format!("{long}\nsecond")),
            error: Some(ErrorInfo {
                ename: "KeyboardInterrupt".into(),
                evalue: String::new(),
                traceback: vec![],
            }),
            ..entry("r", "x", RunStatus::Interrupted)
        };
        let summary = output_summary(&e);
        let lines: Vec<&str> = summary.lines().collect();
        assert_eq!(lines[0], "→ interrupted: KeyboardInterrupt");
        assert_eq!(lines[1], format!("= {}…", "y".repeat(200)));
        assert_eq!(lines[2], "  second");
    }

    #[test]
    fn a_display_summarizes_as_the_text_the_agent_saw() {
        let output = |data: Value| HistoryOutput {
            kind: "display_data".into(),
            data: data.as_object().unwrap().clone(),
            metadata: serde_json::Map::new(),
            ..Default::default()
        };
        let e = HistoryEntry {
            outputs: vec![
                output(
                    json!({"text/plain": "<IPython.core.display.Markdown object>",
                              "text/markdown": "# Results\n\nAll good."}),
                ),
                // As journals before whole bundles stored it.
                output(json!({"text/plain": "Total : 3"})),
                output(json!({"application/vnd.x+json": {}})),
            ],
            ..entry("r", "show()", RunStatus::Ok)
        };
        assert_eq!(
            output_summary(&e),
            "→ ok\n# Results\nTotal : 3\n[application/vnd.x+json]"
        );
    }
}
