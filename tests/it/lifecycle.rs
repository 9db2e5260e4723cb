//! Session lifecycle against real kernels: crash recovery, interrupt, restart, destroy and
//! server shutdown — and that no kernel process outlives its session or the server
//! (issue 2, second and third acceptance bullets).

use std::time::{Duration, Instant};

use crate::common::history::error_code;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn os_exit_reports_kernel_died_and_the_next_call_runs_in_a_fresh_kernel() {
    let server = Server::start().await;
    let info = server.create_session("crash").await;
    assert_eq!(info["generation"], 1, "{info}");
    let old_pid = server.kernel_pid("crash").await;

    let set = server.exec("crash", "x = 1").await;
    assert_eq!(status(&set), "ok", "{set}");

    let started = Instant::now();
    let r = server
        .call(
            "execute",
            json!({"session_id": "crash", "code": "import os; os._exit(1)"}),
        )
        .await;
    let took = started.elapsed();
    let died = structured(&r);
    assert_eq!(status(&died), "kernel_died", "{died}");
    assert!(is_error(&r), "kernel_died is isError: true: {}", dump(&r));
    assert!(
        took < Duration::from_secs(20),
        "kernel death took {took:?} to report (must be prompt, not a timeout)"
    );
    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(old_pid)).await,
        "the dead kernel (pid {old_pid}) is still alive"
    );

    // The next call runs in a new kernel and says so.
    let r = server
        .call("execute", json!({"session_id": "crash", "code": "x"}))
        .await;
    let next = structured(&r);
    assert_eq!(next["state_reset"], true, "{next}");
    assert_eq!(next["generation"], 2, "{next}");
    assert_eq!(status(&next), "error", "{next}");
    assert_eq!(ename(&next), "NameError", "x must be gone: {next}");

    // And the fresh kernel works normally afterwards, without another reset.
    let after = server.exec("crash", "1+1").await;
    assert_eq!(after["result"], "2", "{after}");
    assert_eq!(after["state_reset"], false, "{after}");
    assert_eq!(after["generation"], 2, "{after}");
    let info = structured(
        &server
            .call("get_session", json!({"session_id": "crash"}))
            .await,
    );
    assert_eq!(info["generation"], 2, "{info}");
    assert_ne!(info["pid"], json!(old_pid), "{info}");

    server.destroy("crash").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_ends_a_sleep_within_seconds_and_keeps_variables() {
    let server = Server::start().await;
    server.create_session("intr").await;

    let r = server
        .call(
            "execute",
            json!({
                "session_id": "intr",
                "code": "import time; x = 5; time.sleep(60)",
                "wait_s": 1,
            }),
        )
        .await;
    let running = structured(&r);
    assert_eq!(status(&running), "running", "{running}");
    let run_id = running["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run_id: {running}"))
        .to_string();

    let interrupted_at = Instant::now();
    let r = server
        .call("interrupt_session", json!({"session_id": "intr"}))
        .await;
    assert!(!is_error(&r), "interrupt_session: {}", dump(&r));
    let info = structured(&r);
    assert_eq!(info["interrupted_run_id"], run_id.as_str(), "{info}");

    let r = server
        .call("get_execution", json!({"run_id": run_id, "wait_s": 10}))
        .await;
    let ended = interrupted_at.elapsed();
    let done = structured(&r);
    let final_ok = status(&done) == "interrupted"
        || (status(&done) == "error" && ename(&done) == "KeyboardInterrupt");
    assert!(
        final_ok,
        "expected interrupted (or error KeyboardInterrupt): {done}"
    );
    assert!(
        ended < Duration::from_secs(10),
        "the run ended {ended:?} after interrupt_session (acceptance: < 5 s)"
    );
    assert_eq!(done["run_id"], run_id.as_str(), "{done}");

    let x = server.exec("intr", "x").await;
    assert_eq!(status(&x), "ok", "{x}");
    assert_eq!(x["result"], "5", "variables survive an interrupt: {x}");
    assert_eq!(x["state_reset"], false, "{x}");
    assert_eq!(x["generation"], 1, "{x}");

    server.destroy("intr").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_clears_variables_and_bumps_generation() {
    let server = Server::start().await;
    let info = server.create_session("rs").await;
    let generation = info["generation"].as_u64().expect("generation");
    let old_pid = server.kernel_pid("rs").await;

    let set = server.exec("rs", "x = 1").await;
    assert_eq!(status(&set), "ok", "{set}");

    let r = server
        .call("restart_session", json!({"session_id": "rs"}))
        .await;
    assert!(!is_error(&r), "restart_session: {}", dump(&r));
    let restarted = structured(&r);
    assert_eq!(restarted["generation"], generation + 1, "{restarted}");
    assert_eq!(restarted["session_id"], "rs", "{restarted}");

    let x = server.exec("rs", "x").await;
    assert_eq!(status(&x), "error", "{x}");
    assert_eq!(
        ename(&x),
        "NameError",
        "x must be gone after a restart: {x}"
    );
    assert_eq!(x["generation"], generation + 1, "{x}");
    assert_eq!(x["state_reset"], true, "first run after a restart: {x}");

    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(old_pid)).await,
        "the replaced kernel (pid {old_pid}) is still alive after restart"
    );

    server.destroy("rs").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_session_kills_the_kernel_and_forgets_the_session() {
    let server = Server::start().await;
    let info = server.create_session("doomed").await;
    let pid = info["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("create_session without pid: {info}")) as u32;
    assert!(
        pid_alive(pid),
        "kernel pid {pid} from create_session is not alive"
    );
    assert_eq!(server.kernel_pid("doomed").await, pid);

    // A second create with the same id is refused while it exists.
    let dup = server
        .call("create_session", json!({"session_id": "doomed"}))
        .await;
    assert!(is_error(&dup), "{}", dump(&dup));
    assert_eq!(
        structured(&dup)["error_code"],
        "SESSION_ALREADY_EXISTS",
        "{}",
        dump(&dup)
    );

    let r = server
        .call("destroy_session", json!({"session_id": "doomed"}))
        .await;
    assert!(!is_error(&r), "destroy_session: {}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["session_id"], "doomed", "{v}");
    assert!(
        ["graceful", "terminated", "killed"].contains(&v["shutdown"].as_str().unwrap_or("")),
        "{v}"
    );

    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(pid)).await,
        "kernel pid {pid} still alive 10 s after destroy_session"
    );
    let gone = server
        .call("get_session", json!({"session_id": "doomed"}))
        .await;
    assert_eq!(structured(&gone)["error_code"], "SESSION_NOT_FOUND");
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_session_also_kills_processes_the_kernel_started() {
    let server = Server::start().await;
    server.create_session("parent").await;
    let v = server
        .exec(
            "parent",
            "import subprocess; p = subprocess.Popen(['sleep', '300']); p.pid",
        )
        .await;
    assert_eq!(status(&v), "ok", "{v}");
    let child: u32 = v["result"]
        .as_str()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid: {v}"));
    assert!(pid_alive(child), "sleep child {child} not running");

    server.destroy("parent").await;
    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(child)).await,
        "a process started by the kernel (pid {child}) outlived destroy_session"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_servers_stdin_kills_every_kernel() {
    let server = Server::start().await;
    server.create_session("k1").await;
    server.create_session("k2").await;
    let mut pids = vec![server.kernel_pid("k1").await, server.kernel_pid("k2").await];
    // One kernel is busy when the client goes away, and has a child of its own.
    let v = server
        .exec(
            "k1",
            "import subprocess; p = subprocess.Popen(['sleep', '300']); p.pid",
        )
        .await;
    let child: u32 = v["result"]
        .as_str()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid: {v}"));
    let busy = server
        .call(
            "execute",
            json!({"session_id": "k2", "code": "import time; time.sleep(600)", "wait_s": 0.5}),
        )
        .await;
    assert_eq!(status(&structured(&busy)), "running", "{}", dump(&busy));
    pids.push(child);
    // Anything else the server spawned counts too.
    for p in descendants(server.pid()) {
        if !pids.contains(&p) {
            pids.push(p);
        }
    }
    for &p in &pids {
        assert!(pid_alive(p), "pid {p} should be alive before shutdown");
    }

    let server_pid = server.pid();
    server.shutdown().await;
    assert!(!pid_alive(server_pid));
    let survivors = || {
        pids.iter()
            .copied()
            .filter(|&p| pid_alive(p))
            .collect::<Vec<_>>()
    };
    assert!(
        wait_until(Duration::from_secs(15), || survivors().is_empty()).await,
        "processes of ours still alive 15 s after the server's stdin closed: {:?}",
        survivors()
    );
}

/// A session whose working directory was removed cannot restart, and the error says so (the
/// spawn's "No such file or directory" used to read as a missing Python).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_cwd_was_removed_names_it_when_it_cannot_restart() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    let r = server
        .call("create_session", json!({"session_id": "gone", "cwd": cwd}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    std::fs::remove_dir_all(&cwd).unwrap();
    let r = server
        .call("restart_session", json!({"session_id": "gone"}))
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let t = text(&r);
    assert!(
        t.contains(&cwd.display().to_string()) && t.contains("does not exist"),
        "{t}"
    );
    assert!(!t.contains("not installed"), "no advice about Python: {t}");
    // Later calls say why the session has no kernel.
    let r = server
        .call("execute", json!({"session_id": "gone", "code": "1"}))
        .await;
    assert_eq!(error_code(&r), "SESSION_DEAD", "{}", dump(&r));
    assert!(text(&r).contains("does not exist"), "{}", text(&r));
    server.destroy("gone").await;
    server.shutdown().await;
}
