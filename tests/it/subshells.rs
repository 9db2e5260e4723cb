//! Looking inside a busy kernel (docs/semantics.md, "Subshells") against real ipykernel 7:
//! while a run sleeps, `complete`, `inspect`, `is_complete`,
//! `get_session(include_variables=true)` and `execute(subshell=true)` answer through a kernel
//! subshell, each with its own output.

use crate::common::kernels::*;
use crate::common::*;
use serde_json::json;

/// The session is still running `run_id`.
async fn still_running(server: &Server, session: &str, run_id: &str) -> bool {
    let info = structured(
        &server
            .call("get_session", json!({"session_id": session}))
            .await,
    );
    info["status"] == "busy" && info["current_run_id"] == run_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_kernel_sleeps_complete_variables_and_a_subshell_execute_answer_before_it_ends() {
    require_venv();
    let server = Server::start().await;
    server.create_session("busy").await;
    let setup = server
        .exec(
            "busy",
            "import time\nnumbers = list(range(1000))\nname_of_user = 'alice'",
        )
        .await;
    assert_eq!(status(&setup), "ok", "{setup}");
    // The first completion imports IPython's completer machinery: not what is measured here.
    server
        .call("complete", json!({"session_id": "busy", "code": "numb"}))
        .await;
    let (sleeping, _) = exec_args(
        &server,
        "busy",
        "print('main-before', flush=True)\ntime.sleep(20)\nprint('main-after')",
        json!({"wait_s": 1}),
    )
    .await;
    assert_eq!(status(&sleeping), "running", "{sleeping}");
    let sleep_id = sleeping["run_id"].as_str().expect("run_id").to_string();

    let r = server
        .call(
            "complete",
            json!({"session_id": "busy", "code": "name_of_u"}),
        )
        .await;
    assert!(!is_error(&r), "complete while busy: {}", dump(&r));
    let matches = structured(&r)["matches"].clone();
    assert!(
        matches
            .as_array()
            .is_some_and(|m| m.iter().any(|v| v == "name_of_user")),
        "{matches}"
    );

    let r = server
        .call("inspect", json!({"session_id": "busy", "code": "numbers"}))
        .await;
    assert!(!is_error(&r), "inspect while busy: {}", dump(&r));
    assert_eq!(structured(&r)["found"], true, "{}", dump(&r));

    let r = server
        .call(
            "is_complete",
            json!({"session_id": "busy", "code": "for i in x:"}),
        )
        .await;
    assert!(!is_error(&r), "is_complete while busy: {}", dump(&r));
    assert_eq!(structured(&r)["status"], "incomplete", "{}", dump(&r));

    let r = server
        .call(
            "get_session",
            json!({"session_id": "busy", "include_variables": true}),
        )
        .await;
    let detail = structured(&r);
    let names: Vec<&str> = detail["variables"]
        .as_array()
        .unwrap_or_else(|| panic!("no variables while busy: {detail}"))
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(
        names.contains(&"numbers") && names.contains(&"name_of_user"),
        "{detail}"
    );
    assert_eq!(detail["status"], "busy", "{detail}");

    let (tag, _) = exec_args(
        &server,
        "busy",
        "print('sub-out')\n'tag'",
        json!({"subshell": true}),
    )
    .await;
    assert_eq!(status(&tag), "ok", "{tag}");
    assert_eq!(tag["result"], "'tag'", "{tag}");
    assert_eq!(tag["stdout"], "sub-out\n", "{tag}");
    assert_ne!(tag["run_id"], sleep_id.as_str());
    assert!(
        still_running(&server, "busy", &sleep_id).await,
        "the subshell answered after the sleep ended"
    );
    let r = server
        .call("get_execution", json!({"run_id": tag["run_id"]}))
        .await;
    assert_eq!(structured(&r)["result"], "'tag'", "{}", dump(&r));

    // End the sleep early; its record holds only its own output.
    let r = server
        .call("interrupt_session", json!({"session_id": "busy"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let r = server
        .call("get_execution", json!({"run_id": sleep_id, "wait_s": 20}))
        .await;
    let slept = structured(&r);
    assert_eq!(status(&slept), "interrupted", "{slept}");
    assert_eq!(slept["stdout"], "main-before\n", "{slept}");

    let r = server
        .call(
            "get_history",
            json!({"session_id": "busy", "start": 0, "end": 10}),
        )
        .await;
    let codes: Vec<String> = structured(&r)["entries"]
        .as_array()
        .map(|e| e.iter().map(|x| x["code"].to_string()).collect())
        .unwrap_or_default();
    assert!(
        codes.iter().all(|c| !c.contains("sub-out")),
        "the subshell run is not history: {codes:?}"
    );
    server.destroy("busy").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_without_subshells_answers_session_busy_while_it_runs() {
    let server = Server::start().await;
    require_kernel(&server, "bash").await;
    create_kernel_session(&server, "sh", "bash").await;
    let (sleeping, _) = exec_args(&server, "sh", "sleep 20", json!({"wait_s": 1})).await;
    assert_eq!(status(&sleeping), "running", "{sleeping}");
    let r = server
        .call("complete", json!({"session_id": "sh", "code": "ech"}))
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    assert_eq!(structured(&r)["error_code"], "SESSION_BUSY", "{}", dump(&r));
    let (side, _) = exec_args(&server, "sh", "echo x", json!({"subshell": true})).await;
    assert_eq!(side["error_code"], "SESSION_BUSY", "{side}");
    server.destroy("sh").await;
    server.shutdown().await;
}
