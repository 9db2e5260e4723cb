//! Fault injection (issue 3): the real server over stdio against `fake-kernel`, a Jupyter
//! kernel that misbehaves on demand (see the command and env tables in
//! `src/bin/fake-kernel.rs`). Real kernels cover the same ground in the other test files; this
//! file pins what a real kernel cannot do deterministically.

use std::time::{Duration, Instant};

use crate::common::fake::*;
use crate::common::*;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// Generous: a wait this long only proves "returns instead of hanging", nothing more.
const NO_HANG: Duration = Duration::from_secs(30);

/// Call a tool; returns (structuredContent, the raw result, how long it took).
async fn timed(server: &Server, tool: &str, args: Value) -> (Value, CallToolResult, Duration) {
    let started = Instant::now();
    let r = server.call(tool, args).await;
    let took = started.elapsed();
    (structured(&r), r, took)
}

/// `execute` with extra arguments.
async fn execute(server: &Server, session: &str, code: &str, extra: Value) -> Value {
    let mut args = json!({"session_id": session, "code": code});
    if let (Some(a), Value::Object(e)) = (args.as_object_mut(), extra) {
        a.extend(e);
    }
    structured(&server.call("execute", args).await)
}

fn run_id(v: &Value) -> String {
    v["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run_id: {v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_exiting_at_start_fails_create_session_with_status_and_stderr() {
    let specs = FakeSpecs::new().add("exit3", &[("FAKE_KERNEL_EXIT_AT_START", "3")]);
    let server = specs.start_server().await;
    let (v, r, took) = timed(
        &server,
        "create_session",
        json!({"session_id": "s", "kernel": "exit3"}),
    )
    .await;
    assert!(is_error(&r), "create_session must fail: {}", dump(&r));
    assert_eq!(v["error_code"], "KERNEL_START_FAILED", "{v}");
    let all = dump(&r);
    assert!(all.contains("status 3"), "must mention status 3: {all}");
    assert!(
        all.contains("FAKE_KERNEL_EXIT_AT_START"),
        "must carry the kernel's stderr line: {all}"
    );
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: an early exit must fail at once, not at the startup timeout"
    );
    let (list, _, _) = timed(&server, "list_sessions", json!({})).await;
    assert_eq!(
        list["sessions"],
        json!([]),
        "nothing half-created remains: {list}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_mid_run_reports_kernel_died_cancels_queued_runs_and_resets_state() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    let info = create_fake_session(&server, "die", "fake").await;
    assert_eq!(info["generation"], 1, "{info}");
    let old_pid = server.kernel_pid("die").await;

    let first = execute(
        &server,
        "die",
        "print before\nsleep 1\nexit 1",
        json!({"wait_s": 0.2}),
    )
    .await;
    assert_eq!(status(&first), "running", "{first}");
    let queued = execute(&server, "die", "print queued", json!({"wait_s": 0})).await;
    assert_eq!(status(&queued), "queued", "{queued}");

    let (died, r, took) = timed(
        &server,
        "get_execution",
        json!({"run_id": run_id(&first), "wait_s": 20}),
    )
    .await;
    assert_eq!(status(&died), "kernel_died", "{died}");
    assert!(is_error(&r), "kernel_died is isError: {}", dump(&r));
    assert!(took < NO_HANG, "reported after {took:?}");
    let all = dump(&r);
    assert!(all.contains("status 1"), "exit status in the result: {all}");
    assert!(
        all.contains("exit 1: exiting without a reply"),
        "kernel stderr tail in the result: {all}"
    );

    let (cancelled, _, _) = timed(
        &server,
        "get_execution",
        json!({"run_id": run_id(&queued), "wait_s": 10}),
    )
    .await;
    assert_eq!(status(&cancelled), "cancelled", "{cancelled}");
    assert!(
        !cancelled["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("queued"),
        "a queued run never runs in the new kernel: {cancelled}"
    );

    let next = execute(&server, "die", "print after", json!({})).await;
    assert_eq!(status(&next), "ok", "{next}");
    assert_eq!(next["state_reset"], true, "{next}");
    assert_eq!(next["generation"], 2, "{next}");
    assert_eq!(next["stdout"], "after\n", "{next}");
    assert!(!pid_alive(old_pid), "old kernel {old_pid} still alive");
    server.destroy("die").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_reply_without_busy_or_idle_finishes_the_run_at_once() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "ab", "fake").await;
    let (v, _, took) = timed(
        &server,
        "execute",
        json!({"session_id": "ab", "code": "abort"}),
    )
    .await;
    assert_eq!(status(&v), "aborted", "{v}");
    // Not after waiting for an idle that never comes (until wait_s, 50 s).
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: no idle is expected for an aborted reply"
    );
    let next = execute(&server, "ab", "print fine", json!({})).await;
    assert_eq!(status(&next), "ok", "{next}");
    assert_eq!(next["stdout"], "fine\n", "{next}");
    server.destroy("ab").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_parent_header_and_metadata_still_work() {
    let specs = FakeSpecs::new().add("xeuslike", &[("FAKE_KERNEL_NULL_PARENTS", "1")]);
    let server = specs.start_server().await;
    create_fake_session(&server, "nul", "xeuslike").await;
    let v = execute(&server, "nul", "print hi\nresult 7", json!({})).await;
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(
        v["stdout"], "hi\n",
        "unparented output stays out of the run: {v}"
    );
    assert_eq!(v["result"], "7", "{v}");
    assert_eq!(v["execution_count"], 1, "{v}");
    let e = execute(&server, "nul", "error ValueError nope", json!({})).await;
    assert_eq!(status(&e), "error", "{e}");
    assert_eq!(ename(&e), "ValueError", "{e}");
    assert_eq!(e["execution_count"], 2, "{e}");
    server.destroy("nul").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_before_outputs_still_collects_them() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "rf", "fake").await;
    let v = execute(
        &server,
        "rf",
        "reply-first\nprint one\nsleep 0.5\nprint two\nresult 3",
        json!({}),
    )
    .await;
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["stdout"], "one\ntwo\n", "outputs after the reply: {v}");
    assert_eq!(v["result"], "3", "{v}");
    server.destroy("rf").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_output_goes_to_its_own_run_not_the_next() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "late", "fake").await;
    let first = execute(&server, "late", "print now\nlate 300 LATE-LINE", json!({})).await;
    assert_eq!(status(&first), "ok", "{first}");
    assert_eq!(first["stdout"], "now\n", "{first}");
    let second = execute(&server, "late", "sleep 1\nprint next", json!({})).await;
    assert_eq!(status(&second), "ok", "{second}");
    assert_eq!(
        second["stdout"], "next\n",
        "late output of the previous run leaked: {second}"
    );
    let (again, r, _) = timed(&server, "get_execution", json!({"run_id": run_id(&first)})).await;
    assert!(
        again["late_output"].as_u64().unwrap_or(0) > 0,
        "late_output counts the late bytes: {again}"
    );
    assert!(
        dump(&r).contains("LATE-LINE"),
        "the late line is in its own run's record: {again}"
    );
    server.destroy("late").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ignoring_sigint_times_out_restarts_the_kernel_and_resets_state() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "hang", "fake").await;
    let old_pid = server.kernel_pid("hang").await;
    let (v, r, took) = timed(
        &server,
        "execute",
        json!({"session_id": "hang", "code": "print start\nhang", "timeout_s": 1}),
    )
    .await;
    assert_eq!(status(&v), "timeout", "{v}");
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(15),
        "timeout after {took:?}: expected 1 s + 5 s grace + restart"
    );
    let notices = v["notices"].to_string().to_lowercase();
    assert!(
        notices.contains("restart"),
        "a notice says the kernel was restarted: {}",
        dump(&r)
    );
    let next = execute(&server, "hang", "print again", json!({})).await;
    assert_eq!(status(&next), "ok", "{next}");
    assert_eq!(next["state_reset"], true, "{next}");
    assert_eq!(next["generation"], 2, "{next}");
    assert!(
        wait_until(NO_HANG, || !pid_alive(old_pid)).await,
        "the hung kernel {old_pid} is still alive"
    );
    server.destroy("hang").await;
    server.shutdown().await;
}

/// Destroy a session on spec `kernel` and check the rung and that no fake kernel is left.
async fn destroy_reaches(env: &[(&str, &str)], rung: &str) {
    let specs = FakeSpecs::new().add("fake", env);
    let server = specs.start_server().await;
    create_fake_session(&server, "down", "fake").await;
    let pid = server.kernel_pid("down").await;
    let (v, r, took) = timed(&server, "destroy_session", json!({"session_id": "down"})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert_eq!(v["shutdown"], rung, "{v} (after {took:?})");
    assert!(
        wait_until(NO_HANG, || !pid_alive(pid)).await,
        "kernel {pid} still alive after destroy"
    );
    assert_eq!(
        fake_kernels_of(server.pid()),
        Vec::<u32>::new(),
        "fake kernels left"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_reply_makes_destroy_graceful() {
    destroy_reaches(&[], "graceful").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shutdown_reply_makes_destroy_terminate() {
    destroy_reaches(&[("FAKE_KERNEL_NO_SHUTDOWN_REPLY", "1")], "terminated").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shutdown_reply_and_ignored_sigterm_make_destroy_kill() {
    destroy_reaches(
        &[
            ("FAKE_KERNEL_NO_SHUTDOWN_REPLY", "1"),
            ("FAKE_KERNEL_IGNORE_SIGTERM", "1"),
        ],
        "killed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_request_awaits_input_and_send_input_answers_it() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "in", "fake").await;
    let (v, _, took) = timed(
        &server,
        "execute",
        json!({"session_id": "in", "code": "input name? ", "wait_s": 30}),
    )
    .await;
    assert_eq!(
        status(&v),
        "awaiting_input",
        "(the fake errors when allow_stdin is false) {v}"
    );
    // At the prompt, not at wait_s (30 s).
    assert!(took < Duration::from_secs(10), "returned after {took:?}");
    assert_eq!(v["prompt"]["text"], "name? ", "{v}");
    let (done, _, _) = timed(
        &server,
        "send_input",
        json!({"run_id": run_id(&v), "value": "bob"}),
    )
    .await;
    let done = if status(&done) == "ok" {
        done
    } else {
        structured(
            &server
                .call("get_execution", json!({"run_id": run_id(&v), "wait_s": 10}))
                .await,
        )
    };
    assert_eq!(status(&done), "ok", "{done}");
    assert_eq!(done["stdout"], "got bob\n", "{done}");

    let both = execute(
        &server,
        "in",
        "input a\ninput b",
        json!({"stdin": ["x", "y"]}),
    )
    .await;
    assert_eq!(status(&both), "ok", "{both}");
    assert_eq!(both["stdout"], "got x\ngot y\n", "{both}");
    server.destroy("in").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_request_without_allow_stdin_does_not_hang() {
    let specs = FakeSpecs::new().add("irlike", &[("FAKE_KERNEL_INPUT_WITHOUT_ALLOW", "1")]);
    let server = specs.start_server().await;
    create_fake_session(&server, "ir", "irlike").await;
    let (v, _, took) = timed(
        &server,
        "execute",
        json!({"session_id": "ir", "code": "input pw?", "wait_s": 30}),
    )
    .await;
    assert_eq!(status(&v), "awaiting_input", "{v}");
    // At the prompt, not at wait_s (30 s).
    assert!(took < Duration::from_secs(10), "returned after {took:?}");
    let (c, _, _) = timed(&server, "cancel_execution", json!({"run_id": run_id(&v)})).await;
    let c = if c["status"]
        .as_str()
        .is_some_and(|s| s != "awaiting_input" && s != "running")
    {
        c
    } else {
        structured(
            &server
                .call("get_execution", json!({"run_id": run_id(&v), "wait_s": 10}))
                .await,
        )
    };
    let ended = matches!(status(&c), "interrupted" | "cancelled")
        || (status(&c) == "error" && ename(&c) == "KeyboardInterrupt");
    assert!(ended, "cancelling an input wait ends the run: {c}");
    let next = execute(&server, "ir", "print still here", json!({})).await;
    assert_eq!(status(&next), "ok", "{next}");
    assert_eq!(next["stdout"], "still here\n", "{next}");
    server.destroy("ir").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_stops_a_sleep_in_signal_and_message_mode() {
    let specs = FakeSpecs::new()
        .add("sig", &[])
        .add_with_mode("msg", &[], "message");
    let server = specs.start_server().await;
    for kernel in ["sig", "msg"] {
        create_fake_session(&server, kernel, kernel).await;
        let v = execute(&server, kernel, "sleep 30", json!({"wait_s": 0.5})).await;
        assert_eq!(status(&v), "running", "{kernel}: {v}");
        let started = Instant::now();
        let r = server
            .call("interrupt_session", json!({"session_id": kernel}))
            .await;
        assert!(!is_error(&r), "{kernel}: {}", dump(&r));
        let done = structured(
            &server
                .call("get_execution", json!({"run_id": run_id(&v), "wait_s": 10}))
                .await,
        );
        let ok = status(&done) == "interrupted"
            || (status(&done) == "error" && ename(&done) == "KeyboardInterrupt");
        assert!(ok, "{kernel}: {done}");
        // Interrupted, not run to the end of its 30 s.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{kernel}: {:?}",
            started.elapsed()
        );
        assert_eq!(done["generation"], 1, "{kernel}: no restart needed: {done}");
        server.destroy(kernel).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_in_stream_text_becomes_replacement_characters() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "u8", "fake").await;
    let v = execute(&server, "u8", "invalid-utf8\nprint next", json!({})).await;
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(
        v["stdout"], "bad \u{FFFD}\u{FFFD} bytes\nnext\n",
        "lenient decoding, message kept: {v}"
    );
    server.destroy("u8").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_of_30_mb_is_bounded_truncated_and_pageable() {
    const TOTAL: u64 = 30_000_000;
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "fl", "fake").await;
    let (v, r, took) = timed(
        &server,
        "execute",
        json!({"session_id": "fl", "code": "flood 30000000\nprint END", "wait_s": 50}),
    )
    .await;
    assert_eq!(
        status(&v),
        "ok",
        "after {took:?}: {}",
        &dump(&r)[..2000.min(dump(&r).len())]
    );
    let size = dump(&r).len();
    assert!(size < 100_000, "response is {size} bytes serialized");
    assert_eq!(
        v["truncated"]["stdout"]["total_bytes"],
        TOTAL + 4,
        "{}",
        v["truncated"]
    );
    assert!(
        v["truncated"]["stdout"]["omitted_bytes"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{}",
        v["truncated"]
    );
    assert!(
        v["stdout"].as_str().unwrap_or("").ends_with("END\n"),
        "tail shown"
    );

    let id = run_id(&v);
    let page = |offset: u64, limit: u64| json!({"run_id": id, "stream": "stdout", "offset": offset, "limit": limit});
    let (p, _, _) = timed(&server, "get_execution", page(0, 128)).await;
    let line0 = format!("{:>10} {}\n", 0, "x".repeat(52));
    let line1 = format!("{:>10} {}\n", 1, "x".repeat(52));
    assert_eq!(p["text"], format!("{line0}{line1}"), "{p}");
    assert_eq!(p["next_offset"], 128, "{p}");
    assert_eq!(p["total_bytes"], TOTAL + 4, "{p}");
    // Line n starts at byte 64 * n.
    let n = 15_000_000 / 64;
    let (p, _, _) = timed(&server, "get_execution", page(64 * n, 64)).await;
    assert_eq!(p["text"], format!("{n:>10} {}\n", "x".repeat(52)), "{p}");
    let (p, _, _) = timed(&server, "get_execution", page(TOTAL, 1000)).await;
    assert_eq!(p["text"], "END\n", "{p}");
    let (p, _, _) = timed(&server, "get_execution", page(TOTAL + 4, 1000)).await;
    assert_eq!(p["text"], "", "empty text at the end: {p}");
    server.destroy("fl").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_start_within_the_timeout_works_and_beyond_it_fails_without_leftovers() {
    let specs = FakeSpecs::new().add("slow", &[("FAKE_KERNEL_STARTUP_DELAY", "2")]);
    let server = specs.start_server().await;
    let (v, r, took) = timed(
        &server,
        "create_session",
        json!({"session_id": "late-bind", "kernel": "slow", "startup_timeout_s": 1}),
    )
    .await;
    assert!(is_error(&r), "must time out: {}", dump(&r));
    assert_eq!(v["error_code"], "KERNEL_START_FAILED", "{v}");
    assert!(took < NO_HANG, "failed after {took:?}");
    assert!(
        wait_until(NO_HANG, || fake_kernels_of(server.pid()).is_empty()).await,
        "a timed-out kernel is left running: {:?}",
        fake_kernels_of(server.pid())
    );

    let info = create_fake_session(&server, "slow", "slow").await;
    assert_eq!(info["status"], "idle", "{info}");
    let v = execute(&server, "slow", "print bound late", json!({})).await;
    assert_eq!(v["stdout"], "bound late\n", "{v}");
    server.destroy("slow").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_killed_while_awaiting_input_reports_kernel_died() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "kin", "fake").await;
    let pid = server.kernel_pid("kin").await;
    let v = execute(
        &server,
        "kin",
        "input never answered",
        json!({"wait_s": 10}),
    )
    .await;
    assert_eq!(status(&v), "awaiting_input", "{v}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the kernel");
    // get_execution returns at once while a run awaits input, so poll.
    let killed_at = Instant::now();
    let died = loop {
        let (d, _, _) = timed(&server, "get_execution", json!({"run_id": run_id(&v)})).await;
        if status(&d) != "awaiting_input" || killed_at.elapsed() > NO_HANG {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = killed_at.elapsed();
    assert_eq!(status(&died), "kernel_died", "after {took:?}: {died}");
    assert!(took < NO_HANG, "reported after {took:?}");
    let next = execute(&server, "kin", "print fresh", json!({})).await;
    assert_eq!(next["state_reset"], true, "{next}");
    assert_eq!(next["stdout"], "fresh\n", "{next}");
    server.destroy("kin").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_exit_leaves_no_kernel_that_ignores_shutdown_and_sigterm() {
    let specs = FakeSpecs::new().add(
        "stubborn",
        &[
            ("FAKE_KERNEL_NO_SHUTDOWN_REPLY", "1"),
            ("FAKE_KERNEL_IGNORE_SIGTERM", "1"),
        ],
    );
    let server = specs.start_server().await;
    create_fake_session(&server, "st", "stubborn").await;
    let pid = server.kernel_pid("st").await;
    server.shutdown().await;
    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(pid)).await,
        "kernel {pid} outlived the server"
    );
}
