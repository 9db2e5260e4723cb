//! Working inside a notebook (docs/tools.md, "Notebooks") through the real binary and a real
//! ipykernel: open an existing `.ipynb`, read its cells, edit them, run them, and find the
//! outputs in the file as Jupyter writes them (validated by nbformat); a person's save made
//! while the agent runs cells is merged, not lost; the same cell changed by both is a conflict
//! that keeps both versions; bad files and bad ids are clear errors that leave the file
//! untouched.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::history::{assert_valid_notebook, error_code, read_json, tmpdir};
use crate::common::*;

/// A notebook of code cells `(id, source)` on the python3 kernelspec.
fn write_nb(path: &Path, cells: &[(&str, &str)]) {
    let cells: Vec<Value> = cells
        .iter()
        .map(|(id, s)| json!({"cell_type": "code", "id": id, "metadata": {}, "source": s, "outputs": [], "execution_count": null}))
        .collect();
    let nb = json!({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}, "nbformat": 4, "nbformat_minor": 5});
    std::fs::write(path, serde_json::to_string_pretty(&nb).unwrap()).unwrap();
}

async fn notebook_server() -> Server {
    Server::start_with_args(&["--tools", "all"]).await
}

async fn ok(server: &Server, tool: &str, args: Value) -> Value {
    let r = server.call(tool, args).await;
    assert!(!is_error(&r), "{tool}: {}", dump(&r));
    structured(&r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_opens_reads_edits_and_runs_a_notebook_and_the_outputs_land_in_the_file() {
    let server = notebook_server().await;
    let dir = tmpdir();
    let path = dir.path().join("analysis.ipynb");
    write_nb(&path, &[("load", "x = 20"), ("show", "print(x * 2)")]);
    let p = json!(path);

    let opened = ok(&server, "open_notebook", json!({"path": p})).await;
    assert_eq!(opened["session_id"], "analysis", "{opened}");
    assert_eq!(opened["cells"], 2);
    let again = ok(&server, "open_notebook", json!({"path": p})).await;
    assert_eq!(again["opened"], false, "one notebook, one session: {again}");

    let edited = ok(
        &server,
        "edit_cells",
        json!({"path": p, "ops": [
            {"op": "replace", "id": "load", "source": "x = 21"},
            {"op": "insert", "after": "show", "source": "x + 0.5"},
            {"op": "insert", "index": 0, "cell_type": "markdown", "source": "# Analysis"},
        ]}),
    )
    .await;
    let new_id = edited["inserted"][0].as_str().unwrap().to_string();
    assert_eq!(edited["total"], 4);

    let ran = ok(&server, "execute_cells", json!({"path": p})).await;
    assert_eq!(ran["status"], "done", "{ran}");
    assert_eq!(ran["results"].as_array().map(Vec::len), Some(3), "{ran}");
    assert_eq!(ran["results"][1]["stdout"], "42\n", "{ran}");

    let read = ok(&server, "read_cells", json!({"path": p, "ids": [new_id]})).await;
    assert_eq!(read["cells"][0]["outputs"][0]["text"], "21.5", "{read}");
    assert_eq!(read["cells"][0]["execution_count"], 3, "{read}");

    assert_valid_notebook(&path);
    let nb = read_json(&path);
    assert_eq!(nb["cells"][0]["cell_type"], "markdown");
    assert_eq!(
        nb["cells"][2]["outputs"][0]["text"],
        json!(["42\n"]),
        "{nb}"
    );
    assert_eq!(nb["cells"][2]["execution_count"], 2);
    assert_eq!(nb["metadata"]["kernelspec"]["name"], "python3");

    let closed = ok(&server, "close_notebook", json!({"path": p})).await;
    assert_eq!(closed["session_id"], "analysis");
    let r = server.call("read_cells", json!({"path": p})).await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_save_during_the_agents_run_is_merged_and_a_clash_keeps_both_versions() {
    let server = notebook_server().await;
    let dir = tmpdir();
    let path = dir.path().join("shared.ipynb");
    write_nb(
        &path,
        &[
            ("slow", "import time; time.sleep(3); 'slept'"),
            ("notes", "# the person's cell"),
        ],
    );
    let p = json!(path);
    ok(&server, "open_notebook", json!({"path": p})).await;
    let started = ok(
        &server,
        "execute_cells",
        json!({"path": p, "ids": ["slow"], "wait_s": 0}),
    )
    .await;
    assert_eq!(started["status"], "running", "{started}");

    // The person saves an edit of another cell while the agent's cell runs.
    let mut nb = read_json(&path);
    nb["cells"][1]["source"] = json!("# the person's edit");
    std::fs::write(&path, serde_json::to_string_pretty(&nb).unwrap()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let nb = read_json(&path);
        if nb["cells"][0]["execution_count"].is_number() {
            assert_eq!(
                nb["cells"][1]["source"],
                json!(["# the person's edit"]),
                "{nb}"
            );
            assert_eq!(
                nb["cells"][0]["outputs"][0]["data"]["text/plain"],
                json!(["'slept'"]),
                "{nb}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the outputs never landed: {nb}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Both change the person's cell: the file keeps the person's, the agent's is kept beside.
    ok(&server, "read_cells", json!({"path": p})).await;
    let mut nb = read_json(&path);
    nb["cells"][1]["source"] = json!("# the person again");
    std::fs::write(&path, serde_json::to_string_pretty(&nb).unwrap()).unwrap();
    let before = std::fs::read(&path).unwrap();
    let r = server
        .call(
            "edit_cells",
            json!({"path": p, "ops": [{"op": "replace", "id": "notes", "source": "# the agent"}]}),
        )
        .await;
    assert_eq!(error_code(&r), "NOTEBOOK_CONFLICT", "{}", dump(&r));
    let details = &structured(&r)["details"];
    assert_eq!(details["cells"], json!(["notes"]), "{details}");
    let kept = details["kept"]
        .as_str()
        .expect("the agent's version is kept");
    assert!(
        std::fs::read_to_string(kept)
            .unwrap()
            .contains("# the agent")
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the person's file is untouched"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_notebooks_and_bad_ids_are_clear_errors_and_leave_the_file_untouched() {
    let server = notebook_server().await;
    let dir = tmpdir();
    let cases: [(&str, &[u8], &str); 3] = [
        ("truncated.ipynb", b"{\"cells\": [", "NOTEBOOK_INVALID"),
        (
            "old.ipynb",
            br#"{"nbformat": 3, "worksheets": []}"#,
            "NOTEBOOK_INVALID",
        ),
        ("list.ipynb", b"[]", "NOTEBOOK_INVALID"),
    ];
    for (name, bytes, code) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let r = server.call("open_notebook", json!({"path": path})).await;
        assert_eq!(error_code(&r), code, "{name}: {}", dump(&r));
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} was touched");
    }
    let fifo = dir.path().join("pipe.ipynb");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let r = server.call("open_notebook", json!({"path": fifo})).await;
    assert_eq!(error_code(&r), "IO_ERROR", "{}", dump(&r));
    assert!(text(&r).contains("FIFO"), "{}", text(&r));
    let missing = dir.path().join("none.ipynb");
    let r = server.call("open_notebook", json!({"path": missing})).await;
    assert!(text(&r).contains("create=true"), "{}", text(&r));

    let path = dir.path().join("r.ipynb");
    write_nb(&path, &[("a", "1")]);
    let mut nb = read_json(&path);
    nb["metadata"]["kernelspec"]["name"] = json!("no-such-kernel");
    std::fs::write(&path, nb.to_string()).unwrap();
    let r = server.call("open_notebook", json!({"path": path})).await;
    assert_eq!(error_code(&r), "KERNEL_NOT_FOUND", "{}", dump(&r));
    let opened = ok(
        &server,
        "open_notebook",
        json!({"path": path, "kernel": "python3"}),
    )
    .await;
    assert_eq!(opened["cells"], 1);
    let before = std::fs::read(&path).unwrap();
    let r = server
        .call("edit_cells", json!({"path": path, "ops": [{"op": "delete", "id": "a"}, {"op": "delete", "id": "zz"}]}))
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    assert!(
        text(&r).contains("ops[1]") && text(&r).contains("\"zz\""),
        "{}",
        text(&r)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let r = server
        .call("execute_cells", json!({"path": path, "ids": ["zz"]}))
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));

    let created = dir.path().join("new.ipynb");
    let made = ok(
        &server,
        "open_notebook",
        json!({"path": created, "create": true, "kernel": "python3"}),
    )
    .await;
    assert_eq!(made["created"], true, "{made}");
    assert_valid_notebook(&created);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_batch_is_one_handle_followed_cell_by_cell_and_cancelled_as_one() {
    let server = notebook_server().await;
    let dir = tmpdir();
    let path = dir.path().join("batch.ipynb");
    let slow = "import time\nprint('sleeping', flush=True)\ntime.sleep(60)";
    write_nb(
        &path,
        &[
            ("first", "print('one')"),
            ("slow", slow),
            ("after", "print('never')"),
        ],
    );
    let p = json!(path);
    ok(&server, "open_notebook", json!({"path": p})).await;
    let started = ok(
        &server,
        "execute_cells",
        json!({"path": p, "wait_s": 1, "stop_on_error": false}),
    )
    .await;
    assert_eq!(started["status"], "running", "{started}");
    let id = started["run_id"].as_str().unwrap().to_string();
    assert!(
        id.starts_with("cells-"),
        "one handle for the batch: {started}"
    );

    // Followed by its handle: cells done, the cell running, each finished cell's result.
    let t0 = std::time::Instant::now();
    let following = loop {
        let r = ok(
            &server,
            "get_execution",
            json!({"run_id": id, "wait_s": 0.5}),
        )
        .await;
        let printed = r["running_result"]["stdout"] == "sleeping\n";
        if r["running_cell"] == "slow" && printed {
            break r;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{r}");
    };
    assert_eq!(following["status"], "running", "{following}");
    assert_eq!(following["cells_done"], 1, "{following}");
    assert_eq!(
        following["running_result"]["status"], "running",
        "{following}"
    );
    assert_eq!(following["results"][0]["stdout"], "one\n", "{following}");
    let paged = server
        .call("get_execution", json!({"run_id": id, "stream": "stdout"}))
        .await;
    assert_eq!(error_code(&paged), "INVALID_ARGUMENT", "{}", dump(&paged));

    let t0 = std::time::Instant::now();
    let cancelled = structured(&server.call("cancel_execution", json!({"run_id": id})).await);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(cancelled["status"], "done", "{cancelled}");
    assert_eq!(cancelled["cancelled"], true, "{cancelled}");
    let cells = &cancelled["cells"];
    assert_eq!(cells[0]["run"]["status"], "ok", "{cancelled}");
    assert_eq!(cells[1]["run"]["status"], "interrupted", "{cancelled}");
    assert!(
        cells[2]["skipped"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cancelled")),
        "the rest is skipped: {cancelled}"
    );
    assert_eq!(cancelled["results"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        cancelled["results"][1]["stdout"], "sleeping\n",
        "{cancelled}"
    );

    // The cell after the cancelled one never reached the kernel.
    let session = started["session_id"].as_str().unwrap();
    let h = ok(&server, "get_history", json!({"session_id": session})).await;
    assert!(
        !h.to_string().contains("print('never')"),
        "a skipped cell is not in the history: {h}"
    );

    // The notebook is free again; the skipped cell was not run.
    let again = ok(
        &server,
        "execute_cells",
        json!({"path": p, "ids": ["first"]}),
    )
    .await;
    assert_eq!(again["status"], "done", "{again}");
    let nb = read_json(&path);
    assert_eq!(nb["cells"][2]["outputs"], json!([]), "{nb}");
    server.shutdown().await;
}

/// The next cell, queued in the session while the one before runs, is still the batch's next
/// request when that cell kills the kernel: without `stop_on_error` it runs in the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_without_stop_on_error_goes_on_in_a_new_kernel_after_a_cell_kills_the_old_one() {
    let server = notebook_server().await;
    let dir = tmpdir();
    let path = dir.path().join("dies.ipynb");
    write_nb(
        &path,
        &[
            ("dies", "import os\nos._exit(3)"),
            ("after", "print('after', flush=True)"),
        ],
    );
    let p = json!(path);
    ok(&server, "open_notebook", json!({"path": p})).await;
    let args = json!({"path": p, "stop_on_error": false, "wait_s": 120});
    // A cell that ended `kernel_died` makes the answer an error result; its content is whole.
    let done = structured(&server.call("execute_cells", args).await);
    assert_eq!(done["status"], "done", "{done}");
    let cells = &done["cells"];
    assert_eq!(cells[0]["run"]["status"], "kernel_died", "{done}");
    assert_eq!(cells[1]["run"]["status"], "ok", "{done}");
    assert_eq!(done["results"][1]["stdout"], "after\n", "{done}");
    let nb = read_json(&path);
    assert_eq!(
        nb["cells"][1]["outputs"][0]["text"],
        json!(["after\n"]),
        "{nb}"
    );
    server.shutdown().await;
}
