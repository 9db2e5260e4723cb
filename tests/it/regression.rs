//! One test per bug found by trying the server as a client would, named after the bug.

use crate::common::raw::{RawClient, call_line};
use crate::common::*;
use serde_json::json;

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
    let mut client = RawClient::start().await;
    let batch = [
        call_line(1, "create_session", json!({"session_id": "z"})),
        call_line(2, "destroy_session", json!({"session_id": "z"})),
        call_line(3, "create_session", json!({"session_id": "z"})),
    ]
    .concat();
    client.write(&batch).await;
    let (first, second) = (client.read(1).await, client.read(3).await);
    client.read(2).await;
    assert_eq!(
        first["result"]["isError"], true,
        "the destroyed create fails: {first}"
    );
    assert_eq!(second["result"]["isError"], false, "{second}");
    client
        .write(&call_line(
            4,
            "execute",
            json!({"session_id": "z", "code": "6 * 7"}),
        ))
        .await;
    let ran = client.read(4).await;
    assert_eq!(
        ran["result"]["structuredContent"]["result"], "42",
        "the second session is reachable: {ran}"
    );
    client.close().await;
}
