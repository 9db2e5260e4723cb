//! Calls pipelined on one session run in the order the client wrote them. rmcp handles each
//! request in its own task; before the fix, back-to-back `execute` calls reached the session
//! queue in whatever order the runtime's workers picked them up, so `x = 1` then `x` failed
//! with NameError about half the time. The test writes raw JSON-RPC lines, in one write, so
//! the order on the wire is known (the rmcp client sends each message from its own task).

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use common::server_command;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_executes_run_in_the_order_they_were_sent() {
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
    // Responses may come in any order: keep the ones read ahead.
    let mut seen: HashMap<i64, Value> = HashMap::new();
    let mut read_until = async |id: i64| -> Value {
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
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
            .to_string()
            + "\n"
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    read_until(0).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let create = call(1, "create_session", json!({"session_id": "fifo"}));
    stdin
        .write_all(format!("{initialized}\n{create}").as_bytes())
        .await
        .unwrap();
    let created = read_until(1).await;
    assert_eq!(created["result"]["isError"], false, "{created}");

    let mut next_id = 2;
    for round in 0..5 {
        let mut codes = vec![format!("order = []; x = {round}")];
        codes.extend((0..8).map(|i| format!("order.append({i})")));
        codes.push("order".into());
        let first = next_id;
        let batch: String = codes
            .iter()
            .enumerate()
            .map(|(i, code)| {
                call(
                    first + i as i64,
                    "execute",
                    json!({"session_id": "fifo", "code": code}),
                )
            })
            .collect();
        next_id += codes.len() as i64;
        stdin.write_all(batch.as_bytes()).await.unwrap();
        let mut results = HashMap::new();
        for id in first..next_id {
            results.insert(
                id,
                read_until(id).await["result"]["structuredContent"].clone(),
            );
        }
        let counts: Vec<i64> = (first..next_id)
            .map(|id| results[&id]["execution_count"].as_i64().unwrap_or(-1))
            .collect();
        for (i, code) in codes.iter().enumerate() {
            let r = &results[&(first + i as i64)];
            assert_eq!(r["status"], "ok", "round {round}, {code}: {r}");
        }
        assert!(
            counts.windows(2).all(|w| w[0] < w[1]),
            "round {round}: execution counts not in send order: {counts:?}"
        );
        assert_eq!(
            results[&(next_id - 1)]["result"],
            "[0, 1, 2, 3, 4, 5, 6, 7]"
        );
    }
    drop(stdin);
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    assert!(exit.is_ok(), "the server exits when its stdin closes");
}
