//! A person and an agent in one kernel (issue 44), with the real binary, a real ipykernel and
//! a person's Jupyter client on the service's Jupyter face: the agent's `timeout_s` never
//! interrupts or restarts the person's cell (one that ignores SIGINT included), the agent's
//! result says whose cell it waited for and how long, `queue_timeout_s` gives up without
//! touching the person's cell, and an interrupt by the person is named in the agent's run.

use std::time::Duration;

use serde_json::json;

use crate::common::jupyter::{FaceService, person_runs, rest};
use crate::common::wait_until;

#[tokio::test]
async fn the_agents_timeout_never_stops_a_persons_cell_and_its_result_says_why_it_waited() {
    let face = FaceService::start(&[], &[]).await;
    let agent = face.agent().await;
    let cwd = tempfile::tempdir().unwrap();
    let info = agent
        .call(
            "create_session",
            json!({"session_id": "both", "cwd": cwd.path()}),
        )
        .await;
    let kernel_id = info["kernel_id"].as_str().expect("kernel_id").to_string();
    let r = agent
        .call("execute", json!({"session_id": "both", "code": "keep = 1"}))
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    let ws = format!(
        "ws://127.0.0.1:{}/api/kernels/{kernel_id}/channels",
        face.port
    );

    // The person's cell ignores SIGINT and runs ~8 s; it says when it has started.
    let cell = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n\
                open('started', 'w').close()\ntime.sleep(8)\nprint('person done')";
    let person = {
        let (ws, token) = (ws.clone(), face.token.clone());
        tokio::spawn(async move { person_runs(&ws, &token, "json", cell).await })
    };
    let started = cwd.path().join("started");
    assert!(
        wait_until(Duration::from_secs(60), || started.exists()).await,
        "the person's cell never started"
    );

    // An agent that will not wait gives up, and the person's cell goes on.
    let gave_up = agent
        .call(
            "execute",
            json!({"session_id": "both", "code": "print('never')", "queue_timeout_s": 1}),
        )
        .await;
    assert_eq!(gave_up["status"], "cancelled", "{gave_up}");
    let notices = gave_up["notices"].to_string();
    assert!(
        notices.contains("queue_timeout_s") && notices.contains("a person through the Jupyter API"),
        "{gave_up}"
    );
    // The agent's 2 s timeout counts only its own code: it runs after the person's cell.
    let r = agent
        .call(
            "execute",
            json!({"session_id": "both", "code": "print('agent', keep)", "timeout_s": 2, "wait_s": 60}),
        )
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["stdout"], "agent 1\n", "{r}");
    assert!(r["queued_ms"].as_u64().unwrap_or(0) > 2000, "{r}");
    assert!(
        r["notices"]
            .to_string()
            .contains("a person through the Jupyter API"),
        "{r}"
    );
    assert_eq!(r["generation"], 1, "no restart: {r}");
    let person = person.await.expect("the person's client");
    assert_eq!(
        person["reply"], "ok",
        "the person's cell was stopped: {person}"
    );
    assert_eq!(person["stdout"], "person done\n", "{person}");

    // The person interrupts through the Jupyter API while the agent's run executes: the
    // agent's run says who stopped it.
    let k = format!("/api/kernels/{kernel_id}/interrupt");
    let long = agent
        .call(
            "execute",
            json!({"session_id": "both", "code": "import time\nfor _ in range(600): time.sleep(0.1)", "wait_s": 1}),
        )
        .await;
    let run_id = long["run_id"].as_str().expect("run_id").to_string();
    let stopped = loop {
        let (status, _) = rest("POST", &face.url(&k), Some(&face.token), None).await;
        assert_eq!(status, 204);
        let r = agent
            .call("get_execution", json!({"run_id": run_id, "wait_s": 2}))
            .await;
        if r["status"] != "running" {
            break r;
        }
    };
    assert_eq!(stopped["status"], "interrupted", "{stopped}");
    assert!(
        stopped["notices"]
            .to_string()
            .contains("Interrupted by a person through the Jupyter API"),
        "{stopped}"
    );
    face.stop().await;
}

#[tokio::test]
async fn closing_a_notebook_never_deletes_a_session_an_agent_worked_in_without_history() {
    let face = FaceService::start(&[], &[]).await;
    let agent = face.agent().await;
    // Two kernels started through the Jupyter API (as JupyterLab starts a notebook's).
    let start = || async {
        let (status, k) = rest(
            "POST",
            &face.url("/api/kernels"),
            Some(&face.token),
            Some(json!({"name": "python3"})),
        )
        .await;
        assert_eq!(status, 201, "{k}");
        k["id"].as_str().expect("a kernel id").to_string()
    };
    let used = start().await;
    let untouched = start().await;
    // The agent works in one, leaving no history entry.
    let r = agent
        .call(
            "execute",
            json!({"session_id": used, "code": "work = 1", "store_history": false}),
        )
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    let h = agent.call("get_history", json!({"session_id": used})).await;
    assert_eq!(h["entries"], json!([]), "{h}");

    let delete = |id: String| {
        let url = face.url(&format!("/api/kernels/{id}"));
        let token = face.token.clone();
        async move { rest("DELETE", &url, Some(&token), None).await }
    };
    let (status, body) = delete(used.clone()).await;
    assert_eq!(status, 409, "the agent's work was deleted: {body}");
    assert!(
        body["message"].as_str().unwrap_or("").contains("agent"),
        "{body}"
    );
    let r = agent
        .call(
            "execute",
            json!({"session_id": used, "code": "print(work)"}),
        )
        .await;
    assert_eq!(r["stdout"], "1\n", "{r}");
    // The one only the person used is deleted.
    let (status, body) = delete(untouched).await;
    assert_eq!(status, 204, "{body}");
    face.stop().await;
}
