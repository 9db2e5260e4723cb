//! Real-time collaboration (docs/notebooks.md) against a real Jupyter Server running
//! jupyter-collaboration, with a person in the same room: a pycrdt client
//! (`tests/collab_person.py`). The agent is `kernel_mcp::notebook::collab::Room`.
//!
//! What a person sees is polled from their own copy of the document to a deadline; every
//! test stops the server and the person it started.

use std::time::{Duration, Instant};

use kernel_mcp::notebook::collab::{CollabError, Collaborator, LinkState, Room};
use kernel_mcp::notebook::edit::EditOp;
use serde_json::{Value, json};

use crate::common::collab::{CollabServer, Person, cell, notebook};
use crate::common::gateways::{Backend, GatewayProc, Proxy};

const NB: &str = "analysis.ipynb";

fn agent() -> Collaborator {
    Collaborator {
        name: "Claude (kernel-mcp)".into(),
        color: "#7b61ff".into(),
    }
}

fn ops(v: Value) -> Vec<EditOp> {
    serde_json::from_value(v).unwrap()
}

async fn setup() -> (CollabServer, Person, Room) {
    let server =
        CollabServer::start(&[(NB, notebook(&[("a", "x = 1\n"), ("b", "y = 2\n")]))]).await;
    let person = Person::join(&server, NB, "Ada").await;
    let room = Room::join(&server.gateway(), NB, &agent())
        .await
        .unwrap_or_else(|e| panic!("join: {e}\n{}", server.log_text()));
    (server, person, room)
}

/// Poll `f` until it returns `Some` (30 s).
async fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn text(cell: &Value) -> String {
    let outputs = cell["outputs"].as_array().cloned().unwrap_or_default();
    outputs.iter().filter_map(|o| o["text"].as_str()).collect()
}

#[tokio::test]
async fn the_agents_inserted_cell_and_streamed_output_reach_the_person_as_they_happen() {
    let (server, mut person, room) = setup().await;
    let out = room
        .apply(&ops(
            json!([{"op": "insert", "source": "for i in range(2): print(i)", "after": "a"}]),
        ))
        .unwrap();
    let id = out.inserted[0].clone();
    let cells = person
        .wait_cells("the inserted cell", |c| {
            c.len() == 3 && c[1]["id"] == id.as_str()
        })
        .await;
    assert_eq!(cells[1]["source"], "for i in range(2): print(i)");
    room.begin_run(&id).unwrap();
    person
        .wait_cells("the cell running", |c| {
            cell(c, &id).is_some_and(|x| x["execution_state"] == "running")
        })
        .await;
    // Each chunk is seen before the next is sent: outputs stream, they do not arrive at the end.
    for (chunk, seen) in [("tick 0\n", "tick 0\n"), ("tick 1\n", "tick 0\ntick 1\n")] {
        room.append_output(
            &id,
            &json!({"output_type": "stream", "name": "stdout", "text": chunk}),
        )
        .unwrap();
        let cells = person
            .wait_cells(&format!("output {seen:?}"), |c| {
                cell(c, &id).is_some_and(|x| text(x) == seen)
            })
            .await;
        let c = cell(&cells, &id).unwrap();
        assert_eq!(
            c["execution_state"], "running",
            "still running while it streams"
        );
        assert_eq!(
            c["outputs"].as_array().unwrap().len(),
            1,
            "one stream output grows: {c}"
        );
    }
    room.end_run(&id, Some(1)).unwrap();
    let cells = person
        .wait_cells("the run's end", |c| {
            cell(c, &id).is_some_and(|x| x["execution_state"] == "idle")
        })
        .await;
    // pycrdt reads Yjs numbers as floats; the saved file has integers (see the file test).
    assert_eq!(
        cell(&cells, &id).unwrap()["execution_count"].as_f64(),
        Some(1.0)
    );
    person.quit().await;
    room.close().await;
    drop(server);
}

#[tokio::test]
async fn the_persons_edit_reaches_the_agents_next_snapshot() {
    let (server, mut person, room) = setup().await;
    let seen = room.version();
    let r = person
        .ask(json!({"cmd": "type", "id": "b", "index": -1, "text": "z = y * 3\n"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    // Each change the room brings bumps the version; the snapshot after the one that
    // carried the edit has it.
    let t0 = Instant::now();
    let mut seen = seen;
    let nb = loop {
        seen = tokio::time::timeout(Duration::from_secs(30), room.changed(seen))
            .await
            .expect("a change within 30 s")
            .unwrap();
        let nb = room.snapshot().await.unwrap();
        if nb.cells()[1].source() != "y = 2\n" || t0.elapsed() > Duration::from_secs(30) {
            break nb;
        }
    };
    assert_eq!(nb.cells()[1].id(), "b");
    assert_eq!(nb.cells()[1].source(), "y = 2\nz = y * 3\n");
    person.quit().await;
    room.close().await;
    drop(server);
}

#[tokio::test]
async fn a_cell_the_person_is_editing_is_not_replaced_but_another_cell_is() {
    let (server, mut person, room) = setup().await;
    let r = person
        .ask(json!({"cmd": "cursor", "id": "a", "index": 2}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    until("the agent sees the person's cursor in cell a", || {
        room.editing().get("a").cloned()
    })
    .await;
    let e = room
        .apply(&ops(
            json!([{"op": "replace", "id": "a", "source": "x = 99\n"}]),
        ))
        .unwrap_err();
    assert!(
        matches!(&e, CollabError::CellBeingEdited { cell, by } if cell == "a" && by == "Ada"),
        "{e}"
    );
    let msg = e.to_string();
    assert!(msg.contains("\"a\"") && msg.contains("Ada"), "{msg}");
    room.apply(&ops(
        json!([{"op": "replace", "id": "b", "source": "y = 3\n"}]),
    ))
    .unwrap();
    let cells = person
        .wait_cells("cell b replaced", |c| {
            cell(c, "b").is_some_and(|x| x["source"] == "y = 3\n")
        })
        .await;
    assert_eq!(
        cell(&cells, "a").unwrap()["source"],
        "x = 1\n",
        "cell a untouched"
    );
    person.quit().await;
    room.close().await;
    drop(server);
}

#[tokio::test]
async fn the_agent_shows_in_the_rooms_awareness_under_its_name_and_leaves_it() {
    let (server, mut person, room) = setup().await;
    let name = |p: &Value| p["user"]["display_name"].as_str().map(String::from);
    let t0 = Instant::now();
    let agent_state = loop {
        let peers = person.ask(json!({"cmd": "peers"})).await;
        let found = peers["peers"].as_object().and_then(|m| {
            m.values()
                .find(|p| name(p).as_deref() == Some("Claude (kernel-mcp)"))
                .cloned()
        });
        if let Some(s) = found {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the person never saw the agent: {peers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(agent_state["user"]["color"], "#7b61ff");
    assert_eq!(agent_state["user"]["initials"], "CK");
    // JupyterLab's collaborators panel lists the global awareness room: another client
    // there sees the agent with the notebook it has open.
    let other = Room::join(
        &server.gateway(),
        NB,
        &Collaborator {
            name: "Other".into(),
            color: "#000".into(),
        },
    )
    .await
    .unwrap();
    let listed = until("the agent in the global awareness room", || {
        other
            .online()
            .into_iter()
            .find(|p| p.name == "Claude (kernel-mcp)")
    })
    .await;
    assert_eq!(listed.state["current"], format!("notebook:{NB}"));
    assert_eq!(listed.state["documents"], json!([NB]));
    // And the agent sees the person (who was there first: known from their next renewal,
    // the server does not hand a newcomer the states it holds).
    until("the agent sees the person", || {
        room.peers().into_iter().find(|p| p.name == "Ada")
    })
    .await;
    room.close().await;
    let t0 = Instant::now();
    loop {
        let peers = person.ask(json!({"cmd": "peers"})).await;
        let gone = peers["peers"].as_object().is_none_or(|m| {
            !m.values()
                .any(|p| name(p).as_deref() == Some("Claude (kernel-mcp)"))
        });
        if gone {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the agent never left: {peers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    other.close().await;
    person.quit().await;
    drop(server);
}

#[tokio::test]
async fn the_file_the_server_saves_validates_with_nbformat_and_holds_the_agents_change() {
    let (server, person, room) = setup().await;
    let out = room
        .apply(&ops(json!([
            {"op": "insert", "source": "# Results", "cell_type": "markdown", "index": 0},
            {"op": "insert", "source": "print('hi'); 6 * 7", "after": "b"},
            {"op": "replace", "id": "a", "source": "x = 10\n"},
        ])))
        .unwrap();
    let code = out.inserted[1].clone();
    room.begin_run(&code).unwrap();
    room.append_output(
        &code,
        &json!({"output_type": "stream", "name": "stdout", "text": "hi\n"}),
    )
    .unwrap();
    room.append_output(
        &code,
        &json!({"output_type": "execute_result", "execution_count": 3,
                "data": {"text/plain": "42"}, "metadata": {}}),
    )
    .unwrap();
    room.end_run(&code, Some(3)).unwrap();
    let status = room.save(Duration::from_secs(30)).await.unwrap();
    assert!(
        ["success", "skipped"].contains(&status.as_str()),
        "{status}"
    );
    let t0 = Instant::now();
    let nb = loop {
        match server.validated(NB) {
            Ok(nb)
                if nb["cells"]
                    .as_array()
                    .is_some_and(|c| c.len() == 4 && c[3]["execution_count"] == 3) =>
            {
                break nb;
            }
            Ok(_) if t0.elapsed() < Duration::from_secs(30) => {}
            other => panic!("the saved file: {other:?}\n{}", server.log_text()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells[0]["cell_type"], "markdown");
    assert_eq!(cells[0]["source"], "# Results");
    assert_eq!(cells[1]["source"], "x = 10\n");
    assert_eq!(cells[3]["id"], code.as_str());
    assert_eq!(cells[3]["outputs"][0]["text"], "hi\n");
    assert_eq!(cells[3]["outputs"][1]["data"]["text/plain"], "42");
    assert!(cells[3].get("execution_state").is_none(), "{}", cells[3]);
    person.quit().await;
    room.close().await;
    drop(server);
}

#[tokio::test]
async fn a_dropped_websocket_reconnects_and_changes_made_meanwhile_arrive_both_ways() {
    let server =
        CollabServer::start(&[(NB, notebook(&[("a", "x = 1\n"), ("b", "y = 2\n")]))]).await;
    let mut person = Person::join(&server, NB, "Ada").await;
    let proxy = Proxy::start(server.port).await;
    let room = Room::join(&server.gateway_via(proxy.port), NB, &agent())
        .await
        .unwrap();
    // The room's websockets are cut and the server stays out of reach (every new request
    // answered 503) until both sides have changed the notebook.
    proxy.answer_with(Some(503));
    until("the agent notices the drop", || {
        (room.state() == LinkState::Reconnecting).then_some(())
    })
    .await;
    room.apply(&ops(
        json!([{"op": "replace", "id": "a", "source": "x = 5\n"}]),
    ))
    .unwrap();
    person
        .ask(json!({"cmd": "type", "id": "b", "index": 0, "text": "# mine\n"}))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(room.state(), LinkState::Reconnecting, "still out of reach");
    let cells = person.cells().await;
    assert_eq!(
        cell(&cells, "a").unwrap()["source"],
        "x = 1\n",
        "nothing got through"
    );
    proxy.answer_with(None);
    person
        .wait_cells("the agent's edit after the reconnect", |c| {
            cell(c, "a").is_some_and(|x| x["source"] == "x = 5\n")
        })
        .await;
    room.sync(Duration::from_secs(30)).await.unwrap();
    let nb = room.snapshot().await.unwrap();
    assert_eq!(nb.cells()[1].source(), "# mine\ny = 2\n");
    assert_eq!(room.state(), LinkState::Connected);
    person.quit().await;
    room.close().await;
    drop(proxy);
    drop(server);
}

#[tokio::test]
async fn a_missing_notebook_a_wrong_token_and_a_server_without_collaboration_are_clear_errors() {
    let server = CollabServer::start(&[(NB, notebook(&[("a", "1")]))]).await;
    let e = Room::join(&server.gateway(), "nope.ipynb", &agent())
        .await
        .err()
        .unwrap();
    assert!(matches!(e, CollabError::NotFound { .. }), "{e}");
    let mut gw = server.gateway();
    gw.token = Some(kernel_mcp::kernel::remote::Token::new("wrong"));
    let e = Room::join(&gw, NB, &agent()).await.err().unwrap();
    assert!(matches!(e, CollabError::Unauthorized { .. }), "{e}");
    assert!(
        !e.to_string().contains("wrong"),
        "the token is never shown: {e}"
    );
    drop(server);
    // A plain Jupyter Server (the gateways venv has no jupyter-collaboration).
    let plain = GatewayProc::start(Backend::JupyterServer).await;
    let gw = kernel_mcp::kernel::remote::Gateway {
        name: "plain".into(),
        url: format!("{}/", plain.url),
        token: Some(kernel_mcp::kernel::remote::Token::new(&plain.token)),
    };
    let e = Room::join(&gw, NB, &agent()).await.err().unwrap();
    assert!(matches!(e, CollabError::NotCollaborative { .. }), "{e}");
    assert!(e.to_string().contains("jupyter-collaboration"), "{e}");
    drop(plain);
}
