//! `interrupt_session` is honest (docs/semantics.md, "Interrupting"): it waits up to the
//! interrupt grace (5 s) and says whether the run stopped (its final status) or is still
//! running, and then that `restart_session` (which loses state) will stop it. Against real
//! ipykernel.

use serde_json::json;

use crate::common::*;

/// Start `code` in `session` and return its run id once it is running.
async fn start_running(server: &Server, session: &str, code: &str) -> String {
    let r = server
        .call(
            "execute",
            json!({"session_id": session, "code": code, "wait_s": 1.5}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "running", "{v}");
    v["run_id"].as_str().expect("a run id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_session_waits_for_an_ordinary_run_and_says_it_stopped() {
    let server = Server::start().await;
    server.create_session("plain").await;
    let run = start_running(&server, "plain", "import time; x = 5; time.sleep(60)").await;
    let r = server
        .call("interrupt_session", json!({"session_id": "plain"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["interrupted_run_id"], run.as_str(), "{v}");
    assert_eq!(v["stopped"], true, "{v}");
    let final_status = v["run_status"].as_str().unwrap_or_default();
    assert!(
        matches!(final_status, "interrupted" | "error"),
        "a final status: {v}"
    );
    assert_ne!(v["status"], "busy", "the session is no longer busy: {v}");
    assert!(text(&r).contains("stopped"), "{}", text(&r));
    assert!(!text(&r).contains("restart_session"), "{}", text(&r));
    // The record agrees, and the state is kept.
    let done = structured(
        &server
            .call("get_execution", json!({"run_id": run, "wait_s": 0}))
            .await,
    );
    assert_eq!(done["status"], final_status, "{done}");
    let x = server.exec("plain", "x").await;
    assert_eq!(x["result"], "5", "{x}");
    // Nothing running: said so, no run fields.
    let r = server
        .call("interrupt_session", json!({"session_id": "plain"}))
        .await;
    let v = structured(&r);
    assert_eq!(v["interrupted_run_id"], json!(null), "{v}");
    assert_eq!(v["stopped"], json!(null), "{v}");
    assert!(text(&r).contains("nothing was running"), "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_session_on_code_that_ignores_sigint_says_it_still_runs_and_restart_stops_it() {
    let server = Server::start().await;
    server.create_session("stubborn").await;
    let code = "import signal, time\n\
                signal.signal(signal.SIGINT, signal.SIG_IGN)\n\
                while True:\n    time.sleep(0.05)";
    let run = start_running(&server, "stubborn", code).await;
    let r = server
        .call("interrupt_session", json!({"session_id": "stubborn"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["interrupted_run_id"], run.as_str(), "{v}");
    assert_eq!(v["stopped"], false, "the run did not stop: {v}");
    assert_eq!(v["run_status"], "running", "{v}");
    let notice = v["notices"].to_string();
    assert!(
        notice.contains("still running") && notice.contains("restart_session"),
        "the result says it goes on and what stops it: {v}"
    );
    assert!(text(&r).contains("restart_session"), "{}", text(&r));
    // It does go on: interrupt_session never restarts the kernel.
    let again = structured(
        &server
            .call("get_execution", json!({"run_id": run, "wait_s": 1}))
            .await,
    );
    assert_eq!(status(&again), "running", "{again}");
    assert_eq!(again["generation"], 1, "{again}");
    // restart_session stops it.
    let r = server
        .call("restart_session", json!({"session_id": "stubborn"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let done = structured(
        &server
            .call("get_execution", json!({"run_id": run, "wait_s": 30}))
            .await,
    );
    assert_ne!(
        status(&done),
        "running",
        "restart_session stops the run: {done}"
    );
    let next = server.exec("stubborn", "1 + 1").await;
    assert_eq!(next["result"], "2", "{next}");
    assert_eq!(next["state_reset"], true, "{next}");
    server.shutdown().await;
}
