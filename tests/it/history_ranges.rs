//! One rule for history ranges, through the real binary and ipykernel (docs/semantics.md,
//! "History ranges"): reading (`get_history`, `get_execution` pages) clamps like a Python
//! slice and an empty selection is an empty answer; acting on entries (`delete_history`,
//! `rerun_history`, `export_history`) refuses an index that names no entry, and an empty
//! selection, with `INVALID_ARGUMENT` that gives the valid range, before touching anything:
//! nothing deleted, no kernel restarted, no file written.

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

/// Three blocks `a = 1`, `b = 2`, `c = 3` in session `s`.
async fn three_blocks(server: &Server) {
    server.create_session("s").await;
    for code in ["a = 1", "b = 2", "c = 3"] {
        exec_ok(server, "s", code).await;
    }
}

async fn refused(server: &Server, tool: &str, args: Value) -> String {
    let r = server.call(tool, args.clone()).await;
    assert_eq!(
        error_code(&r),
        "INVALID_ARGUMENT",
        "{tool}({args}): {}",
        dump(&r)
    );
    let message = structured(&r)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!message.is_empty(), "{}", dump(&r));
    message
}

async fn generation(server: &Server) -> u64 {
    let r = server.call("get_session", json!({"session_id": "s"})).await;
    structured(&r)["generation"].as_u64().expect("generation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_history_refuses_indices_that_name_no_entry_and_deletes_nothing() {
    let state = StateHome::new();
    let server = state.start_server().await;
    three_blocks(&server).await;

    for args in [
        json!({"session_id": "s", "start": -100}),
        json!({"session_id": "s", "start": 3}),
        json!({"session_id": "s", "start": 0, "end": 100}),
        json!({"session_id": "s", "start": 2, "end": 1}),
    ] {
        let message = refused(&server, "delete_history", args).await;
        assert!(
            message.contains("-3 to 2"),
            "the message gives the valid range: {message}"
        );
        let (h, _) = history(&server, "s", None, None).await;
        assert_eq!(
            codes(&h),
            ["a = 1", "b = 2", "c = 3"],
            "nothing deleted: {h}"
        );
    }
    // Indices that exist, negative ones included, still work.
    let r = server
        .call("delete_history", json!({"session_id": "s", "start": -3}))
        .await;
    assert_eq!(structured(&r)["deleted"], 1, "{}", dump(&r));
    let (h, _) = history(&server, "s", None, None).await;
    assert_eq!(codes(&h), ["b = 2", "c = 3"], "{h}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_history_with_an_empty_or_out_of_range_selection_never_restarts_the_kernel() {
    let state = StateHome::new();
    let server = state.start_server().await;
    three_blocks(&server).await;
    assert_eq!(generation(&server).await, 1);

    for args in [
        json!({"session_id": "s", "start": 5}),
        json!({"session_id": "s", "start": 1, "end": 1}),
        json!({"session_id": "s", "start": -10, "end": 2}),
    ] {
        let message = refused(&server, "rerun_history", args).await;
        assert!(message.contains("-3 to 2"), "{message}");
        assert_eq!(generation(&server).await, 1, "the kernel was restarted");
    }
    let v = server.exec("s", "a + b + c").await;
    assert_eq!(v["result"], "6", "the state is untouched: {v}");
    assert_eq!(v["state_reset"], false, "{v}");

    // A session with no history has nothing to re-run: refused, not restarted.
    server.create_session("e").await;
    let r = server
        .call("rerun_history", json!({"session_id": "e"}))
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    let info = structured(&server.call("get_session", json!({"session_id": "e"})).await);
    assert_eq!(info["generation"], 1, "{info}");

    server.destroy("e").await;
    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_history_refuses_indices_that_name_no_entry_and_writes_nothing() {
    let state = StateHome::new();
    let server = state.start_server().await;
    three_blocks(&server).await;
    let dir = tmpdir();
    let path = dir.path().join("out.py");

    let message = refused(
        &server,
        "export_history",
        json!({"session_id": "s", "path": path, "format": "script", "start": 10}),
    )
    .await;
    assert!(message.contains("-3 to 2"), "{message}");
    assert!(!path.exists(), "a refused export wrote {}", path.display());

    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": path, "format": "script", "start": -2}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert_eq!(structured(&r)["entries"], 2, "{}", dump(&r));

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_tools_clamp_and_answer_an_empty_selection_without_error() {
    let state = StateHome::new();
    let server = state.start_server().await;
    three_blocks(&server).await;

    let (h, text) = history(&server, "s", Some(10), None).await;
    assert_eq!(indices(&h), Vec::<i64>::new(), "{h}");
    assert_eq!(h["total"], 3, "{h}");
    assert!(text.contains("3 in total"), "{text}");
    let (h, _) = history(&server, "s", Some(-100), Some(100)).await;
    assert_eq!(indices(&h), [0, 1, 2], "{h}");

    // get_execution pages clamp the same way: past the end is an empty page at the end.
    let v = exec_ok(&server, "s", "print('hello')").await;
    let page = structured(
        &server
            .call(
                "get_execution",
                json!({"run_id": v["run_id"], "stream": "stdout", "offset": 1000}),
            )
            .await,
    );
    assert_eq!(page["text"], "", "{page}");
    assert_eq!(page["total_bytes"], 6, "{page}");
    assert_eq!(page["offset"], 6, "{page}");
    assert_eq!(page["next_offset"], 6, "{page}");

    server.destroy("s").await;
    server.shutdown().await;
}
