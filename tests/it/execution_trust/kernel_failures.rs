//! When the kernel is not what the agent expects: a restart kills the subprocesses the
//! kernel started, a kernel that exits at start fails `create_session` at once with its
//! status, a stale `expected_generation` is `STATE_CHANGED` before anything runs, and
//! `kill -9` of the kernel ends the run as `kernel_died`, cancels the queue and resets the
//! state.

use std::time::{Duration, Instant};

use super::{error_code, get_execution, notices, run, run_id};
use crate::common::trust::*;
use crate::common::*;
use serde_json::json;

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
