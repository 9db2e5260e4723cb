//! How long what belongs to a client lives, through the real binary (docs/semantics.md): a
//! connection's end is not a cancellation (a killed relay leaves a named session's run going;
//! the client's own `notifications/cancelled` still stops it), an HTTP connection's `default`
//! lives as long as its `Mcp-Session-Id` (not the HTTP library's idle keep-alive), an expired
//! `default` answers `SESSION_EXPIRED` instead of being replaced by a fresh one, and a
//! person's cells on the kernel keep its session from expiring.

use std::time::Duration;

use crate::common::history::{codes, error_code};
use crate::common::person::Person;
use crate::common::service::TestService;
use crate::common::*;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use serde_json::json;

#[tokio::test]
async fn a_clients_end_while_execute_waits_leaves_a_named_sessions_run_going() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let b = svc.relay().await;
    a.create_session("long").await;
    // Longer than rmcp's 5 s drain of a closed connection, after which it cancels the calls
    // still running.
    let code = "import time\nfor i in range(24):\n    time.sleep(0.5)\nfinished = 'yes'\nfinished";
    let params = CallToolRequestParams::new("execute").with_arguments(
        json!({"session_id": "long", "code": code, "wait_s": 60})
            .as_object()
            .unwrap()
            .clone(),
    );
    let waiting = {
        let peer = a.client().peer().clone();
        tokio::spawn(async move { peer.call_tool(params).await })
    };
    // The run has started in the kernel.
    let started = tokio::time::Instant::now();
    loop {
        let info = structured(&b.call("get_session", json!({"session_id": "long"})).await);
        if info["status"] == "busy" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never busy: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The relay dies: the service sees the connection end while the call waits.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the relay");
    let _ = waiting.await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let entry = loop {
        let h = structured(&b.call("get_history", json!({"session_id": "long"})).await);
        if let Some(e) = h["entries"].as_array().and_then(|e| e.first()) {
            break e.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never finished: {h}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(entry["status"], "ok", "the run was stopped: {entry}");
    assert_eq!(b.exec("long", "finished").await["result"], "'yes'");
    drop(a);
    b.shutdown().await;
}

#[tokio::test]
async fn a_clients_cancellation_still_stops_its_run() {
    let svc = TestService::new();
    let a = svc.relay().await;
    a.create_session("stopped").await;
    let params = CallToolRequestParams::new("execute").with_arguments(
        json!({"session_id": "stopped", "code": "import time\ntime.sleep(30)", "wait_s": 60})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = a
        .client()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    let started = tokio::time::Instant::now();
    loop {
        let info = structured(
            &a.call("get_session", json!({"session_id": "stopped"}))
                .await,
        );
        if info["status"] == "busy" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never busy: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    handle
        .cancel(Some("test".into()))
        .await
        .expect("cancel sent");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let entry = loop {
        let h = structured(
            &a.call("get_history", json!({"session_id": "stopped"}))
                .await,
        );
        if let Some(e) = h["entries"].as_array().and_then(|e| e.first()) {
            break e.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was not stopped: {h}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(entry["status"], "interrupted", "{entry}");
    a.shutdown().await;
}

#[tokio::test]
async fn an_expired_default_answers_session_expired_instead_of_a_fresh_one() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let info = structured(
        &a.call(
            "create_session",
            json!({"session_id": "default", "expires_after_s": 2}),
        )
        .await,
    );
    let kernel = info["pid"].as_u64().expect("pid") as u32;
    let r = structured(&a.call("execute", json!({"code": "kept = 1"})).await);
    assert_eq!(status(&r), "ok", "{r}");
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(kernel)).await,
        "the default never expired"
    );
    let r = a.call("execute", json!({"code": "kept"})).await;
    assert_eq!(
        error_code(&r),
        "SESSION_EXPIRED",
        "a silent fresh default: {}",
        dump(&r)
    );
    assert!(
        text(&r).contains("create_session"),
        "says how to go on: {}",
        text(&r)
    );
    // History stays readable, and a new default is there for the asking.
    let h = structured(
        &a.call("get_history", json!({"session_id": "default"}))
            .await,
    );
    assert_eq!(codes(&h), ["kept = 1"], "{h}");
    a.call("create_session", json!({"session_id": "default"}))
        .await;
    let r = structured(&a.call("execute", json!({"code": "1 + 1"})).await);
    assert_eq!(r["result"], "2", "{r}");
    a.shutdown().await;
}

#[tokio::test]
async fn a_persons_cells_on_the_kernel_keep_its_session_from_expiring() {
    let server = Server::start().await;
    let info = structured(
        &server
            .call(
                "create_session",
                json!({"session_id": "watched", "expires_after_s": 3}),
            )
            .await,
    );
    let file = info["connection_file"].as_str().expect("connection_file");
    // Short cells a second apart for 6 s, then one cell that runs for 5 s: 11 s of a
    // person's work, past the 3 s expiry, with no agent call in between.
    let mut cells = vec!["1 + 1"; 7];
    cells.push("import time; time.sleep(5)");
    let person = Person::start(file, &cells, Duration::from_secs(1));
    person.finish().await;
    let r = server
        .call("get_session", json!({"session_id": "watched"}))
        .await;
    assert!(
        !is_error(&r),
        "expired while a person worked on it: {}",
        dump(&r)
    );
    // Left alone, it expires as before.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = server
            .call("get_session", json!({"session_id": "watched"}))
            .await;
        if error_code(&r) == "SESSION_EXPIRED" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never expired: {}",
            dump(&r)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn an_http_default_outlives_the_keep_alive_and_an_empty_idle_session_does_not() {
    let svc = TestService::new();
    let socket = svc.socket();
    let mut child = svc.start(&[
        "--http",
        "127.0.0.1:0",
        "--http-keep-alive-s",
        "2",
        "--socket",
        socket.to_str().unwrap(),
    ]);
    let face = crate::common::service::http_face(&svc).await;
    let (port, token) = (face.port, Some(face.token.as_str()));
    let agent = http::HttpClient::connect_as(port, token).await;
    let idle = http::HttpClient::connect_as(port, token).await;
    let r = agent.call("execute", json!({"code": "x = 41; x"})).await;
    assert_eq!(r["result"], "41", "{r}");
    let r = idle.call("list_sessions", json!({})).await;
    assert!(r["sessions"].is_array(), "{r}");
    // Well past the keep-alive, with no request from either.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let r = agent.call("execute", json!({"code": "x + 1"})).await;
    assert_eq!(
        r["result"], "42",
        "the default did not outlive the keep-alive: {r}"
    );
    let (head, _) = http::post_as(
        port,
        token,
        Some(idle.session()),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "list_sessions", "arguments": {}}}),
    )
    .await;
    assert!(
        head.contains(" 404"),
        "an idle session with nothing in it stays: {head}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    // Longer than the service's own bound on its shutdown (the HTTP face 5 s, then its
    // sessions, pool and broker within SHUTDOWN_DEADLINE, 30 s), which a loaded host can reach.
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the service exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
}
