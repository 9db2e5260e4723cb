//! Fault drills with the fake kernel, where a real one cannot misbehave on demand: frames that
//! are no message or are signed with another key, a journal whose writes start failing, and a
//! run still going when the server shuts down.

mod common;

use std::time::Duration;

use common::fake::*;
use common::*;
use serde_json::{Value, json};

/// The journal lines of the server's only session journal.
fn journal_lines(server: &Server) -> Vec<Value> {
    let dir = server.workdir().join("state/kernel-mcp/history");
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(&dir)
        .expect("the journal directory")
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        lines.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_forged_frames_are_dropped_counted_and_never_fatal() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "g", "fake").await;
    let v = server.exec("g", "garbage\nprint fine").await;
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["stdout"], "fine\n", "the forged stream never lands: {v}");
    let info = structured(&server.call("get_session", json!({"session_id": "g"})).await);
    assert_eq!(info["dropped_messages"], 2, "{info}");
    let again = server.exec("g", "print again").await;
    assert_eq!(again["stdout"], "again\n");
    server.destroy("g").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_whose_writes_fail_is_turned_off_and_the_server_keeps_working() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let dir = specs.path().to_str().expect("utf-8 path").to_string();
    let spawned = spawn_server_limited(&[], &["--kernelspec-dir", &dir], Some(200_000));
    let server = Server::start_spawned(spawned).await;
    create_fake_session(&server, "j", "fake").await;
    let mut noticed = false;
    for _ in 0..8 {
        let v = server.exec("j", "flood 60000").await;
        assert_eq!(status(&v), "ok", "{v}");
        noticed |= v["notices"].to_string().contains("no longer journalled");
    }
    assert!(noticed, "a run says the history is no longer journalled");
    let h = structured(&server.call("get_history", json!({"session_id": "j"})).await);
    assert_eq!(h["total"], 8, "history stays in memory: {h}");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "j", "path": "big.txt", "format": "transcript"}),
        )
        .await;
    assert_eq!(structured(&r)["error_code"], "IO_ERROR", "{}", dump(&r));
    assert!(!server.stderr().contains("panicked"));
    server.destroy("j").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_still_going_at_shutdown_is_journalled_with_its_status() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "s", "fake").await;
    let started = server
        .call(
            "execute",
            json!({"session_id": "s", "code": "print before\nsleep 60", "wait_s": 1}),
        )
        .await;
    assert_eq!(structured(&started)["status"], "running");
    terminate(server.pid(), Duration::from_secs(20));
    let lines = journal_lines(&server);
    let last = lines
        .iter()
        .rev()
        .find_map(|l| l.get("entry").cloned())
        .unwrap_or(Value::Null);
    assert_eq!(last["status"], "cancelled", "journal: {lines:?}");
    assert_eq!(last["stdout"], "before\n");
    drop(server);
}
