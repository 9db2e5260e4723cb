//! The fidelity test (issue 17): real notebooks from Jupyter-ecosystem packages
//! (tests/fidelity/SOURCES), executed once by nbclient into tests/fidelity/reference/, are run
//! cell by cell through the real binary over MCP; what the agent sees and what the notebook
//! export writes are compared with nbclient's outputs, cell by cell, up to the normalisations
//! in [`NORMALISATIONS`] (docs/fidelity.md says why each is intended). A second test
//! re-executes exported notebooks with nbclient and compares again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::history::*;
use crate::common::*;
use kernel_mcp::session::clean_text;
use serde_json::{Map, Value, json};

/// Every difference between nbclient's outputs and ours that is intended, applied to both
/// sides before comparing. The report prints this list with how often each applied.
const NORMALISATIONS: [(&str, &str); 8] = [
    (
        "terminal",
        "stream text, tracebacks and error values rendered as a terminal shows them: ANSI escapes removed, `\\r` and `\\b` applied (what the agent reads)",
    ),
    (
        "coalesced",
        "consecutive stream outputs of the same stream joined into one, before terminal rendering (nbclient keeps one output per message; kernel-mcp keeps them as nbformat's coalesce_streams and JupyterLab show them)",
    ),
    (
        "bounded",
        "a stream over 20000 bytes is compared by its head and tail (the agent sees head + tail, the rest is pageable)",
    ),
    (
        "images",
        "raster images compared by MIME type only (the reference leaves their bytes out; PNG bytes are not stable)",
    ),
    (
        "addresses",
        "memory addresses `0x` + 6 or more hex digits masked (they differ per process)",
    ),
    (
        "list-text",
        "nbformat's list-of-lines form of text joined into one string (the same text)",
    ),
    (
        "agent-result",
        "the agent's `result` of a rich execute_result is its richest readable form, so only a text/plain-only Out[] is compared as text",
    ),
    (
        "reply-error",
        "an error the kernel reported only in its execute_reply, printing it on stderr (ipykernel's UsageError for an unknown magic), is the agent's `error`; the notebook has the stderr line only",
    ),
];

pub(crate) fn fidelity_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fidelity")
}

/// Counts of each normalisation that changed something.
#[derive(Default)]
pub(crate) struct Applied(BTreeMap<&'static str, usize>);

impl Applied {
    fn note(&mut self, name: &'static str, changed: bool) {
        if changed {
            *self.0.entry(name).or_default() += 1;
        }
    }
}

/// nbformat text: a string, or a list of strings joined.
fn joined(v: &Value, applied: &mut Applied) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            applied.note("list-text", true);
            parts.iter().filter_map(Value::as_str).collect()
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Mask what names a process: memory addresses.
fn masked(text: &str, applied: &mut Applied) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let hex = rest[i + 2..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        if hex >= 6 {
            out.push_str("0x…");
            applied.note("addresses", true);
        } else {
            out.push_str(&rest[i..i + 2 + hex]);
        }
        rest = &rest[i + 2 + hex..];
    }
    out.push_str(rest);
    out
}

fn terminal(text: &str, applied: &mut Applied) -> String {
    let cleaned = clean_text(text);
    applied.note("terminal", cleaned != text);
    masked(&cleaned, applied)
}

/// `outputs` with consecutive stream outputs of the same stream joined (raw text).
fn coalesced(outputs: &[Value], applied: &mut Applied) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(outputs.len());
    for o in outputs {
        if let Some(last) = out.last_mut()
            && o["output_type"] == "stream"
            && last["output_type"] == "stream"
            && last["name"] == o["name"]
        {
            let text = joined(&last["text"], applied) + &joined(&o["text"], applied);
            last["text"] = Value::String(text);
            applied.note("coalesced", true);
            continue;
        }
        out.push(o.clone());
    }
    out
}

/// One output normalised for comparison.
fn normal_output(o: &Value, applied: &mut Applied) -> Value {
    let kind = o["output_type"].as_str().unwrap_or("");
    match kind {
        "stream" => json!({
            "output_type": "stream",
            "name": o["name"],
            "text": terminal(&joined(&o["text"], applied), applied),
        }),
        "error" => json!({
            "output_type": "error",
            "ename": terminal(o["ename"].as_str().unwrap_or(""), applied),
            "evalue": terminal(o["evalue"].as_str().unwrap_or(""), applied),
            "traceback": o["traceback"].as_array().into_iter().flatten()
                .map(|l| terminal(&joined(l, applied), applied)).collect::<Vec<_>>(),
        }),
        _ => {
            let mut data = Map::new();
            for (mime, v) in o["data"].as_object().into_iter().flatten() {
                let v = if mime.starts_with("image/") && mime != "image/svg+xml" {
                    applied.note("images", true);
                    json!("<image>")
                } else if v.is_string() || v.is_array() {
                    Value::String(masked(&joined(v, applied), applied))
                } else {
                    v.clone()
                };
                data.insert(mime.clone(), v);
            }
            let metadata = o["metadata"].as_object().cloned().unwrap_or_default();
            let mut n = json!({"output_type": kind, "data": data, "metadata": metadata});
            if kind == "execute_result" {
                n["execution_count"] = o["execution_count"].clone();
            }
            n
        }
    }
}

/// A reference notebook's non-empty code cells: (source, outputs, execution_count).
pub(crate) fn code_cells(nb: &Value) -> Vec<(String, Vec<Value>, Value)> {
    let mut none = Applied::default();
    nb["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["cell_type"] == "code")
        .map(|c| {
            (
                joined(&c["source"], &mut none),
                c["outputs"].as_array().cloned().unwrap_or_default(),
                c["execution_count"].clone(),
            )
        })
        .filter(|(s, _, _)| !s.trim().is_empty())
        .collect()
}

/// What the agent should see of a cell nbclient recorded, as the fields it is compared by.
fn expected_agent_view(outputs: &[Value], applied: &mut Applied) -> Value {
    let mut streams = [String::new(), String::new()];
    let mut result = Value::Null;
    let mut shown = Vec::new();
    let mut error = Value::Null;
    for o in outputs {
        match o["output_type"].as_str().unwrap_or("") {
            "stream" => {
                let i = usize::from(o["name"] == "stderr");
                streams[i].push_str(&joined(&o["text"], applied));
            }
            "error" => {
                error = json!([
                    terminal(o["ename"].as_str().unwrap_or(""), applied),
                    terminal(o["evalue"].as_str().unwrap_or(""), applied),
                ]);
            }
            kind => {
                let mimes: Vec<String> = o["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone())
                    .collect();
                let plain_only = mimes.iter().all(|m| m == "text/plain");
                if kind == "execute_result" {
                    result = if plain_only {
                        Value::String(terminal(
                            &joined(&o["data"]["text/plain"], applied),
                            applied,
                        ))
                    } else {
                        applied.note("agent-result", true);
                        json!("<rich>")
                    };
                }
                if kind == "display_data" || !plain_only {
                    shown.push(json!(mimes));
                }
            }
        }
    }
    let [stdout, stderr] = streams.map(|s| bounded(&terminal(&s, applied), applied));
    // Every display reads as something (its text, or an image): none is blank.
    json!({"stdout": stdout, "stderr": stderr, "result": result, "outputs": shown, "error": error,
           "blank_outputs": 0})
}

/// The head and tail of a text over the agent's stream bound, else the text.
fn bounded(text: &str, applied: &mut Applied) -> String {
    const SHOWN: usize = 20_000;
    if text.len() <= SHOWN {
        return text.to_string();
    }
    applied.note("bounded", true);
    let head: String = text.chars().take(2000).collect();
    let tail: String = text
        .chars()
        .rev()
        .take(2000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}[…]{tail}")
}

/// The agent's result normalised the same way.
fn agent_view(r: &Value, applied: &mut Applied) -> Value {
    let stream = |name: &str, applied: &mut Applied| {
        let text = r[name].as_str().unwrap_or("");
        if r["truncated"][name].is_object() {
            // Compare head and tail only; the marker between them is ours.
            applied.note("bounded", true);
            let head: String = text.chars().take(2000).collect();
            let tail: String = text
                .chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("{head}[…]{tail}")
        } else {
            masked(text, applied)
        }
    };
    let result = match (&r["result"], r["outputs"].as_array()) {
        (Value::Null, _) => Value::Null,
        (res, Some(outs)) if outs.iter().any(|o| o["kind"] == "execute_result") => {
            let _ = res;
            json!("<rich>")
        }
        (res, _) => Value::String(masked(res.as_str().unwrap_or(""), applied)),
    };
    let shown: Vec<Value> = r["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["mime_types"].clone())
        .collect();
    let error = if r["error"].is_object() {
        json!([
            masked(r["error"]["ename"].as_str().unwrap_or(""), applied),
            masked(r["error"]["evalue"].as_str().unwrap_or(""), applied),
        ])
    } else {
        Value::Null
    };
    let blank = r["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["image"].is_null() && o["text"].as_str().is_none_or(|t| t.trim().is_empty()))
        .count();
    json!({
        "stdout": stream("stdout", applied),
        "stderr": stream("stderr", applied),
        "result": result,
        "outputs": shown,
        "error": error,
        "blank_outputs": blank,
    })
}

/// The "reply-error" normalisation: the agent's error is left out when nbclient's cell has
/// none and the error's value is on the agent's stderr (the kernel printed it, and sent the
/// error in its execute_reply only).
fn reply_error(want: &Value, got: &mut Value, applied: &mut Applied) {
    let evalue = got["error"][1].as_str().unwrap_or_default().to_string();
    let printed = !evalue.is_empty() && got["stderr"].as_str().is_some_and(|e| e.contains(&evalue));
    if want["error"].is_null() && printed {
        got["error"] = Value::Null;
        applied.note("reply-error", true);
    }
}

/// Export session `session`'s history as a notebook into `dir`; returns its path and JSON.
async fn export(server: &Server, session: &str, dir: &Path) -> (PathBuf, Value) {
    let path = dir.join(format!("{session}.ipynb"));
    let r = server
        .call(
            "export_history",
            json!({"session_id": session, "path": path, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    let nb = serde_json::from_str(&std::fs::read_to_string(&path).expect("export"))
        .expect("export is JSON");
    (path, nb)
}

/// A difference found in one cell.
pub(crate) struct Diff {
    pub(crate) notebook: String,
    pub(crate) cell: usize,
    pub(crate) what: String,
}

fn compare(
    diffs: &mut Vec<Diff>,
    notebook: &str,
    cell: usize,
    what: &str,
    want: &Value,
    got: &Value,
) {
    if want != got {
        diffs.push(Diff {
            notebook: notebook.to_string(),
            cell,
            what: format!(
                "{what}\n    nbclient: {}\n    ours:     {}",
                serde_json::to_string(want).unwrap_or_default(),
                serde_json::to_string(got).unwrap_or_default()
            ),
        });
    }
}

/// Compare two notebooks' code cells (outputs normalised, execution counts) in order.
pub(crate) fn compare_cells(
    diffs: &mut Vec<Diff>,
    name: &str,
    want: &[(String, Vec<Value>, Value)],
    got: &[(String, Vec<Value>, Value)],
    applied: &mut Applied,
) {
    assert_eq!(got.len(), want.len(), "{name}: one cell per code cell");
    for (i, ((_, want, want_count), (_, got, got_count))) in want.iter().zip(got).enumerate() {
        let mut normal = |outs: &[Value]| -> Value {
            let outs = coalesced(outs, applied);
            Value::Array(outs.iter().map(|o| normal_output(o, applied)).collect())
        };
        let want_outputs = normal(want);
        let got_outputs = normal(got);
        compare(diffs, name, i, "outputs", &want_outputs, &got_outputs);
        compare(diffs, name, i, "execution_count", want_count, got_count);
    }
}

pub(crate) fn reference_notebooks() -> Vec<(String, Value)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fidelity_dir().join("reference"))
        .expect("tests/fidelity/reference")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let nb = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (name, nb)
        })
        .collect()
}

/// The normalisations, each with how often it changed something.
fn normalisations_report(applied: &Applied) -> String {
    let mut text = String::from("normalisations (applied to both sides; docs/fidelity.md):\n");
    for (name, why) in NORMALISATIONS {
        text.push_str(&format!(
            "  {name:<13} {:>5} times  {why}\n",
            applied.0.get(name).copied().unwrap_or(0)
        ));
    }
    text
}

/// Run one reference notebook's code cells in a new session, compare what the agent saw and
/// the export with nbclient's outputs; returns the number of code cells.
async fn run_notebook(
    server: &Server,
    name: &str,
    nb: &Value,
    out_dir: &Path,
    applied: &mut Applied,
    diffs: &mut Vec<Diff>,
) -> usize {
    let cwd = tempfile::tempdir().expect("temp dir");
    let session = name.replace("__", "-");
    create_session_with(server, json!({"session_id": session, "cwd": cwd.path()})).await;
    let cells = code_cells(nb);
    for (i, (source, outputs, _)) in cells.iter().enumerate() {
        let r = server.exec(&session, source).await;
        let want = expected_agent_view(outputs, applied);
        let mut got = agent_view(&r, applied);
        reply_error(&want, &mut got, applied);
        compare(diffs, name, i, "agent view", &want, &got);
    }
    let (_, exported) = export(server, &session, out_dir).await;
    compare_cells(diffs, name, &cells, &code_cells(&exported), applied);
    server.destroy(&session).await;
    cells.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_notebooks_run_through_kernel_mcp_as_nbclient_ran_them() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let notebooks = reference_notebooks();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let packages: std::collections::BTreeSet<String> = notebooks
        .iter()
        .map(|(name, _)| name.split("__").next().unwrap_or("").to_string())
        .collect();
    // Two notebooks at a time (one kernel each), alternating between the two halves.
    let half = |parity: usize| {
        let (server, out_dir) = (&server, out_dir.path());
        let mine: Vec<&(String, Value)> = notebooks
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == parity)
            .map(|(_, nb)| nb)
            .collect();
        async move {
            let mut applied = Applied::default();
            let mut diffs = Vec::new();
            let mut cells_total = 0;
            for (name, nb) in mine {
                cells_total +=
                    run_notebook(server, name, nb, out_dir, &mut applied, &mut diffs).await;
            }
            (applied, diffs, cells_total)
        }
    };
    let ((mut applied, mut diffs, even), (odd_applied, odd_diffs, odd)) =
        tokio::join!(half(0), half(1));
    for (name, n) in odd_applied.0 {
        *applied.0.entry(name).or_default() += n;
    }
    diffs.extend(odd_diffs);
    diffs.sort_by(|a, b| (&a.notebook, a.cell).cmp(&(&b.notebook, b.cell)));
    let cells_total = even + odd;
    server.shutdown().await;

    let differing: std::collections::BTreeSet<(String, usize)> =
        diffs.iter().map(|d| (d.notebook.clone(), d.cell)).collect();
    let bad_notebooks: std::collections::BTreeSet<&String> =
        differing.iter().map(|(n, _)| n).collect();
    let mut report = format!(
        "fidelity: {} notebooks from {} packages ({}), {} code cells; {} notebooks and {} cells differ\n",
        notebooks.len(),
        packages.len(),
        packages.iter().cloned().collect::<Vec<_>>().join(", "),
        cells_total,
        bad_notebooks.len(),
        differing.len()
    );
    report.push_str(&normalisations_report(&applied));
    for d in &diffs {
        report.push_str(&format!(
            "DIFF {} cell {}: {}\n",
            d.notebook, d.cell, d.what
        ));
    }
    eprint!("{report}");
    // Kept where cargo keeps test scratch files, for reading after a passing run too.
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fidelity-report.txt");
    let _ = std::fs::write(&file, &report);
    eprintln!("(report written to {})", file.display());
    assert!(notebooks.len() >= 20 && cells_total >= 100 && packages.len() >= 5);
    assert!(diffs.is_empty(), "{} differences (above)", diffs.len());
}

/// Cells of a session whose export is re-executed by nbclient: streams in order, a figure
/// between prints and Out[], a display updated from a later cell, HTML, `\r` progress, an
/// error; and the cases of issue 44: a shell command's tabs (`time`'s `real\t0m…` lines),
/// an Out[] with text/html beside text/plain, stderr flushed before stdout.
const SESSION_CELLS: [&str; 10] = [
    "import sys\nprint('a', file=sys.stderr, flush=True); print('b', flush=True); print('c', file=sys.stderr, flush=True)",
    "%matplotlib inline\nimport matplotlib.pyplot as plt\nprint('before')\nplt.plot([1, 2]); plt.show()\nprint('after')\n6 * 7",
    "from IPython.display import display, Markdown, HTML\nh = display(Markdown('v1'), display_id=True)",
    "h.update(Markdown('v2'))",
    "HTML('<b>bold</b>')",
    "for i in range(3):\n    print(f'\\r{i}', end='', flush=True)\nprint()",
    "1 / 0",
    "!printf 'real\\t0m0.003s\\nuser\\t0m0.001s\\n'",
    "class Table:\n    def _repr_html_(self):\n        return '<table><tr><td>1</td></tr></table>'\n    def __repr__(self):\n        return 'Table()'\nTable()",
    "import sys\nsys.stderr.write('first\\n'); sys.stderr.flush()\nprint('second', flush=True)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_notebook_re_executes_with_nbclient_to_the_same_outputs() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tempfile::tempdir().expect("temp dir");
    create_session_with(&server, json!({"session_id": "s", "cwd": cwd.path()})).await;
    for code in SESSION_CELLS {
        server.exec("s", code).await;
    }
    let (path, exported) = export(&server, "s", cwd.path()).await;
    server.destroy("s").await;
    server.shutdown().await;

    let again = cwd.path().join("again.ipynb");
    let script = "import sys, nbformat\n\
                  from nbclient import NotebookClient\n\
                  nb = nbformat.read(sys.argv[1], as_version=4)\n\
                  NotebookClient(nb, timeout=60, allow_errors=True, kernel_name='python3').execute()\n\
                  nbformat.write(nb, sys.argv[2])";
    let (ok, _, err) = run_python(
        &[
            std::ffi::OsStr::new("-c"),
            std::ffi::OsStr::new(script),
            path.as_os_str(),
            again.as_os_str(),
        ],
        cwd.path(),
    );
    assert!(ok, "nbclient could not re-execute the export: {err}");
    let rerun: Value = serde_json::from_str(&std::fs::read_to_string(&again).unwrap()).unwrap();

    let mut applied = Applied::default();
    let mut diffs = Vec::new();
    let ours = code_cells(&exported);
    assert_eq!(ours.len(), SESSION_CELLS.len());
    compare_cells(
        &mut diffs,
        "session",
        &code_cells(&rerun),
        &ours,
        &mut applied,
    );
    eprint!("{}", normalisations_report(&applied));
    for d in &diffs {
        eprintln!("DIFF {} cell {}: {}", d.notebook, d.cell, d.what);
    }
    assert!(diffs.is_empty(), "{} differences (above)", diffs.len());
    // What the comparison covered.
    let kinds: Vec<String> = ours
        .iter()
        .flat_map(|(_, o, _)| {
            o.iter()
                .map(|o| o["output_type"].as_str().unwrap_or("").to_string())
        })
        .collect();
    for kind in ["stream", "display_data", "execute_result", "error"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    // Issue 44's cases, on the export itself (before any normalisation).
    let text = |o: &Value| joined(&o["text"], &mut Applied::default());
    let tabs = &ours[7].1;
    assert!(text(&tabs[0]).contains("real\t0m0.003s"), "{tabs:?}");
    let rich = &ours[8].1;
    assert!(rich[0]["data"]["text/html"].is_string(), "{rich:?}");
    assert_eq!(rich[0]["data"]["text/plain"], "Table()", "{rich:?}");
    let streams: Vec<&str> = ours[9]
        .1
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    assert_eq!(streams, ["stderr", "stdout"], "{:?}", ours[9].1);
}
