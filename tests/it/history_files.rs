//! History against the real binary and real ipykernel: Python slices, delete, text numbered
//! from 1, rerun, and the on-disk journal surviving SIGKILL (while the kernels of a SIGKILLed
//! server and their files do not).
//!
//! Every server gets its own temp `XDG_STATE_HOME` ([`StateHome`]), so journals neither pile
//! up in `~` nor leak between tests.

use std::time::Duration;

use crate::common::history::*;
use crate::common::*;
use serde_json::json;

/// Five blocks `b0 = 0` … `b4 = 4` in session `s`.
const FIVE: [&str; 5] = ["b0 = 0", "b1 = 1", "b2 = 2", "b3 = 3", "b4 = 4"];

async fn five_blocks(server: &Server, session: &str) {
    server.create_session(session).await;
    for code in FIVE {
        exec_ok(server, session, code).await;
    }
}

/// Lines of a history text rendering that start a block (`[n] …`).
fn block_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('['))
        .map(String::from)
        .collect()
}

// ---------------------------------------------------------------- history slices

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_history_start_minus_two_returns_the_last_two() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let (h, _) = history(&server, "s", Some(-2), None).await;
    assert_eq!(codes(&h), ["b3 = 3", "b4 = 4"], "{h}");
    assert_eq!(indices(&h), [3, 4], "{h}");
    assert_eq!(h["total"], 5, "{h}");

    let (all, _) = history(&server, "s", None, None).await;
    assert_eq!(codes(&all), FIVE, "{all}");
    for e in all["entries"].as_array().unwrap() {
        assert_eq!(e["status"], "ok", "{e}");
        assert!(e["run_id"].as_str().is_some_and(|r| !r.is_empty()), "{e}");
        assert!(e["execution_count"].as_i64().is_some(), "{e}");
    }

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_history_start_one_end_minus_one_returns_three() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let (h, _) = history(&server, "s", Some(1), Some(-1)).await;
    assert_eq!(codes(&h), ["b1 = 1", "b2 = 2", "b3 = 3"], "{h}");
    assert_eq!(indices(&h), [1, 2, 3], "{h}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_history_start_zero_removes_only_the_first() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let r = server
        .call("delete_history", json!({"session_id": "s", "start": 0}))
        .await;
    assert!(!is_error(&r), "delete_history: {}", dump(&r));
    assert_eq!(structured(&r)["deleted"], 1, "{}", dump(&r));

    let (h, _) = history(&server, "s", None, None).await;
    assert_eq!(h["total"], 4, "{h}");
    assert_eq!(codes(&h), ["b1 = 1", "b2 = 2", "b3 = 3", "b4 = 4"], "{h}");
    assert_eq!(indices(&h), [0, 1, 2, 3], "{h}");
    // The kernel's state is untouched.
    let r = exec_ok(&server, "s", "b0").await;
    assert_eq!(r["result"], "0", "{r}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_indices_out_of_range_clamp_without_error() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let cases: [(Option<i64>, Option<i64>, &[i64]); 6] = [
        (Some(-100), None, &[0, 1, 2, 3, 4]),
        (Some(3), Some(100), &[3, 4]),
        (Some(10), None, &[]),
        (Some(-100), Some(-50), &[]),
        (None, Some(-100), &[]),
        (Some(4), Some(2), &[]),
    ];
    for (start, end, want) in cases {
        let (h, text) = history(&server, "s", start, end).await;
        assert_eq!(indices(&h), want, "get_history({start:?}, {end:?}): {h}");
        assert_eq!(h["total"], 5, "{h}");
        if want.is_empty() {
            assert!(!text.is_empty(), "empty range still says something");
        }
    }

    // delete_history, rerun_history and export_history do not clamp: see history_ranges.rs.
    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_text_numbers_blocks_from_one() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let (_, text) = history(&server, "s", None, None).await;
    assert_eq!(
        block_lines(&text),
        [
            "[1] b0 = 0",
            "[2] b1 = 1",
            "[3] b2 = 2",
            "[4] b3 = 3",
            "[5] b4 = 4"
        ],
        "text rendering:\n{text}"
    );
    // A slice keeps the blocks' own numbers.
    let (_, text) = history(&server, "s", Some(-2), None).await;
    assert_eq!(
        block_lines(&text),
        ["[4] b3 = 3", "[5] b4 = 4"],
        "text rendering:\n{text}"
    );

    server.destroy("s").await;
    server.shutdown().await;
}

// ---------------------------------------------------------------- rerun

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_history_after_restart_rebuilds_state() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    exec_ok(&server, "s", "a = 10").await;
    exec_ok(&server, "s", "b = a * 2").await;

    let r = server
        .call("restart_session", json!({"session_id": "s"}))
        .await;
    assert!(!is_error(&r), "restart_session: {}", dump(&r));
    let gen_after_restart = structured(&r)["generation"].as_u64().unwrap_or(0);
    let gone = server
        .call(
            "execute",
            json!({"session_id": "s", "code": "'b' in globals()", "store_history": false}),
        )
        .await;
    assert_eq!(
        structured(&gone)["result"],
        "False",
        "b should be gone after the restart: {}",
        dump(&gone)
    );
    let (h, _) = history(&server, "s", None, None).await;
    assert_eq!(
        codes(&h),
        ["a = 10", "b = a * 2"],
        "history survives restart: {h}"
    );

    let r = server
        .call(
            "rerun_history",
            json!({"session_id": "s", "start": 0, "end": 2, "restart": true}),
        )
        .await;
    let v = structured(&r);
    assert!(!is_error(&r), "rerun_history: {}", dump(&r));
    assert!(v["stopped_at"].is_null(), "{v}");
    let runs = v["runs"].as_array().expect("runs[]");
    assert_eq!(runs.len(), 2, "{v}");
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{v}");
    assert_eq!(runs[0]["index"], 0, "{v}");
    assert_eq!(runs[1]["index"], 1, "{v}");

    let b = exec_ok(&server, "s", "b").await;
    assert_eq!(b["result"], "20", "{b}");
    assert!(
        b["generation"].as_u64().unwrap_or(0) > gen_after_restart,
        "restart=true restarts again: {b} (generation after restart_session: {gen_after_restart})"
    );

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_history_stops_at_the_failing_block_and_names_its_index() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    exec_ok(&server, "s", "x = 1").await;
    let failing = server.exec("s", "raise ValueError('boom')").await;
    assert_eq!(status(&failing), "error", "{failing}");
    exec_ok(&server, "s", "y = 2").await;

    let r = server
        .call("rerun_history", json!({"session_id": "s"}))
        .await;
    let v = structured(&r);
    assert_eq!(v["stopped_at"], 1, "rerun_history: {}", dump(&r));
    let runs = v["runs"].as_array().expect("runs[]");
    assert_eq!(runs.len(), 2, "the block after the failure is not run: {v}");
    assert_eq!(runs[0]["status"], "ok", "{v}");
    assert_eq!(runs[1]["status"], "error", "{v}");
    assert!(
        runs[1]["error"].as_str().unwrap_or("").contains("boom"),
        "{v}"
    );
    assert!(
        text(&r).contains("index 1"),
        "text names the index: {}",
        text(&r)
    );

    let check = server
        .call(
            "execute",
            json!({"session_id": "s", "code": "(x, 'y' in globals())", "store_history": false}),
        )
        .await;
    assert_eq!(
        structured(&check)["result"],
        "(1, False)",
        "{}",
        dump(&check)
    );

    server.destroy("s").await;
    server.shutdown().await;
}

// ---------------------------------------------------------------- journal / SIGKILL

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_of_a_sigkilled_server_is_readable_and_exportable_by_the_next_server() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("crashy").await;
    exec_ok(&server, "crashy", "print('before the crash')").await;
    let e = server.exec("crashy", "1 / 0").await;
    assert_eq!(status(&e), "error", "{e}");
    exec_ok(&server, "crashy", "a = 10\na * 2").await;
    kill_server(server).await;

    assert!(
        !state.journals().is_empty(),
        "no journal under {}",
        state.journal_dir().display()
    );

    let server = state.start_server().await;
    let (h, text) = history(&server, "crashy", None, None).await;
    assert_eq!(
        codes(&h),
        ["print('before the crash')", "1 / 0", "a = 10\na * 2"],
        "{h}"
    );
    let entries = h["entries"].as_array().unwrap();
    assert_eq!(entries[0]["status"], "ok", "{h}");
    assert_eq!(entries[1]["status"], "error", "{h}");
    assert!(
        text.contains("before the crash") && text.contains("ZeroDivisionError"),
        "outputs kept:\n{text}"
    );
    assert!(text.contains("[3] a = 10"), "{text}");

    let out = tmpdir();
    let path = out.path().join("crashy.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "crashy", "path": path, "format": "notebook"}),
        )
        .await;
    assert!(
        !is_error(&r),
        "export_history from the journal: {}",
        dump(&r)
    );
    assert_eq!(structured(&r)["entries"], 3, "{}", dump(&r));
    assert_valid_notebook(&path);
    let nb = read_json(&path);
    let types = output_types(&nb);
    assert!(types[0].contains(&"stream".to_string()), "{types:?}");
    assert!(types[1].contains(&"error".to_string()), "{types:?}");
    assert!(
        types[2].contains(&"execute_result".to_string()),
        "{types:?}"
    );

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernels_of_a_sigkilled_server_die_within_ten_seconds() {
    if crate::common::shared_mode() {
        crate::common::skip(
            "shared mode: the kernels belong to the service, which outlives a killed relay on purpose",
        );
        return;
    }
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("k").await;
    exec_ok(&server, "k", "1").await;
    let kernel = server.kernel_pid("k").await;
    let all = descendants(server.pid());
    assert!(
        all.contains(&kernel),
        "kernel {kernel} under the server: {all:?}"
    );
    kill_server(server).await;

    let gone = wait_until(Duration::from_secs(10), || {
        all.iter().all(|&p| !pid_alive(p))
    })
    .await;
    let left: Vec<u32> = all.iter().copied().filter(|&p| pid_alive(p)).collect();
    // Do not leave them behind even when the test fails.
    for &p in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        gone,
        "processes of the killed server still alive after 10 s: {left:?} (kernel {kernel})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_a_sigkilled_servers_kernel_are_removed_by_its_supervisor() {
    if crate::common::shared_mode() {
        crate::common::skip("shared mode: the kernels belong to the service");
        return;
    }
    let state = StateHome::new();
    let run = state.path().join("run");
    let server = start_with_env(
        &[
            ("XDG_STATE_HOME", state.path().as_os_str()),
            ("JUPYTER_RUNTIME_DIR", run.as_os_str()),
        ],
        &[],
    )
    .await;
    server.create_session("k").await;
    exec_ok(&server, "k", "1").await;
    let before = kernel_files(&run);
    for kind in [".json", ".mcp"] {
        assert!(
            before
                .iter()
                .any(|n| n.starts_with("kernel-mcp-") && n.ends_with(kind)),
            "a live Python session has its {kind} file: {before:?}"
        );
    }
    assert!(
        before.iter().any(|n| n.starts_with("broker-")),
        "and its broker endpoint: {before:?}"
    );
    kill_server(server).await;

    let clean = wait_until(Duration::from_secs(20), || kernel_files(&run).is_empty()).await;
    assert!(
        clean,
        "left by the killed server's kernel: {:?}",
        kernel_files(&run)
    );
}
