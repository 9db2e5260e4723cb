//! Execution an agent can trust (issue 3 acceptance), against the real binary and a real
//! ipykernel: deadlines, floods, input(), late output, terminal control, wait/poll,
//! queue cancellation, MCP cancellation and progress, orphans, start-up failures, stale
//! state and kernel crashes.
//!
//! Deadlines only prove "returns instead of hanging" unless the issue states a bound.

use std::time::{Duration, Instant};

use crate::common::trust::*;
use crate::common::*;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

/// `execute` with arbitrary arguments; returns the raw result and its structured content.
async fn run(server: &Server, args: Value) -> (rmcp::model::CallToolResult, Value) {
    let r = server.call("execute", args).await;
    let v = structured(&r);
    (r, v)
}

fn run_id(v: &Value) -> String {
    v["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run_id: {v}"))
        .to_string()
}

fn notices(v: &Value) -> String {
    v["notices"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn error_code(v: &Value) -> &str {
    v["error_code"].as_str().unwrap_or("")
}

/// `get_execution(run_id, wait_s)`.
async fn get_execution(server: &Server, run_id: &str, wait_s: f64) -> Value {
    structured(
        &server
            .call("get_execution", json!({"run_id": run_id, "wait_s": wait_s}))
            .await,
    )
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_returns_awaiting_input_with_the_prompt_and_send_input_answers_it() {
    let server = Server::start().await;
    server.create_session("in").await;

    let t0 = Instant::now();
    let (_, v) = run(
        &server,
        json!({"session_id": "in", "code": "name = input('name? ')\nprint('hello', name)"}),
    )
    .await;
    let took = t0.elapsed();
    eprintln!("input() returned after {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(status(&v), "awaiting_input", "{v}");
    assert_eq!(v["prompt"]["text"], "name? ", "{v}");
    assert_eq!(v["prompt"]["password"], false, "{v}");

    let r = server
        .call("send_input", json!({"run_id": run_id(&v), "value": "Ada"}))
        .await;
    let answered = structured(&r);
    assert_eq!(status(&answered), "ok", "{answered}");
    assert!(
        answered["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("hello Ada"),
        "{answered}"
    );

    server.destroy("in").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_list_answers_two_input_calls() {
    let server = Server::start().await;
    server.create_session("in2").await;

    let (_, v) = run(
        &server,
        json!({
            "session_id": "in2",
            "code": "a = input('a? ')\nb = input('b? ')\nprint(a + '-' + b)",
            "stdin": ["x", "y"],
        }),
    )
    .await;
    assert_eq!(status(&v), "ok", "{v}");
    assert!(
        v["stdout"].as_str().unwrap_or("").contains("x-y"),
        "{}",
        v["stdout"]
    );

    server.destroy("in2").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_input_on_a_finished_run_is_not_awaiting_input() {
    let server = Server::start().await;
    server.create_session("in3").await;

    let done = server.exec("in3", "1+1").await;
    assert_eq!(status(&done), "ok", "{done}");
    let r = server
        .call("send_input", json!({"run_id": run_id(&done), "value": "x"}))
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(error_code(&v), "NOT_AWAITING_INPUT", "{v}");

    server.destroy("in3").await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_kills_subprocesses_the_kernel_started() {
    let server = Server::start().await;
    server.create_session("orph").await;

    let v = server
        .exec(
            "orph",
            "import subprocess\np = subprocess.Popen(['sleep', '1000'])\nprint(p.pid)",
        )
        .await;
    assert_eq!(status(&v), "ok", "{v}");
    let pid: u32 = v["stdout"]
        .as_str()
        .unwrap_or("")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no pid printed: {v}"));
    assert!(pid_alive(pid), "sleep {pid} not running");

    let r = server
        .call("restart_session", json!({"session_id": "orph"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let gone = wait_until(Duration::from_secs(10), || !pid_alive(pid)).await;
    if !gone {
        // Do not leave it behind.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        gone,
        "sleep {pid} survived restart_session\n--- server stderr ---\n{}",
        server.stderr_tail()
    );

    server.destroy("orph").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_that_exits_at_start_fails_create_session_at_once_with_its_status() {
    let specs = tempfile::tempdir().unwrap();
    write_kernelspec(
        specs.path(),
        "exit3",
        &["sh", "-c", "echo boom >&2; exit 3"],
    );
    let server =
        Server::start_with_args(&["--kernelspec-dir", specs.path().to_str().unwrap()]).await;

    let t0 = Instant::now();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "e3", "kernel": "exit3"}),
        )
        .await;
    let took = t0.elapsed();
    eprintln!("create_session(exit3) failed after {took:?}");
    assert!(is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(error_code(&v), "KERNEL_START_FAILED", "{v}");
    let described = format!("{} {}", v["message"], v["details"]);
    assert!(described.contains("status 3"), "{v}");
    assert!(described.contains("boom"), "{v}");
    assert!(took < Duration::from_secs(10), "took {took:?}");

    let list = structured(&server.call("list_sessions", json!({})).await);
    assert!(
        !list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["session_id"] == "e3"),
        "the failed session remains: {list}"
    );

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_generation_mismatch_is_state_changed_before_running() {
    let server = Server::start().await;
    let info = server.create_session("g").await;
    assert_eq!(info["generation"], 1, "{info}");

    let r = server
        .call("restart_session", json!({"session_id": "g"}))
        .await;
    let restarted = structured(&r);
    assert_eq!(
        restarted["generation"],
        2,
        "{}\n--- server stderr ---\n{}",
        dump(&r),
        server.stderr_tail()
    );

    let r = server
        .call(
            "execute",
            json!({"session_id": "g", "code": "ran_stale = 1", "expected_generation": 1}),
        )
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(error_code(&v), "STATE_CHANGED", "{v}");

    let (r, v) = run(
        &server,
        json!({"session_id": "g", "code": "'ran_stale' in globals()", "expected_generation": 2}),
    )
    .await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["result"], "False", "the stale call ran: {v}");

    server.destroy("g").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_kernel_ends_the_run_kernel_died_cancels_the_queue_and_resets_state() {
    let server = Server::start().await;
    server.create_session("k").await;
    let set = server.exec("k", "y = 5").await;
    assert_eq!(status(&set), "ok", "{set}");
    let pid = server.kernel_pid("k").await;

    let (_, running) = run(
        &server,
        json!({"session_id": "k", "code": "import time; time.sleep(60)", "wait_s": 0.5}),
    )
    .await;
    assert_eq!(status(&running), "running", "{running}");
    let (_, queued) = run(
        &server,
        json!({"session_id": "k", "code": "print('queued ran')", "wait_s": 0.2}),
    )
    .await;
    assert_eq!(status(&queued), "queued", "{queued}");

    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the kernel");

    let died = get_execution(&server, &run_id(&running), 20.0).await;
    let took = t0.elapsed();
    eprintln!(
        "kernel_died reported {took:?} after kill -9: {}",
        notices(&died)
    );
    assert_eq!(status(&died), "kernel_died", "{died}");
    assert!(notices(&died).contains("signal 9"), "{died}");
    assert!(took < Duration::from_secs(10), "took {took:?}");

    let q = get_execution(&server, &run_id(&queued), 5.0).await;
    assert_eq!(status(&q), "cancelled", "{q}");
    assert!(!notices(&q).is_empty(), "no reason given: {q}");
    assert!(
        !q["stdout"].as_str().unwrap_or("").contains("queued ran"),
        "{q}"
    );

    let next = server.exec("k", "'y' in globals()").await;
    assert_eq!(status(&next), "ok", "{next}");
    assert_eq!(next["state_reset"], true, "{next}");
    assert_eq!(next["result"], "False", "{next}");
    assert!(next["generation"].as_u64().unwrap_or(0) >= 2, "{next}");
    assert!(!pid_alive(pid));

    server.destroy("k").await;
    server.shutdown().await;
}
