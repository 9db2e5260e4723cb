//! The re-execution test: a session's cells (streams, a figure, an updated display, HTML,
//! `\r` progress, an error, the cases of issue 44) exported as a notebook, re-executed by
//! nbclient, and compared with the export cell by cell.

use super::compare::{code_cells, compare_cells, export};
use super::normalise::{Applied, joined, normalisations_report};
use crate::common::history::*;
use serde_json::{Value, json};

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
