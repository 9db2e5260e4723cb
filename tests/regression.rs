//! One test per bug found by trying the server as a client would, named after the bug.

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// An interrupt sent right after `execute`, before ipykernel starts the code, used to be
/// ignored by the kernel; 5 s later the server restarted it and all state was lost. The
/// interrupt is now repeated until the run stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_sent_before_the_code_starts_still_stops_it_and_keeps_state() {
    let server = Server::start().await;
    server.create_session("early").await;
    let set = server.exec("early", "keep = 1").await;
    assert_eq!(status(&set), "ok", "{set}");
    let started = structured(
        &server
            .call(
                "execute",
                json!({"session_id": "early", "code": "while True: pass", "wait_s": 0}),
            )
            .await,
    );
    let run_id = started["run_id"].as_str().expect("a run id").to_string();
    server
        .call("interrupt_session", json!({"session_id": "early"}))
        .await;
    let done = structured(
        &server
            .call("get_execution", json!({"run_id": run_id, "wait_s": 30}))
            .await,
    );
    assert_eq!(status(&done), "interrupted", "{done}");
    let after = server.exec("early", "keep").await;
    assert_eq!(
        after["result"], "1",
        "state survived the interrupt: {after}"
    );
    assert_eq!(
        after["generation"], 1,
        "the kernel was not restarted: {after}"
    );
    server.destroy("early").await;
    server.shutdown().await;
}

/// create(z), destroy(z), create(z) pipelined: the failing first create used to forget the
/// name, which by then belonged to the second session, so the second create reported success
/// for a session nobody could reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_does_not_forget_a_newer_session_of_the_same_name() {
    let workdir = tempfile::tempdir().unwrap();
    let mut child = server_command(workdir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kernel-mcp");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen: HashMap<i64, Value> = HashMap::new();
    let mut read = async |id: i64| -> Value {
        loop {
            if let Some(msg) = seen.remove(&id) {
                return msg;
            }
            let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
                .await
                .expect("a response within 60 s")
                .expect("read stdout")
                .expect("server still running");
            let msg: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if let Some(n) = msg["id"].as_i64() {
                seen.insert(n, msg);
            }
        }
    };
    let call = |id: i64, tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
        .to_string()
            + "\n"
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    read(0).await;
    let batch = format!(
        "{}\n{}{}{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(1, "create_session", json!({"session_id": "z"})),
        call(2, "destroy_session", json!({"session_id": "z"})),
        call(3, "create_session", json!({"session_id": "z"})),
    );
    stdin.write_all(batch.as_bytes()).await.unwrap();
    let (first, second) = (read(1).await, read(3).await);
    read(2).await;
    assert_eq!(
        first["result"]["isError"], true,
        "the destroyed create fails: {first}"
    );
    assert_eq!(second["result"]["isError"], false, "{second}");
    stdin
        .write_all(call(4, "execute", json!({"session_id": "z", "code": "6 * 7"})).as_bytes())
        .await
        .unwrap();
    let ran = read(4).await;
    assert_eq!(
        ran["result"]["structuredContent"]["result"], "42",
        "the second session is reachable: {ran}"
    );
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
}
