//! What a run's output looks like to the agent: a timeout keeps the state before it, an
//! endless print loop and a 10 MB print come back bounded (the rest pageable), a thread's
//! output after the cell returned stays in its own run, and terminal control (`\r`, cursor
//! moves, colours, OSC) is rendered as a terminal shows it, with no escape byte left.

use std::time::{Duration, Instant};

use super::{get_execution, notices, run, run_id};
use crate::common::trust::*;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_past_timeout_ends_with_status_timeout_and_keeps_earlier_state() {
    let server = Server::start().await;
    server.create_session("t").await;

    let t0 = Instant::now();
    let (_, v) = run(
        &server,
        json!({"session_id": "t", "code": "import time; x = 1; time.sleep(1000); x = 2", "timeout_s": 2}),
    )
    .await;
    let took = t0.elapsed();
    assert_eq!(status(&v), "timeout", "{v}");
    assert!(took < Duration::from_secs(20), "timeout took {took:?}: {v}");
    eprintln!("timeout_s=2 returned after {took:?}");

    let next = server.exec("t", "print(x)").await;
    assert_eq!(status(&next), "ok", "{next}");
    assert_eq!(next["stdout"].as_str().unwrap_or("").trim(), "1", "{next}");

    server.destroy("t").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_print_loop_times_out_with_a_bounded_response_and_the_session_survives() {
    let server = Server::start().await;
    server.create_session("flood").await;

    let (r, v) = run(
        &server,
        json!({"session_id": "flood", "code": "while True: print(12345)", "timeout_s": 3}),
    )
    .await;
    assert_eq!(status(&v), "timeout", "{}", notices(&v));
    let size = dump(&r).len();
    eprintln!(
        "flood response: {size} bytes, truncated = {}",
        v["truncated"]
    );
    assert!(size < 100_000, "response is {size} bytes");
    assert!(
        v["stdout"].as_str().unwrap_or("").contains("12345"),
        "{}",
        v["stdout"]
    );

    let after = server.exec("flood", "1+1").await;
    assert_eq!(status(&after), "ok", "{after}");
    assert_eq!(after["result"], "2", "{after}");

    server.destroy("flood").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabyte_print_is_truncated_in_the_response_and_fully_pageable() {
    let server = Server::start().await;
    server.create_session("big").await;

    let (r, v) = run(
        &server,
        json!({"session_id": "big", "code": "print('x' * 10_000_000)"}),
    )
    .await;
    assert_eq!(status(&v), "ok", "{}", notices(&v));
    let size = dump(&r).len();
    eprintln!("10 MB print response: {size} bytes");
    assert!(size < 100_000, "response is {size} bytes");
    let t = &v["truncated"]["stdout"];
    assert_eq!(
        t["total_bytes"], 10_000_001,
        "truncated: {}",
        v["truncated"]
    );
    assert!(
        t["omitted_bytes"].as_u64().unwrap_or(0) > 9_000_000,
        "truncated: {}",
        v["truncated"]
    );

    let id = run_id(&v);
    let (all, pages, total) = page_all(&server, &id, "stdout", 1_000_000).await;
    eprintln!("paged {} bytes in {pages} pages", all.len());
    assert_eq!(total, 10_000_001);
    assert_eq!(all.len(), 10_000_001);
    assert!(pages >= 10, "{pages} pages");
    assert!(all.ends_with('\n'));
    assert!(
        all[..10_000_000].bytes().all(|b| b == b'x'),
        "paged text is not all 'x'"
    );

    server.destroy("big").await;
    server.shutdown().await;
}

const LATE_THREAD: &str = "import threading, time\n\
def f():\n    for i in range(5):\n        time.sleep(0.2); print('late', i)\n\
threading.Thread(target=f).start()";

// The thread's lines are read once they have all arrived, before the next run starts.
// If the next run starts while the thread still prints, ipykernel 7.4 itself tags the
// thread's stream messages with the *next* request's parent header (even in the same
// message as the next run's own output), so no client can attribute them to the first run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_output_after_the_cell_returns_stays_in_its_own_run() {
    let server = Server::start().await;
    server.create_session("late").await;

    let first = server.exec("late", LATE_THREAD).await;
    assert_eq!(status(&first), "ok", "{first}");
    let id = run_id(&first);

    // Poll the first run until all five late lines arrived.
    let t0 = Instant::now();
    let mut v = get_execution(&server, &id, 0.0).await;
    while !v["stdout"].as_str().unwrap_or("").contains("late 4")
        && t0.elapsed() < Duration::from_secs(15)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
        v = get_execution(&server, &id, 0.0).await;
    }
    let stdout = v["stdout"].as_str().unwrap_or("");
    for i in 0..5 {
        assert!(
            stdout.contains(&format!("late {i}")),
            "late {i} missing: {v}"
        );
    }
    assert!(v["late_output"].as_u64().unwrap_or(0) > 0, "{v}");

    let next = server.exec("late", "print('next')").await;
    assert_eq!(status(&next), "ok", "{next}");
    let next_out = next["stdout"].as_str().unwrap_or("");
    assert!(next_out.contains("next"), "{next}");
    assert!(!next_out.contains("late"), "late output leaked: {next}");

    server.destroy("late").await;
    server.shutdown().await;
}

/// tqdm-style output for two nested bars (no tqdm needed): `\r` redraws, `\n` to the inner
/// bar's line and `ESC[A` back up, as tqdm's `moveto` does; plus coloured stdout.
const FAKE_TQDM: &str = r#"import sys
def bar(label, n, total):
    pct = n * 100 // total
    return f"{label}: {pct:3d}%|{'#' * (pct // 10):<10}| {n}/{total}"
err = sys.stderr
for i in range(5):
    err.write('\r' + bar('outer', i, 5)); err.flush()
    for j in range(11):
        err.write('\n\r' + bar('inner', j, 10) + '\x1b[A'); err.flush()
err.write('\r' + bar('outer', 5, 5)); err.flush()
err.write('\n\n'); err.flush()
print('\x1b[31mred\x1b[0m')
print('\x1b]0;window title\x07\x1b[1;32mbold green\x1b[0m')
print('stale\x1b[2K\rerased')
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_progress_bars_collapse_and_no_escape_byte_remains() {
    let server = Server::start().await;
    server.create_session("tq").await;

    let r = server
        .call("execute", json!({"session_id": "tq", "code": FAKE_TQDM}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    let all = dump(&r);
    assert!(
        !all.contains('\u{1b}') && !all.to_lowercase().contains("\\u001b"),
        "an ESC byte remains in the result: {all}"
    );

    let stderr = v["stderr"].as_str().unwrap_or("");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    eprintln!("stderr after terminal emulation: {lines:?}");
    assert!(
        lines.len() <= 4,
        "progress lines did not collapse ({} lines): {stderr:?}",
        lines.len()
    );
    assert!(stderr.contains("outer: 100%"), "{stderr:?}");
    assert!(stderr.contains("inner: 100%"), "{stderr:?}");

    let stdout = v["stdout"].as_str().unwrap_or("");
    assert!(stdout.contains("red"), "{stdout:?}");
    assert!(stdout.contains("bold green"), "{stdout:?}");
    assert!(
        !stdout.contains("window title"),
        "OSC payload kept: {stdout:?}"
    );
    assert!(
        stdout.contains("erased") && !stdout.contains("stale"),
        "erase-line not applied: {stdout:?}"
    );

    server.destroy("tq").await;
    server.shutdown().await;
}
