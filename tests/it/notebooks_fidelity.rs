//! `execute_cells` runs a notebook as nbclient does (docs/tools.md, `execute_cells`): real
//! notebooks of the fidelity corpus (tests/fidelity, nbclient's references) opened with
//! `open_notebook` and run whole with `execute_cells(stop_on_error=false)` through the real
//! binary on python3 (as nbclient ran them); the file kernel-mcp wrote matches nbclient's run
//! cell by cell (outputs and execution counts, up to the normalisations of `crate::fidelity`).
//! And `stop_on_error` stops at the first failing cell and says which cells it skipped.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::history::{assert_valid_notebook, read_json, tmpdir};
use crate::common::*;
use crate::fidelity::{
    Applied, Diff, code_cells, compare_cells, fidelity_dir, reference_notebooks,
};

/// Notebooks of the corpus run here: displays, plots, long output, errors, several packages.
const CHOSEN: [&str; 5] = [
    "kernel_mcp__displays",
    "mkdocs_jupyter__demo",
    "nbdime__multi_cell_nb",
    "nbgrader__long_output",
    "pytest_notebook__example1",
];

async fn ok(server: &Server, tool: &str, args: Value) -> Value {
    let r = server.call(tool, args).await;
    assert!(!is_error(&r), "{tool}: {}", dump(&r));
    structured(&r)
}

/// `execute_cells` with `args` until its batch is done (following it with read_cells).
async fn run_all(server: &Server, args: Value) -> Value {
    let r = server.call("execute_cells", args.clone()).await;
    let first = structured(&r);
    if first["status"] == "done" {
        return first;
    }
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "never done: {first}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let read = ok(
            server,
            "read_cells",
            json!({"path": args["path"], "outputs": false}),
        )
        .await;
        let running = read["cells"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| matches!(c["run"]["status"].as_str(), Some("queued" | "running")));
        if !running {
            return read;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_notebooks_run_with_execute_cells_are_written_as_nbclient_ran_them() {
    let server = Server::start_with_args(&["--tools", "all"]).await;
    let references: std::collections::BTreeMap<String, Value> =
        reference_notebooks().into_iter().collect();
    let (mut applied, mut diffs) = (Applied::default(), Vec::<Diff>::new());
    for name in CHOSEN {
        let dir = tmpdir();
        let path = dir.path().join(format!("{name}.ipynb"));
        std::fs::copy(
            fidelity_dir().join(format!("notebooks/{name}.ipynb")),
            &path,
        )
        .unwrap();
        let session = name.replace("__", "-");
        ok(
            &server,
            "open_notebook",
            json!({"path": path, "session_id": session, "kernel": "python3"}),
        )
        .await;
        run_all(
            &server,
            json!({"path": path, "stop_on_error": false, "wait_s": 120}),
        )
        .await;
        ok(&server, "close_notebook", json!({"path": path})).await;
        assert_valid_notebook(&path);
        let want = code_cells(&references[name]);
        compare_cells(
            &mut diffs,
            name,
            &want,
            &code_cells(&read_json(&path)),
            &mut applied,
        );
        server.destroy(&session).await;
    }
    server.shutdown().await;
    let report: String = diffs
        .iter()
        .map(|d| format!("DIFF {} cell {}: {}\n", d.notebook, d.cell, d.what))
        .collect();
    assert!(diffs.is_empty(), "{} differences:\n{report}", diffs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_on_error_skips_the_cells_after_a_failing_one_and_names_them() {
    let server = Server::start_with_args(&["--tools", "all"]).await;
    let dir = tmpdir();
    let path = dir.path().join("fails.ipynb");
    let cells: Vec<Value> = [("one", "x = 1"), ("boom", "1 / 0"), ("after", "print('never'); y = 1"), ("last", "x")]
        .iter()
        .map(|(id, s)| json!({"cell_type": "code", "id": id, "metadata": {}, "source": s, "outputs": [], "execution_count": null}))
        .collect();
    let nb = json!({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}, "nbformat": 4, "nbformat_minor": 5});
    std::fs::write(&path, nb.to_string()).unwrap();
    let opened = ok(&server, "open_notebook", json!({"path": path})).await;

    let r = server
        .call("execute_cells", json!({"path": path, "wait_s": 60}))
        .await;
    assert!(
        is_error(&r),
        "a failed cell makes the answer an error: {}",
        dump(&r)
    );
    let ran = structured(&r);
    assert_eq!(ran["status"], "done", "{ran}");
    let states: Vec<&Value> = ran["cells"].as_array().unwrap().iter().collect();
    assert_eq!(states[1]["run"]["status"], "error", "{ran}");
    for c in &states[2..] {
        let reason = c["skipped"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("boom"),
            "skipped naming the failed cell: {ran}"
        );
    }
    assert_eq!(ran["results"].as_array().map(Vec::len), Some(2), "{ran}");
    assert_eq!(
        ran["results"][1]["error"]["ename"], "ZeroDivisionError",
        "{ran}"
    );
    assert!(
        dump(&r).contains("after"),
        "the text names the skipped cells: {}",
        dump(&r)
    );
    let file = read_json(&path);
    assert_eq!(
        file["cells"][2]["outputs"],
        json!([]),
        "a skipped cell is not run"
    );
    // Nor did the kernel run it (the cell after a failing one is sent into the kernel's
    // queue ahead, and the kernel aborts it).
    let y = ok(
        &server,
        "execute",
        json!({"session_id": opened["session_id"], "code": "'y' in dir()"}),
    )
    .await;
    assert_eq!(y["result"], "False", "{y}");

    let all = server
        .call(
            "execute_cells",
            json!({"path": path, "stop_on_error": false, "wait_s": 60}),
        )
        .await;
    let all = structured(&all);
    assert_eq!(all["results"].as_array().map(Vec::len), Some(4), "{all}");
    assert_eq!(all["results"][2]["stdout"], "never\n", "{all}");
    server.shutdown().await;
}
