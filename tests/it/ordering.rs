//! Calls pipelined on one session run in the order the client wrote them. rmcp handles each
//! request in its own task; before the fix, back-to-back `execute` calls reached the session
//! queue in whatever order the runtime's workers picked them up, so `x = 1` then `x` failed
//! with NameError about half the time. The test writes raw JSON-RPC lines, in one write, so
//! the order on the wire is known (the rmcp client sends each message from its own task).

use std::collections::HashMap;

use crate::common::raw::{RawClient, call_line};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_executes_run_in_the_order_they_were_sent() {
    let mut client = RawClient::start().await;
    client
        .write(&call_line(
            1,
            "create_session",
            json!({"session_id": "fifo"}),
        ))
        .await;
    let created = client.read(1).await;
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
                call_line(
                    first + i as i64,
                    "execute",
                    json!({"session_id": "fifo", "code": code}),
                )
            })
            .collect();
        next_id += codes.len() as i64;
        client.write(&batch).await;
        let mut results = HashMap::new();
        for id in first..next_id {
            results.insert(
                id,
                client.read(id).await["result"]["structuredContent"].clone(),
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
    assert!(
        client.close().await,
        "the server exits when its stdin closes"
    );
}
