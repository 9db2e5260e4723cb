//! Working in a notebook live with a person in JupyterLab (docs/notebooks.md), through the real
//! binary: kernel-mcp configured with `--gateway lab=URL`, a real Jupyter Server running
//! jupyter-collaboration (`crate::common::collab`), and a person in the notebook's room (a
//! pycrdt client, `tests/collab_person.py`). The agent's `edit_cells` and `execute_cells`
//! reach the person's copy as they happen (the output while the cell still runs), the
//! person's edit made during the run is kept and reaches the agent's `read_cells`, and a
//! cell the person has their cursor in is not replaced.
//!
//! What the person sees is polled to a deadline; every test stops the servers and the
//! person it started.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::collab::{CollabServer, Person, cell, notebook};
use crate::common::history::error_code;
use crate::common::*;

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
