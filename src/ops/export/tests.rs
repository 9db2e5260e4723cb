//! Tests of the three export formats (the notebook one validated by nbformat).
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
        execution_count: Some(n),
        ..crate::session::history::sample_entry(run_id, code, RunStatus::Ok)
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
                ..Default::default()
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
                ..Default::default()
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
