//! The MCP tasks extension on `execute` (real binary, real ipykernel): a client that declares
//! `io.modelcontextprotocol/tasks` gets a task named by the run id when the run outlasts
//! `wait_s`, `tasks/get` reports it and then its result, `tasks/cancel` interrupts it and the
//! kernel keeps its state; a client that does not declare the extension keeps the plain
//! `"running"` result.

use std::time::{Duration, Instant};

use crate::common::*;
use rmcp::model::{
    CallToolRequestParams, CancelTaskParams, ClientCapabilities, ClientConfig, ClientRequest,
    GetTaskParams, Implementation, Request, ServerResult, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

type TaskClient = RunningService<RoleClient, ClientConfig>;

/// A client declaring the tasks extension, on a freshly spawned server.
async fn task_client() -> (TaskClient, Spawned2) {
    let spawned = spawn_server(&[], &[]);
    let info = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("tasks-test", "0"),
    );
    let pid = spawned.pid;
    let client = tokio::time::timeout(Duration::from_secs(60), info.serve(spawned.transport))
        .await
        .expect("initialize in time")
        .expect("initialize");
    (
        client,
        Spawned2 {
            pid,
            _workdir: spawned.workdir,
        },
    )
}

/// What is left of the spawned server once the client owns its transport.
struct Spawned2 {
    pid: u32,
    _workdir: tempfile::TempDir,
}

async fn call(client: &TaskClient, tool: &str, args: Value) -> Result<ServerResult, ServiceError> {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().unwrap().clone());
    tokio::time::timeout(
        Duration::from_secs(120),
        client.send_request(ClientRequest::CallToolRequest(Request::new(params))),
    )
    .await
    .expect("tools/call answered")
}

async fn get_task(client: &TaskClient, id: &str) -> Value {
    let r = client
        .send_request(ClientRequest::GetTaskRequest(Request::new(
            GetTaskParams::new(id),
        )))
        .await
        .expect("tasks/get");
    let ServerResult::GetTaskResult(t) = r else {
        panic!("tasks/get answered {r:?}");
    };
    serde_json::to_value(t).unwrap()
}

/// Poll `tasks/get` until the task leaves `working` (generous: proves no hang only).
async fn until_terminal(client: &TaskClient, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let t = get_task(client, id).await;
        let status = t["task"]["status"]
            .as_str()
            .or(t["status"].as_str())
            .unwrap_or("")
            .to_string();
        if status != "working" {
            return t;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "task still working: {t}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn field<'a>(t: &'a Value, k: &str) -> &'a Value {
    if t.get("task").is_some() && t["task"].get(k).is_some() {
        &t["task"][k]
    } else {
        &t[k]
    }
}

fn task_id_of(r: &ServerResult) -> String {
    match r {
        ServerResult::CreateTaskResult(c) => {
            assert_eq!(c.task.status, TaskStatus::Working);
            c.task.task_id.clone()
        }
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_outlasts_wait_s_becomes_a_task_whose_result_is_the_run() {
    let (client, server) = task_client().await;
    // A quick run is an ordinary result, even for a client that declared tasks.
    let quick = call(&client, "execute", json!({"code": "x = 41\nx + 1"}))
        .await
        .unwrap();
    let ServerResult::CallToolResult(quick) = quick else {
        panic!("a quick run should answer with its result: {quick:?}");
    };
    assert_eq!(structured(&quick)["result"], "42");

    let r = call(
        &client,
        "execute",
        json!({"code": "import time\ntime.sleep(5)\nprint('slept')\nx", "wait_s": 1}),
    )
    .await
    .unwrap();
    let id = task_id_of(&r);
    assert!(id.starts_with('r'), "task id is the run id: {id}");
    let done = until_terminal(&client, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let result = field(&done, "result");
    let sc = &result["structuredContent"];
    assert_eq!(sc["run_id"], id.as_str(), "{done}");
    assert_eq!(sc["status"], "ok", "{done}");
    assert_eq!(sc["stdout"], "slept\n");
    assert_eq!(sc["result"], "41");

    // The run tools see the same run.
    let again = call(&client, "get_execution", json!({"run_id": id}))
        .await
        .unwrap();
    let ServerResult::CallToolResult(again) = again else {
        panic!("get_execution: {again:?}");
    };
    assert_eq!(structured(&again)["status"], "ok");

    // An unknown task is a protocol error, not a hang.
    let e = client
        .send_request(ClientRequest::GetTaskRequest(Request::new(
            GetTaskParams::new("r999999"),
        )))
        .await;
    assert!(e.is_err(), "unknown task answered {e:?}");
    client.cancel().await.ok();
    terminate(server.pid, Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_interrupts_the_run_and_the_kernel_keeps_its_state() {
    let (client, server) = task_client().await;
    call(&client, "execute", json!({"code": "keep = 'kept'"}))
        .await
        .unwrap();
    let r = call(
        &client,
        "execute",
        json!({"code": "import time\ntime.sleep(60)", "wait_s": 0.2}),
    )
    .await
    .unwrap();
    let id = task_id_of(&r);
    let started = Instant::now();
    client
        .send_request(ClientRequest::CancelTaskRequest(Request::new(
            CancelTaskParams::new(id.clone()),
        )))
        .await
        .expect("tasks/cancel");
    let done = until_terminal(&client, &id).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "cancel took {:?}",
        started.elapsed()
    );
    let status = field(&done, "status").as_str().unwrap().to_string();
    assert!(
        matches!(status.as_str(), "completed" | "cancelled"),
        "{done}"
    );
    if status == "completed" {
        assert_eq!(
            field(&done, "result")["structuredContent"]["status"],
            "interrupted",
            "{done}"
        );
    }
    let after = call(&client, "execute", json!({"code": "keep"}))
        .await
        .unwrap();
    let ServerResult::CallToolResult(after) = after else {
        panic!("{after:?}");
    };
    assert_eq!(structured(&after)["result"], "'kept'");
    client.cancel().await.ok();
    terminate(server.pid, Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_extension_keeps_the_running_result() {
    let server = Server::start().await;
    let r = server
        .call(
            "execute",
            json!({"code": "import time\ntime.sleep(2)", "wait_s": 0.2}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(v["status"], "running", "{v}");
    let run_id = v["run_id"].as_str().unwrap().to_string();
    // Its tasks/get is refused: it never declared the extension.
    let e = server
        .client()
        .send_request(ClientRequest::GetTaskRequest(Request::new(
            GetTaskParams::new(run_id.clone()),
        )))
        .await;
    assert!(e.is_err(), "tasks/get without the extension answered {e:?}");
    let done = server
        .call("get_execution", json!({"run_id": run_id, "wait_s": 30}))
        .await;
    assert_eq!(structured(&done)["status"], "ok");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_tasks_dates_stay_put_between_two_tasks_get_calls() {
    let (client, server) = task_client().await;
    let r = call(
        &client,
        "execute",
        json!({"code": "import time\ntime.sleep(2)", "wait_s": 0.2}),
    )
    .await
    .unwrap();
    let id = task_id_of(&r);
    let first = until_terminal(&client, &id).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let second = get_task(&client, &id).await;
    for k in ["createdAt", "lastUpdatedAt"] {
        assert_eq!(
            field(&first, k),
            field(&second, k),
            "{k}: {first}\n{second}"
        );
    }
    let date = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(field(&second, k).as_str().unwrap()).unwrap()
    };
    let ran = date("lastUpdatedAt") - date("createdAt");
    assert!(
        ran >= chrono::Duration::milliseconds(1900) && ran < chrono::Duration::seconds(30),
        "created to finished is the run's time: {ran}"
    );
    client.cancel().await.ok();
    terminate(server.pid, Duration::from_secs(10));
}

/// A notebook of code cells `(id, source)` in `dir`, as `name`; its path.
fn notebook(dir: &std::path::Path, name: &str, cells: &[(&str, &str)]) -> String {
    let cells: Vec<Value> = cells
        .iter()
        .map(|(id, s)| json!({"cell_type": "code", "id": id, "metadata": {}, "source": s, "outputs": [], "execution_count": null}))
        .collect();
    let nb = json!({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}, "nbformat": 4, "nbformat_minor": 5});
    let path = dir.join(name);
    std::fs::write(&path, nb.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_cells_batch_that_outlasts_wait_s_is_one_task_and_tasks_cancel_stops_it() {
    let (client, server) = task_client().await;
    let dir = tempfile::tempdir().unwrap();
    let short = notebook(
        dir.path(),
        "short.ipynb",
        &[
            ("a", "import time\ntime.sleep(1.5)\nprint('a')"),
            ("b", "print('b')"),
        ],
    );
    call(&client, "open_notebook", json!({"path": short}))
        .await
        .unwrap();
    let r = call(
        &client,
        "execute_cells",
        json!({"path": short, "wait_s": 0.2}),
    )
    .await
    .unwrap();
    let id = task_id_of(&r);
    assert!(id.starts_with("cells-"), "the batch's id: {id}");
    let done = until_terminal(&client, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let result = &field(&done, "result")["structuredContent"];
    assert_eq!(result["run_id"], id.as_str(), "{done}");
    assert_eq!(result["cells_done"], 2, "{done}");
    assert_eq!(result["results"][1]["stdout"], "b\n", "{done}");

    let long = notebook(
        dir.path(),
        "long.ipynb",
        &[
            ("slow", "import time\ntime.sleep(60)"),
            ("next", "print('never')"),
        ],
    );
    call(&client, "open_notebook", json!({"path": long}))
        .await
        .unwrap();
    let r = call(
        &client,
        "execute_cells",
        json!({"path": long, "wait_s": 0.5}),
    )
    .await
    .unwrap();
    let id = task_id_of(&r);
    let working = get_task(&client, &id).await;
    assert_eq!(field(&working, "status"), "working", "{working}");
    assert!(
        field(&working, "statusMessage")
            .as_str()
            .is_some_and(|m| m.contains("slow")),
        "says which cell runs: {working}"
    );
    let started = Instant::now();
    client
        .send_request(ClientRequest::CancelTaskRequest(Request::new(
            CancelTaskParams::new(id.clone()),
        )))
        .await
        .expect("tasks/cancel");
    let done = until_terminal(&client, &id).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(field(&done, "status"), "cancelled", "{done}");
    client.cancel().await.ok();
    terminate(server.pid, Duration::from_secs(10));
}
