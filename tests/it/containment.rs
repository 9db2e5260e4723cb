//! Nothing a kernel starts outlives its session: processes that left the kernel's session or
//! process group (`start_new_session=True`, `setsid sh -c 'sleep 999 &'`, a double fork) end
//! when the session is destroyed or restarted, and when the server is SIGKILLed. And a
//! session's memory limit stops a kernel whose process tree grows past it.

use std::time::Duration;

use crate::common::*;
use serde_json::json;

/// Code that starts three escapees and prints their pids, one per line.
const ESCAPEES: &str = r#"
import os, subprocess, time
a = subprocess.Popen(['sleep', '999'], start_new_session=True)
b = subprocess.run(['setsid', 'sh', '-c', 'sleep 999 >/dev/null 2>&1 & echo $!'], capture_output=True, text=True).stdout.strip()
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        time.sleep(999)
    os._exit(0)
os.wait()
c = os.read(r, 32).decode()
print(a.pid); print(b); print(c)
"#;

/// Start the escapees in `session` and return their pids (all alive).
async fn start_escapees(server: &Server, session: &str) -> Vec<u32> {
    let v = server.exec(session, ESCAPEES).await;
    assert_eq!(status(&v), "ok", "{v}");
    let pids: Vec<u32> = v["stdout"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 3, "{v}");
    for pid in &pids {
        assert!(pid_alive(*pid), "escapee {pid} is not running");
    }
    pids
}

async fn all_gone(pids: &[u32]) -> bool {
    wait_until(Duration::from_secs(10), || {
        pids.iter().all(|p| !pid_alive(*p))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_left_the_kernels_session_end_with_destroy_session() {
    let server = Server::start().await;
    server.create_session("esc").await;
    let pids = start_escapees(&server, "esc").await;
    server.destroy("esc").await;
    assert!(all_gone(&pids).await, "still alive: {pids:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_left_the_kernels_session_end_with_restart_session() {
    let server = Server::start().await;
    server.create_session("esc").await;
    let pids = start_escapees(&server, "esc").await;
    let r = server
        .call("restart_session", json!({"session_id": "esc"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert!(all_gone(&pids).await, "still alive: {pids:?}");
    server.destroy("esc").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_left_the_kernels_session_end_when_the_server_is_sigkilled() {
    let server = Server::start().await;
    server.create_session("esc").await;
    let kernel = server.kernel_pid("esc").await;
    let pids = start_escapees(&server, "esc").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the server");
    assert!(all_gone(&pids).await, "still alive: {pids:?}");
    assert!(
        all_gone(&[kernel]).await,
        "the kernel {kernel} is still alive"
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_over_its_memory_limit_dies_with_a_notice_and_the_next_run_works() {
    let server = Server::start().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "small", "max_memory_mib": 300}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    server.create_session("free").await;
    server.exec("free", "keep = 7").await;
    let info = structured(
        &server
            .call("get_session", json!({"session_id": "small"}))
            .await,
    );
    let mib = info["memory_mib"].as_u64().expect("memory_mib");
    assert!((5..300).contains(&mib), "an idle kernel's tree: {mib} MiB");
    let grow = "import time\nheap = []\nfor _ in range(20):\n    heap.append(bytearray(50 * 1024 * 1024))\n    time.sleep(0.2)\nprint('survived')";
    let r = server
        .call(
            "execute",
            json!({"session_id": "small", "code": grow, "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "kernel_died", "{}", dump(&r));
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("memory limit") && notices.contains("300 MiB"),
        "the notice names the limit: {notices}"
    );
    let next = server.exec("small", "1 + 1").await;
    assert_eq!(next["result"], "2", "{next}");
    assert_eq!(next["state_reset"], true, "{next}");
    let other = server.exec("free", "keep").await;
    assert_eq!(
        other["result"], "7",
        "the other session is unaffected: {other}"
    );
    server.destroy("small").await;
    server.destroy("free").await;
    server.shutdown().await;
}
