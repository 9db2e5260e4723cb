//! Working in a notebook live with a person in JupyterLab (docs/notebooks.md), through the real
//! binary: kernel-mcp configured with `--gateway lab=URL`, a real Jupyter Server running
//! jupyter-collaboration (`crate::common::collab`), and a person in the notebook's room (a
//! pycrdt client, `tests/collab_person.py`). The agent's `edit_cells` and `execute_cells`
//! reach the person's copy as they happen (the output while the cell still runs: a stream
//! growing, a display appearing and updated in place), the person's edit made during the run
//! is kept and reaches the agent's `read_cells`, a cell the person has their cursor in is not
//! replaced, and notebooks of the fidelity corpus run live are saved by the server as
//! nbclient ran them.
//!
//! What the person sees is polled to a deadline; every test stops the servers and the
//! person it started.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::collab::{CollabServer, Person, cell, notebook};
use crate::common::history::{error_code, read_json};
use crate::common::*;
use crate::fidelity::{
    Applied, Diff, code_cells, compare_cells, fidelity_dir, reference_notebooks,
};

const NB: &str = "analysis.ipynb";

/// The lab server with `analysis.ipynb` (cells `a`, `b`), kernel-mcp configured with it, and
/// Ada in the notebook's room.
async fn setup() -> (CollabServer, Server, Person) {
    let lab = CollabServer::start(&[(NB, notebook(&[("a", "x = 6\n"), ("b", "y = 2\n")]))]).await;
    let flag = format!("lab={}", lab.url);
    let server = Server::start_with(
        &[("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new(&lab.token))],
        &["--tools", "all", "--gateway", &flag],
    )
    .await;
    let person = Person::join(&lab, NB, "Ada").await;
    (lab, server, person)
}

async fn ok(server: &Server, tool: &str, args: Value) -> Value {
    let r = server.call(tool, args).await;
    assert!(!is_error(&r), "{tool}: {}", dump(&r));
    structured(&r)
}

/// The stream text of a cell (as the person's copy holds it).
fn text(cell: &Value) -> String {
    let outputs = cell["outputs"].as_array().cloned().unwrap_or_default();
    outputs.iter().filter_map(|o| o["text"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_edit_and_run_reach_the_person_live_and_the_persons_edit_during_the_run_is_kept()
{
    let (lab, server, mut person) = setup().await;
    let opened = ok(
        &server,
        "open_notebook",
        json!({"path": NB, "gateway": "lab", "session_id": "nb"}),
    )
    .await;
    assert_eq!(opened["cells"], 2, "{opened}");
    assert_eq!(opened["path"], "lab:analysis.ipynb", "{opened}");
    let again = ok(
        &server,
        "open_notebook",
        json!({"path": NB, "gateway": "lab"}),
    )
    .await;
    assert_eq!(again["opened"], false, "one notebook, one binding: {again}");

    let src = "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(2)\nx * 7";
    let edited = ok(
        &server,
        "edit_cells",
        json!({"path": NB, "ops": [{"op": "insert", "after": "a", "source": src}]}),
    )
    .await;
    let id = edited["inserted"][0].as_str().unwrap().to_string();
    person
        .wait_cells("the agent's inserted cell", |c| {
            c.len() == 3 && c[1]["id"] == id.as_str() && c[1]["source"] == src
        })
        .await;

    let started = ok(
        &server,
        "execute_cells",
        json!({"path": NB, "ids": ["a", id], "wait_s": 0}),
    )
    .await;
    assert_eq!(started["status"], "running", "{started}");
    // Outputs stream: the person sees the first line while the cell still runs.
    let cells = person
        .wait_cells("the first tick while the cell runs", |c| {
            cell(c, &id).is_some_and(|x| text(x).contains("tick 0"))
        })
        .await;
    let running = cell(&cells, &id).unwrap();
    assert_eq!(running["execution_state"], "running", "{running}");
    assert!(!text(running).contains("tick 2"), "{running}");

    // The person types in another cell during the agent's run.
    let typed = person
        .ask(json!({"cmd": "type", "id": "b", "index": -1, "text": "z = y * 3\n"}))
        .await;
    assert_eq!(typed["ok"], true, "{typed}");

    let t0 = Instant::now();
    let done = loop {
        let read = ok(&server, "read_cells", json!({"path": NB})).await;
        if read["cells"][1]["execution_count"].is_number() {
            break read;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "never ran: {read}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        done["cells"][2]["source"], "y = 2\nz = y * 3\n",
        "the person's edit reaches read_cells: {done}"
    );
    let outputs = &done["cells"][1]["outputs"];
    assert_eq!(outputs[0]["text"], "tick 0\ntick 1\ntick 2\n", "{done}");
    assert_eq!(outputs[1]["text"], "42", "{done}");

    let cells = person
        .wait_cells("the run's end", |c| {
            cell(c, &id).is_some_and(|x| x["execution_state"] == "idle")
        })
        .await;
    let ended = cell(&cells, &id).unwrap();
    assert_eq!(ended["execution_count"].as_f64(), Some(2.0), "{ended}");
    assert_eq!(
        cell(&cells, "b").unwrap()["source"],
        "y = 2\nz = y * 3\n",
        "the agent's run did not undo the person's edit"
    );

    // The server saves the shared document: the file has both, and nbformat validates it.
    let t0 = Instant::now();
    loop {
        match lab.validated(NB) {
            Ok(nb)
                if nb["cells"][2]["source"] == "y = 2\nz = y * 3\n"
                    && nb["cells"][1]["execution_count"] == 2 =>
            {
                break;
            }
            r => assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the saved file: {r:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ok(&server, "close_notebook", json!({"path": NB})).await;
    person.quit().await;
    server.shutdown().await;
    drop(lab);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_the_person_is_editing_is_not_replaced_by_the_agent() {
    let (lab, server, mut person) = setup().await;
    ok(
        &server,
        "open_notebook",
        json!({"path": NB, "gateway": "lab", "session_id": "nb"}),
    )
    .await;
    let r = person
        .ask(json!({"cmd": "cursor", "id": "b", "index": 2}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    // Until the cursor reaches kernel-mcp, a replace by the same text changes nothing.
    let t0 = Instant::now();
    loop {
        let same = json!({"path": NB, "ops": [{"op": "replace", "id": "b", "source": "y = 2\n"}]});
        if is_error(&server.call("edit_cells", same).await) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the cursor never arrived"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = server
        .call(
            "edit_cells",
            json!({"path": NB, "ops": [{"op": "replace", "id": "b", "source": "y = 0"}]}),
        )
        .await;
    assert_eq!(
        error_code(&refused),
        "NOTEBOOK_CONFLICT",
        "{}",
        dump(&refused)
    );
    assert!(
        dump(&refused).contains("Ada"),
        "names who: {}",
        dump(&refused)
    );
    let cells = person.cells().await;
    assert_eq!(cell(&cells, "b").unwrap()["source"], "y = 2\n");
    ok(&server, "close_notebook", json!({"path": NB})).await;
    person.quit().await;
    server.shutdown().await;
    drop(lab);
}

/// The cell's display outputs' text/plain, as the person's copy holds them.
fn displays(cell: &Value) -> Vec<String> {
    let outputs = cell["outputs"].as_array().cloned().unwrap_or_default();
    outputs
        .iter()
        .filter(|o| o["output_type"] == "display_data")
        .map(|o| {
            o["data"]["text/plain"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_display_reaches_the_person_while_the_cell_runs_and_its_update_replaces_it_in_place() {
    let (lab, server, mut person) = setup().await;
    ok(
        &server,
        "open_notebook",
        json!({"path": NB, "gateway": "lab", "session_id": "nb"}),
    )
    .await;
    // The display says when the kernel sent it (the person's clock is the same machine's).
    let src = "import time\n\
               h = display({'text/plain': f'step 0 at {time.time()}'}, raw=True, display_id=True)\n\
               time.sleep(3)\n\
               h.update({'text/plain': 'step 1'}, raw=True)\n\
               time.sleep(3)\n\
               print('done')";
    let edited = ok(
        &server,
        "edit_cells",
        json!({"path": NB, "ops": [{"op": "insert", "after": "b", "source": src}]}),
    )
    .await;
    let id = edited["inserted"][0].as_str().unwrap().to_string();
    let started = ok(
        &server,
        "execute_cells",
        json!({"path": NB, "ids": [id], "wait_s": 0}),
    )
    .await;
    assert_eq!(started["status"], "running", "{started}");

    let cells = person
        .wait_cells("the display while the cell runs", |c| {
            cell(c, &id).is_some_and(|x| !displays(x).is_empty())
        })
        .await;
    let seen_at = unix_now();
    let running = cell(&cells, &id).unwrap();
    assert_eq!(running["execution_state"], "running", "{running}");
    let shown = displays(running);
    let sent_at: f64 = shown[0]
        .strip_prefix("step 0 at ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{running}"));
    eprintln!(
        "the person saw the display {:.0} ms after the kernel sent it",
        (seen_at - sent_at) * 1000.0
    );
    assert!(seen_at - sent_at < 2.0, "{seen_at} {sent_at}");

    let cells = person
        .wait_cells("the updated display while the cell runs", |c| {
            cell(c, &id).is_some_and(|x| displays(x).iter().any(|d| d == "step 1"))
        })
        .await;
    let updated = cell(&cells, &id).unwrap();
    assert_eq!(updated["execution_state"], "running", "{updated}");
    assert_eq!(
        updated["outputs"].as_array().map(Vec::len),
        Some(1),
        "replaced in place, not appended: {updated}"
    );

    let cells = person
        .wait_cells("the run's end", |c| {
            cell(c, &id).is_some_and(|x| x["execution_state"] == "idle")
        })
        .await;
    let ended = cell(&cells, &id).unwrap();
    assert_eq!(displays(ended), ["step 1"], "{ended}");
    assert_eq!(text(ended), "done\n", "{ended}");
    let read = ok(&server, "read_cells", json!({"path": NB, "ids": [id]})).await;
    let outputs = &read["cells"][0]["outputs"];
    assert_eq!(outputs.as_array().map(Vec::len), Some(2), "{read}");
    ok(&server, "close_notebook", json!({"path": NB})).await;
    person.quit().await;
    server.shutdown().await;
    drop(lab);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_batch_cancelled_by_its_handle_stops_its_cell_and_skips_the_rest_for_the_person() {
    let (lab, server, mut person) = setup().await;
    ok(
        &server,
        "open_notebook",
        json!({"path": NB, "gateway": "lab", "session_id": "nb"}),
    )
    .await;
    let slow = "import time\nprint('waiting', flush=True)\ntime.sleep(60)";
    ok(
        &server,
        "edit_cells",
        json!({"path": NB, "ops": [{"op": "replace", "id": "a", "source": slow}]}),
    )
    .await;
    let started = ok(
        &server,
        "execute_cells",
        json!({"path": NB, "wait_s": 0, "stop_on_error": false}),
    )
    .await;
    let batch = started["run_id"].as_str().unwrap().to_string();
    person
        .wait_cells("the slow cell printing", |c| {
            cell(c, "a").is_some_and(|x| text(x).contains("waiting"))
        })
        .await;
    let t0 = Instant::now();
    let stopped = structured(
        &server
            .call("cancel_execution", json!({"run_id": batch}))
            .await,
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(stopped["cancelled"], true, "{stopped}");
    assert_eq!(
        stopped["cells"][0]["run"]["status"], "interrupted",
        "{stopped}"
    );
    assert!(stopped["cells"][1]["skipped"].is_object(), "{stopped}");
    let cells = person
        .wait_cells("the cancelled cell idle", |c| {
            cell(c, "a").is_some_and(|x| x["execution_state"] == "idle")
        })
        .await;
    let b = cell(&cells, "b").unwrap();
    assert_eq!(b["outputs"], json!([]), "the skipped cell did not run: {b}");
    assert!(b["execution_count"].is_null(), "{b}");
    ok(&server, "close_notebook", json!({"path": NB})).await;
    person.quit().await;
    server.shutdown().await;
    drop(lab);
}

/// Notebooks of the fidelity corpus run live: displays (updated by display_id, cleared) and
/// a stream past the output bound.
const LIVE_CORPUS: [&str; 2] = ["kernel_mcp__displays", "nbgrader__long_output"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notebook_run_live_is_saved_by_the_server_as_nbclient_ran_it() {
    let files: Vec<(String, Value)> = LIVE_CORPUS
        .iter()
        .map(|n| {
            let path = fidelity_dir().join(format!("notebooks/{n}.ipynb"));
            (format!("{n}.ipynb"), read_json(&path))
        })
        .collect();
    let named: Vec<(&str, Value)> = files.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    let lab = CollabServer::start(&named).await;
    let flag = format!("lab={}", lab.url);
    let server = Server::start_with(
        &[("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new(&lab.token))],
        &["--tools", "all", "--gateway", &flag],
    )
    .await;
    let references: std::collections::BTreeMap<String, Value> =
        reference_notebooks().into_iter().collect();
    for name in LIVE_CORPUS {
        let file = format!("{name}.ipynb");
        let session = name.replace("__", "-");
        ok(
            &server,
            "open_notebook",
            json!({"path": file, "gateway": "lab", "session_id": session, "kernel": "python3"}),
        )
        .await;
        let args = json!({"path": file, "stop_on_error": false, "wait_s": 60});
        // A cell that fails makes the answer an error: read it as it is.
        let mut ran = structured(&server.call("execute_cells", args).await);
        let t0 = Instant::now();
        while ran["status"] != "done" {
            assert!(t0.elapsed() < Duration::from_secs(300), "never done: {ran}");
            let follow = json!({"run_id": ran["run_id"], "wait_s": 30});
            ran = structured(&server.call("get_execution", follow).await);
        }
        // The server saves the shared document about a second after the last change.
        let want = code_cells(&references[name]);
        let t0 = Instant::now();
        loop {
            let (mut diffs, mut applied) = (Vec::<Diff>::new(), Applied::default());
            let saved = lab.validated(&file).unwrap_or_default();
            let got = code_cells(&saved);
            if got.len() == want.len() {
                compare_cells(&mut diffs, name, &want, &got, &mut applied);
                if diffs.is_empty() {
                    break;
                }
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let report: String = diffs
                    .iter()
                    .map(|d| format!("DIFF {} cell {}: {}\n", d.notebook, d.cell, d.what))
                    .collect();
                panic!("{name} as the server saved it:\n{report}{saved}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        ok(&server, "close_notebook", json!({"path": file})).await;
        server.destroy(&session).await;
    }
    server.shutdown().await;
    drop(lab);
}
