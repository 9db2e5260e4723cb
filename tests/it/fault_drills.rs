//! Fault drills with the fake kernel, where a real one cannot misbehave on demand: frames that
//! are no message or are signed with another key, a journal whose writes start failing, a run
//! still going when the server shuts down, a kernel that closes its sockets but lives on
//! (mid-run and idle), a journal whose last line a SIGKILL cut short, and a kernel that ends a
//! request without its reply.

use std::time::Duration;

use crate::common::fake::*;
use crate::common::*;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_that_closes_its_sockets_mid_run_is_stopped_and_the_run_ends_kernel_died() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "c", "fake").await;
    server.exec("c", "print warm").await;
    let old_pid = server.kernel_pid("c").await;
    // The process lives on (it becomes `sleep`, ignoring SIGINT) with every socket closed.
    let r = server
        .call(
            "execute",
            json!({"session_id": "c", "code": "print before\nclose-sockets", "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "kernel_died", "{v}");
    assert_eq!(v["stdout"], "before\n", "{v}");
    assert!(
        v["notices"].to_string().contains("closed its sockets"),
        "the notice says why: {v}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(old_pid)).await,
        "the lingering process {old_pid} is stopped"
    );
    let after = server.exec("c", "print after").await;
    assert_eq!(status(&after), "ok", "{after}");
    assert_eq!(after["state_reset"], true, "{after}");
    server.destroy("c").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kernel_that_closes_its_sockets_is_replaced_before_the_next_run() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "c", "fake").await;
    let old_pid = server.kernel_pid("c").await;
    let v = server.exec("c", "print ok\nclose-sockets later").await;
    assert_eq!(status(&v), "ok", "{v}");
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(old_pid)).await,
        "the kernel without sockets ({old_pid}) is stopped"
    );
    // Its exit reaches the server a moment after the process is gone (the supervisor reports
    // it); from then on the next run waits for the replacement.
    let mut info = Value::Null;
    for _ in 0..300 {
        info = structured(&server.call("get_session", json!({"session_id": "c"})).await);
        if info["generation"].as_u64() > Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        info["generation"].as_u64() > Some(1),
        "the death is noticed: {info}"
    );
    let after = server.exec("c", "print after").await;
    assert_eq!(status(&after), "ok", "{after}");
    assert_eq!(after["stdout"], "after\n");
    assert_eq!(after["state_reset"], true, "{after}");
    assert_ne!(server.kernel_pid("c").await, old_pid);
    server.destroy("c").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_cut_mid_line_by_sigkill_stays_readable_and_says_so() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "k", "fake").await;
    for i in 0..5 {
        server.exec("k", &format!("print entry {i}")).await;
    }
    // SIGKILL while runs are being journalled; then cut the last line short, which is what a
    // kill landing inside the write leaves (a kill rarely lands inside one write call).
    let busy = server.call(
        "execute",
        json!({"session_id": "k", "code": "flood 200000", "wait_s": 0}),
    );
    let _ = tokio::time::timeout(Duration::from_millis(200), busy).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_until(Duration::from_secs(10), || !pid_alive(server.pid())).await);
    let dir = server.workdir().join("state/kernel-mcp/history");
    let journal = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("k"))
        .expect("the session's journal");
    let mut lines = std::fs::read_to_string(&journal).unwrap();
    let complete = lines.lines().count();
    lines.push_str(r#"{"entry":{"run_id":"run-torn","code":"print torn","#);
    std::fs::write(&journal, &lines).unwrap();

    let state = server.workdir().join("state");
    let again = Server::start_with(
        &[("XDG_STATE_HOME", state.as_os_str())],
        &["--kernelspec-dir", specs.path().to_str().unwrap()],
    )
    .await;
    let h = again.call("get_history", json!({"session_id": "k"})).await;
    let v = structured(&h);
    let codes: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["code"].as_str())
        .collect();
    for i in 0..5 {
        assert!(codes.contains(&format!("print entry {i}").as_str()), "{v}");
    }
    assert!(
        !codes.contains(&"print torn"),
        "the torn line is skipped: {v}"
    );
    assert!(
        text(&h).contains("last line was cut off"),
        "the result says a line was skipped: {}",
        text(&h)
    );
    assert!(
        complete >= 6,
        "header and five entries were written before the kill"
    );
    again.shutdown().await;
    drop(server);
}

/// ipykernel drops the `execute_reply` when a SIGINT lands in its handler outside the user's
/// code (CI saw it: "KeyboardInterrupt caught in kernel", idle, no reply). The run used to stay
/// `running` for ever and block the session's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_kernel_ends_without_a_reply_finishes_and_the_queue_goes_on() {
    let specs = FakeSpecs::new().add("fake", &[]);
    let server = specs.start_server().await;
    create_fake_session(&server, "d", "fake").await;
    let pid = server.kernel_pid("d").await;
    let started = structured(
        &server
            .call(
                "execute",
                json!({"session_id": "d", "code": "drop-reply\nsleep 30", "wait_s": 0}),
            )
            .await,
    );
    let run_id = started["run_id"].as_str().expect("a run id").to_string();
    let queued = server.call(
        "execute",
        json!({"session_id": "d", "code": "print next", "wait_s": 60}),
    );
    let interrupt = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        server
            .call("interrupt_session", json!({"session_id": "d"}))
            .await
    };
    let (next, _) = tokio::join!(queued, interrupt);
    let next = structured(&next);
    assert_eq!(status(&next), "ok", "the queued run ran: {next}");
    assert_eq!(next["stdout"], "next\n");
    let done = structured(
        &server
            .call("get_execution", json!({"run_id": run_id, "wait_s": 10}))
            .await,
    );
    assert_eq!(status(&done), "interrupted", "{done}");
    assert!(
        done["notices"].to_string().contains("without a reply"),
        "the notice says what happened: {done}"
    );
    let v = server.exec("d", "drop-reply\nprint alone").await;
    assert_eq!(status(&v), "error", "no reply and no interrupt: {v}");
    assert_eq!(v["stdout"], "alone\n", "{v}");
    assert_eq!(v["error"]["ename"], "NoReply", "{v}");
    assert_eq!(
        server.kernel_pid("d").await,
        pid,
        "the same kernel throughout"
    );
    server.destroy("d").await;
    server.shutdown().await;
}
