//! Exporting history: a text transcript, a runnable script, or an nbformat 4 notebook.
//!
//! nbformat: <https://nbformat.readthedocs.io/en/latest/format_description.html>

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::history::{HistoryEntry, describe_output, error_line, indent};
use super::types::RunStatus;

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
/// cell's outputs are stdout, stderr (streams, when non-empty), the display outputs in order,
/// an `execute_result` with text/plain when the entry has a result but no such output, then
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
fn execution_count(entry: &HistoryEntry) -> Option<i64> {
    entry.execution_count.filter(|n| *n >= 0)
}

fn notebook_cell(entry: &HistoryEntry, id: String) -> Value {
    let mut outputs = Vec::new();
    for (name, text) in [("stdout", &entry.stdout), ("stderr", &entry.stderr)] {
        if !text.is_empty() {
            outputs.push(json!({"output_type": "stream", "name": name, "text": text}));
        }
    }
    let mut has_execute_result = false;
    for output in &entry.outputs {
        if output.kind == "execute_result" {
            has_execute_result = true;
            outputs.push(json!({
                "output_type": "execute_result",
                "execution_count": execution_count(entry),
                "data": output.data,
                "metadata": output.metadata,
            }));
        } else {
            outputs.push(json!({
                "output_type": "display_data",
                "data": output.data,
                "metadata": output.metadata,
            }));
        }
    }
    if let (Some(result), false) = (&entry.result, has_execute_result) {
        outputs.push(json!({
            "output_type": "execute_result",
            "execution_count": execution_count(entry),
            "data": {"text/plain": result},
            "metadata": {},
        }));
    }
    if let Some(err) = &entry.error {
        outputs.push(json!({
            "output_type": "error",
            "ename": err.ename,
            "evalue": err.evalue,
            "traceback": err.traceback,
        }));
    }
    json!({
        "cell_type": "code",
        "id": id,
        "execution_count": execution_count(entry),
        "metadata": {},
        "source": trimmed_code(&entry.code),
        "outputs": outputs,
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::*;
    use crate::session::display::{history_output, output_item};
    use crate::session::history::HistoryOutput;
    use crate::session::types::ErrorInfo;

    /// A 1×1 PNG.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    fn venv_python() -> PathBuf {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} not found: run `make test` first (creates .venv)",
            python.display()
        );
        python
    }

    fn ctx(language: &str, language_info: Value) -> ExportContext {
        ExportContext {
            session_id: "analysis".into(),
            kernel: "python3".into(),
            display_name: "Python 3 (ipykernel)".into(),
            language: language.into(),
            language_info,
            exported_at: "2025-01-02T03:04:05Z".into(),
        }
    }

    fn python_ctx() -> ExportContext {
        ctx(
            "python",
            json!({"name": "python", "version": "3.12.0", "file_extension": ".py",
                   "mimetype": "text/x-python"}),
        )
    }

    fn entry(run_id: &str, n: i64, code: &str) -> HistoryEntry {
        HistoryEntry {
            run_id: run_id.into(),
            code: code.into(),
            status: RunStatus::Ok,
            execution_count: Some(n),
            generation: 1,
            stdout: String::new(),
            stderr: String::new(),
            result: None,
            error: None,
            outputs: Vec::new(),
            finished_at: "2025-01-02T03:04:05Z".into(),
        }
    }

    fn zero_division(run_id: &str, n: i64) -> HistoryEntry {
        HistoryEntry {
            status: RunStatus::Error,
            error: Some(ErrorInfo {
                ename: "ZeroDivisionError".into(),
                evalue: "division by zero".into(),
                traceback: vec![
                    "Traceback (most recent call last):".into(),
                    "  Cell In[3], line 1\n    1 / 0".into(),
                    "ZeroDivisionError: division by zero".into(),
                ],
            }),
            ..entry(run_id, n, "1 / 0")
        }
    }

    fn bundle(pairs: &[(&str, &str)]) -> serde_json::Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect()
    }

    /// A display's bundle with text, HTML, JSON and an image.
    fn whole_bundle() -> Map<String, Value> {
        json!({
            "text/plain": "<Figure size 640x480>",
            "text/html": "<div><b>plot</b> of 3 points</div>",
            "application/json": {"points": [[0, 1], [1, 2], [2, 4]], "label": "y"},
            "image/png": PNG,
        })
        .as_object()
        .unwrap()
        .clone()
    }

    /// print, a multi-line definition, a result, an error, a plot.
    fn session_entries() -> Vec<HistoryEntry> {
        vec![
            HistoryEntry {
                stdout: "hello\nworld\n".into(),
                stderr: "careful\n".into(),
                ..entry("run-1a2b3c", 1, "a = 10\nprint('hello')\nprint('world')")
            },
            HistoryEntry {
                result: Some("20".into()),
                outputs: vec![HistoryOutput {
                    kind: "execute_result".into(),
                    data: bundle(&[("text/plain", "20")]),
                    metadata: Map::new(),
                }],
                ..entry(
                    "run-4d5e6f",
                    2,
                    "def double(x):\n    return x * 2\n\nb = double(a)\nb\n",
                )
            },
            zero_division("run-7a8b9c", 3),
            HistoryEntry {
                result: Some("'s'".into()),
                outputs: vec![HistoryOutput {
                    kind: "display_data".into(),
                    data: whole_bundle(),
                    metadata: json!({"image/png": {"width": 1, "height": 1}})
                        .as_object()
                        .unwrap()
                        .clone(),
                }],
                ..entry("run-1a2b3c", 4, "plot()\n's'")
            },
        ]
    }

    #[test]
    fn script_extension_sources() {
        assert_eq!(script_extension(&python_ctx()), ".py");
        let with_ext = |lang: &str, info: Value| script_extension(&ctx(lang, info));
        assert_eq!(
            with_ext("R", json!({"name": "R", "file_extension": ".r"})),
            ".r"
        );
        assert_eq!(with_ext("python", Value::Null), ".py");
        assert_eq!(with_ext("python", json!({"file_extension": ""})), ".py");
        assert_eq!(with_ext("python", json!({"file_extension": "py"})), ".py");
        assert_eq!(
            with_ext("python", json!({"file_extension": "./../x"})),
            ".py"
        );
        assert_eq!(with_ext("octave", Value::Null), ".m");
        assert_eq!(with_ext("MATLAB", Value::Null), ".m");
        assert_eq!(with_ext("bash", Value::Null), ".sh");
        assert_eq!(with_ext("sh", Value::Null), ".sh");
        assert_eq!(with_ext("julia", Value::Null), ".jl");
        assert_eq!(with_ext("", json!({"name": "julia"})), ".jl");
        assert_eq!(with_ext("cobol", Value::Null), ".txt");
        assert_eq!(with_ext("cobol", json!({"file_extension": ".cbl"})), ".cbl");
    }

    #[test]
    fn script_is_runnable_python_that_rebuilds_state() {
        let entries: Vec<HistoryEntry> = session_entries()
            .into_iter()
            .filter(|e| e.status == RunStatus::Ok)
            .map(|e| HistoryEntry {
                code: e.code.replace("plot()", "import sys"),
                ..e
            })
            .collect();
        let script = render(ExportFormat::Script, &python_ctx(), &entries);
        assert!(
            script.starts_with(
                "# kernel-mcp export\n# session: analysis\n\
                 # kernel: Python 3 (ipykernel) [python3]\n\
                 # exported_at: 2025-01-02T03:04:05Z\n\na = 10\n"
            ),
            "{script}"
        );
        assert!(script.ends_with("'s'\n"), "{script}");

        let dir = tempfile::tempdir().unwrap();
        let file = dir
            .path()
            .join(format!("export{}", script_extension(&python_ctx())));
        std::fs::write(&file, &script).unwrap();
        let out = Command::new(venv_python()).arg(&file).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\nworld\n");
        // The script's globals after running it: the session's state.
        let check = "import runpy, sys\n\
                     g = runpy.run_path(sys.argv[1])\n\
                     assert g['a'] == 10 and g['b'] == 20 and g['double'](4) == 8, g";
        let out = Command::new(venv_python())
            .args(["-c", check])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn script_comments_out_failed_blocks_and_magics() {
        let entries = vec![
            entry("r1", 1, "x = 1"),
            zero_division("r2", 2),
            HistoryEntry {
                status: RunStatus::Timeout,
                ..entry("r3", 3, "sleep(100)")
            },
            entry("r4", 4, "%matplotlib inline\ny = 2"),
        ];
        let script = render(ExportFormat::Script, &python_ctx(), &entries);
        assert!(
            script.ends_with(
                "\nx = 1\n\n# (this block raised ZeroDivisionError when recorded; commented out)\n# 1 / 0\n\n\
                 # (this block ended with status timeout when recorded; commented out)\n# sleep(100)\n\n\
                 # %matplotlib inline  (IPython-only, not run by python)\ny = 2\n"
            ),
            "{script}"
        );
        let octave = render(ExportFormat::Script, &ctx("octave", Value::Null), &entries);
        assert!(octave.starts_with("% kernel-mcp export\n% session: analysis\n"));
        assert!(octave.contains(
            "\n% (this block raised ZeroDivisionError when recorded; commented out)\n% 1 / 0\n"
        ));
        assert!(
            octave.contains("\n%matplotlib inline\n"),
            "magics are only rewritten for Python"
        );
    }

    #[test]
    fn notebook_passes_nbformat_validate() {
        let entries = session_entries();
        let text = render(ExportFormat::Notebook, &python_ctx(), &entries);
        assert!(text.starts_with("{\n \"cells\": [\n  {\n"), "{text}");
        assert!(text.ends_with("}\n"));

        let nb: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(nb["nbformat"], 4);
        assert_eq!(nb["nbformat_minor"], 5);
        assert_eq!(
            nb["metadata"]["kernelspec"],
            json!({"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"})
        );
        assert_eq!(nb["metadata"]["language_info"]["version"], "3.12.0");
        let cells = nb["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 4);
        let ids: Vec<&str> = cells.iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert_eq!(
            ids,
            ["run-1a2b3c", "run-4d5e6f", "run-7a8b9c", "run-1a2b3c-2"]
        );
        let kinds = |i: usize| -> Vec<String> {
            cells[i]["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    let t = o["output_type"].as_str().unwrap();
                    match o["name"].as_str() {
                        Some(name) => format!("{t}:{name}"),
                        None => t.to_string(),
                    }
                })
                .collect()
        };
        assert_eq!(kinds(0), ["stream:stdout", "stream:stderr"]);
        assert_eq!(kinds(1), ["execute_result"]);
        assert_eq!(kinds(2), ["error"]);
        // The result had no execute_result output: one is made from text/plain.
        assert_eq!(kinds(3), ["display_data", "execute_result"]);
        assert_eq!(cells[0]["outputs"][0]["text"], "hello\nworld\n");
        assert_eq!(cells[1]["execution_count"], 2);
        assert_eq!(cells[1]["outputs"][0]["execution_count"], 2);
        assert_eq!(
            cells[1]["source"],
            "def double(x):\n    return x * 2\n\nb = double(a)\nb"
        );
        assert_eq!(cells[2]["outputs"][0]["ename"], "ZeroDivisionError");
        // Every MIME type of the display, and its metadata, come out whole.
        assert_eq!(
            cells[3]["outputs"][0]["data"],
            Value::Object(whole_bundle()),
            "{text}"
        );
        assert_eq!(
            cells[3]["outputs"][0]["metadata"],
            json!({"image/png": {"width": 1, "height": 1}})
        );
        assert_eq!(cells[3]["outputs"][1]["data"]["text/plain"], "'s'");

        // Null language_info and a missing execution count are still valid.
        let mut odd = entries.clone();
        odd[0].execution_count = None;
        odd[1].run_id = "!!".into();
        let odd_text = render(ExportFormat::Notebook, &ctx("python", Value::Null), &odd);
        let odd_nb: Value = serde_json::from_str(&odd_text).unwrap();
        assert_eq!(
            odd_nb["metadata"]["language_info"],
            json!({"name": "python"})
        );
        assert_eq!(odd_nb["cells"][0]["execution_count"], Value::Null);
        assert_eq!(odd_nb["cells"][1]["id"], "cell-2");
        let empty_text = render(ExportFormat::Notebook, &python_ctx(), &[]);

        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("a.ipynb", &text),
            ("b.ipynb", &odd_text),
            ("c.ipynb", &empty_text),
        ] {
            let file = dir.path().join(name);
            std::fs::write(&file, text).unwrap();
            nbformat_validate(&file);
        }
    }

    #[test]
    fn notebook_keeps_every_mime_type_a_kernel_sent() {
        let content = json!({
            "data": whole_bundle(),
            "metadata": {"application/json": {"expanded": false}},
            "transient": {"display_id": "d1"},
        });
        let item = output_item("display_data", &content);
        assert!(
            !item.bundle.data.contains_key("image/png"),
            "the image's base64 is held once, in item.image"
        );
        let big = json!({"data": {"text/plain": "<IPython.core.display.HTML object>",
                                  "text/html": format!("<p>{}</p>", "x".repeat(2 << 20))}});
        let entries = vec![HistoryEntry {
            outputs: vec![
                history_output(&item),
                history_output(&output_item("display_data", &big)),
            ],
            ..entry("run-1", 1, "show()")
        }];
        let text = render(ExportFormat::Notebook, &python_ctx(), &entries);
        let nb: Value = serde_json::from_str(&text).unwrap();
        let outputs = nb["cells"][0]["outputs"].as_array().unwrap();
        assert_eq!(outputs[0]["data"], Value::Object(whole_bundle()));
        assert_eq!(
            outputs[0]["metadata"],
            json!({"application/json": {"expanded": false}})
        );
        // A value over the cap is left out, with a note naming it and its size; the small
        // text/plain is kept as sent.
        let data = outputs[1]["data"].as_object().unwrap();
        assert!(!data.contains_key("text/html"), "{data:?}");
        assert_eq!(data["text/plain"], "<IPython.core.display.HTML object>");
        let omitted = &outputs[1]["metadata"]["kernel_mcp"]["omitted_bytes"]["text/html"];
        assert_eq!(omitted.as_u64(), Some((2 << 20) + 7));

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bundle.ipynb");
        std::fs::write(&file, &text).unwrap();
        nbformat_validate(&file);
    }

    /// Run `nbformat.validate` on the notebook at `file` with the venv's Python.
    fn nbformat_validate(file: &Path) {
        let out = Command::new(venv_python())
            .args([
                "-c",
                "import nbformat, sys; \
                 nbformat.validate(nbformat.read(sys.argv[1], as_version=4))",
            ])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} invalid: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn transcript_has_full_outputs() {
        let mut entries = session_entries();
        entries[0].stdout = (1..=10).map(|i| format!("line {i}\n")).collect();
        let text = render(ExportFormat::Transcript, &python_ctx(), &entries);
        let expected_start = "[1] a = 10\n    print('hello')\n    print('world')\n    → ok\n";
        assert!(text.starts_with(expected_start), "{text}");
        for i in 1..=10 {
            assert!(text.contains(&format!("\n    line {i}\n")), "{text}");
        }
        assert!(text.contains("    stderr:\n    careful\n\n[2] def double(x):\n"));
        assert!(text.contains("        return x * 2\n"), "{text}");
        assert!(
            text.contains("    b\n    → ok\n    = 20\n\n[3] 1 / 0\n"),
            "{text}"
        );
        assert!(text.contains(
            "    → error: ZeroDivisionError: division by zero\n    \
             Traceback (most recent call last):\n      Cell In[3], line 1\n        1 / 0\n"
        ));
        assert!(text.ends_with("[4] plot()\n    's'\n    → ok\n    = 's'\n    [image/png]\n"));
        assert_eq!(render(ExportFormat::Transcript, &python_ctx(), &[]), "");
    }
}
