//! A run over time: `execute` returns `running` at `wait_s` and `get_execution` the result
//! later; a cancelled queued run never executes; the queue holds 64 runs; an MCP
//! cancellation interrupts the running execute and keeps the session's variables; and a
//! progress token gets progress notifications while a cell runs.

use std::time::{Duration, Instant};

use super::{error_code, get_execution, run, run_id};
use crate::common::trust::*;
use crate::common::*;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_returns_running_at_wait_s_and_get_execution_later_returns_the_result() {
    let server = Server::start().await;
    server.create_session("w").await;

    let t0 = Instant::now();
    let (_, v) = run(
        &server,
        json!({"session_id": "w", "code": "import time; time.sleep(10); 42", "wait_s": 1}),
    )
    .await;
    let took = t0.elapsed();
    assert_eq!(status(&v), "running", "{v}");
    // At wait_s, long before the run's end.
    assert!(
        took < Duration::from_secs(6),
        "wait_s=1 returned after {took:?}"
    );
    let id = run_id(&v);

    let done = get_execution(&server, &id, 20.0).await;
    assert_eq!(status(&done), "ok", "{done}");
    assert_eq!(done["result"], "42", "{done}");
    assert!(
        done["elapsed_ms"].as_u64().unwrap_or(0) >= 9_500,
        "elapsed_ms: {done}"
    );

    server.destroy("w").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_queued_run_means_it_never_executes() {
    let server = Server::start().await;
    server.create_session("q").await;
    let marker = server.workdir().join(format!("ran-{}", std::process::id()));
    let marker_py = marker.to_str().unwrap();

    let (_, first) = run(
        &server,
        json!({"session_id": "q", "code": "import time; time.sleep(3)", "wait_s": 0.2}),
    )
    .await;
    assert_eq!(status(&first), "running", "{first}");
    let (_, queued) = run(
        &server,
        json!({"session_id": "q", "code": format!("open({marker_py:?}, 'w').write('ran')"), "wait_s": 0.2}),
    )
    .await;
    assert_eq!(status(&queued), "queued", "{queued}");
    let qid = run_id(&queued);

    let r = server
        .call("cancel_execution", json!({"run_id": qid}))
        .await;
    let cancelled = structured(&r);
    assert_eq!(status(&cancelled), "cancelled", "{cancelled}");

    let done = get_execution(&server, &run_id(&first), 15.0).await;
    assert_eq!(status(&done), "ok", "{done}");
    // Anything still queued would run before this.
    let after = server.exec("q", "1+1").await;
    assert_eq!(after["result"], "2", "{after}");
    assert!(!marker.exists(), "the cancelled run executed");
    let again = get_execution(&server, &qid, 0.0).await;
    assert_eq!(status(&again), "cancelled", "{again}");

    server.destroy("q").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_beyond_64_runs_is_queue_full() {
    let server = Server::start().await;
    server.create_session("full").await;

    let (_, first) = run(
        &server,
        json!({"session_id": "full", "code": "import time; time.sleep(60)", "wait_s": 0.2}),
    )
    .await;
    assert_eq!(status(&first), "running", "{first}");
    let mut accepted = 0;
    let mut full = None;
    for i in 0..70 {
        let r = server
            .call(
                "execute",
                json!({"session_id": "full", "code": format!("{i}"), "wait_s": 0}),
            )
            .await;
        let v = structured(&r);
        if is_error(&r) {
            full = Some(v);
            break;
        }
        assert_eq!(status(&v), "queued", "{v}");
        accepted += 1;
    }
    let full = full.expect("70 queued runs and no QUEUE_FULL");
    assert_eq!(error_code(&full), "QUEUE_FULL", "{full}");
    assert_eq!(accepted, 64, "queue accepted {accepted} runs");

    server.destroy("full").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_cancel_of_a_running_execute_leaves_the_session_idle_with_variables() {
    let server = Server::start().await;
    server.create_session("cc").await;
    let set = server.exec("cc", "v = 7").await;
    assert_eq!(status(&set), "ok", "{set}");

    let args = json!({"session_id": "cc", "code": "import time; time.sleep(60)"});
    let params =
        CallToolRequestParams::new("execute").with_arguments(args.as_object().unwrap().clone());
    let handle = server
        .client()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send execute");

    // Wait until the run is actually executing.
    let t0 = Instant::now();
    loop {
        let info = structured(
            &server
                .call("get_session", json!({"session_id": "cc"}))
                .await,
        );
        if info["status"] == "busy" {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "never busy: {info}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    handle
        .cancel(Some("test cancels".into()))
        .await
        .expect("send notifications/cancelled");

    let t0 = Instant::now();
    let mut info;
    loop {
        info = structured(
            &server
                .call("get_session", json!({"session_id": "cc"}))
                .await,
        );
        if info["status"] == "idle" && info["current_run_id"].is_null() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "session not idle 15 s after the cancel: {info}\n--- server stderr ---\n{}",
            server.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("idle {:?} after the cancel", t0.elapsed());

    let v = server.exec("cc", "v").await;
    assert_eq!(v["result"], "7", "{v}");
    assert_eq!(v["state_reset"], false, "{v}");

    server.destroy("cc").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_second_cell_with_a_progress_token_sends_at_least_two_progress_notifications() {
    let server = ProgressServer::start().await;
    let r = server
        .call("create_session", json!({"session_id": "p"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));

    let before = server.progress_count();
    let r = server
        .call(
            "execute",
            json!({"session_id": "p", "code": "import time\nfor i in range(4):\n    print('step', i, flush=True)\n    time.sleep(1)\n42"}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    // Notifications are sent before the response; the client may still be dispatching them.
    wait_until(Duration::from_secs(5), || {
        server.progress_count() - before >= 2
    })
    .await;
    let n = server.progress_count() - before;
    let messages = server.handler.messages.lock().unwrap().clone();
    eprintln!("{n} progress notifications: {messages:?}");
    assert!(n >= 2, "{n} progress notifications: {messages:?}");
    assert!(n <= 6, "more than once a second: {n}: {messages:?}");
    assert!(
        messages.iter().any(|m| m.contains("step")),
        "no progress message carries the latest output line: {messages:?}"
    );

    let r = server
        .call("destroy_session", json!({"session_id": "p"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    server.shutdown().await;
}
