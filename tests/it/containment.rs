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

/// Start `sleep 999` in a session of its own and return its pid (alive).
async fn start_escapee(server: &Server, session: &str) -> u32 {
    let v = server
        .exec(
            session,
            "import subprocess\nesc = subprocess.Popen(['sleep', '999'], start_new_session=True)\nprint(esc.pid)",
        )
        .await;
    assert_eq!(status(&v), "ok", "{v}");
    let pid: u32 = v["stdout"]
        .as_str()
        .unwrap_or("")
        .trim()
        .parse()
        .expect("pid");
    assert!(pid_alive(pid));
    pid
}

/// The supervisor of a session's kernel: the kernel's parent.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_code_cannot_kill_its_supervisor_and_an_escaped_child_ends_with_the_session() {
    let server = Server::start().await;
    server.create_session("k").await;
    let kernel = server.kernel_pid("k").await;
    let supervisor = parent_of(kernel);
    let escapee = start_escapee(&server, "k").await;
    let v = server
        .exec(
            "k",
            "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\n    print('killed')\nexcept PermissionError:\n    print('refused')",
        )
        .await;
    assert_eq!(v["stdout"].as_str().unwrap_or("").trim(), "refused", "{v}");
    assert!(
        pid_alive(supervisor),
        "the supervisor {supervisor} was killed"
    );
    server.destroy("k").await;
    assert!(
        all_gone(&[escapee]).await,
        "the escaped child {escapee} outlived destroy_session"
    );
    server.shutdown().await;
}

/// `os.killpg(0, 9)` in Python and `kill -9 0` in a shell reach only the kernel's own group:
/// the kernel dies, its supervisor ends the escaped child, the session gets a new kernel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_kernels_process_group_spares_the_supervisor_and_ends_the_escaped_child() {
    let server = Server::start().await;
    server.create_session("g").await;
    for code in [
        "import os\nos.killpg(0, 9)",
        "import subprocess\nsubprocess.run('kill -9 0', shell=True)",
    ] {
        let kernel = server.kernel_pid("g").await;
        let supervisor = parent_of(kernel);
        let escapee = start_escapee(&server, "g").await;
        let v = server.exec("g", code).await;
        assert_eq!(status(&v), "kernel_died", "{code}: {v}");
        assert!(
            all_gone(&[escapee]).await,
            "{code}: the escaped child {escapee} lives on"
        );
        assert!(!pid_alive(supervisor) || parent_of(supervisor) == server.pid());
        let next = server.exec("g", "1 + 1").await;
        assert_eq!(next["result"], "2", "{code}: the next run works: {next}");
    }
    server.destroy("g").await;
    server.shutdown().await;
}

/// Python that fills a 300 MiB buffer and maps it into three forked workers: about 360 MiB
/// in all, ~1.3 GiB if each worker's copy-on-write pages counted in full.
const COW_POOL: &str = "import multiprocessing as mp\ndata = b'x' * (300 * 1024 * 1024)\ndef size(_):\n    return len(data)\npool = mp.get_context('fork').Pool(3)\nprint(pool.map(size, range(3)))";

/// The memory of the kernel `pid` of `server` is counted in a cgroup of kernel-mcp's where the
/// host has one, and not when the test hides it (`hidden`: the PSS path); a host without one
/// is a recorded skip of the cgroup path.
async fn counted_where_expected(server: &Server, pid: u64, hidden: bool) {
    use crate::common::skip::{host_has_memory_cgroup, memory_cgroup_of};
    let group = memory_cgroup_of(pid as u32);
    if hidden {
        assert!(!group.contains("kernel-mcp-"), "hidden, yet in {group}");
    } else if host_has_memory_cgroup(&structured(&server.call("server_info", json!({})).await)) {
        assert!(
            group.contains("kernel-mcp-"),
            "kernel {pid} is in {group:?}"
        );
    } else {
        skip(
            "no memory cgroup kernel-mcp may create on this host: the PSS path is tested in its place",
        );
    }
}

async fn cow_pool_fits(env: &[(&str, &std::ffi::OsStr)]) {
    let server = Server::start_with(env, &[]).await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "cow", "max_memory_mib": 1024}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let pid = structured(&r)["pid"].as_u64().expect("pid");
    counted_where_expected(&server, pid, !env.is_empty()).await;
    let r = server
        .call(
            "execute",
            json!({"session_id": "cow", "code": COW_POOL, "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", dump(&r));
    assert!(
        v["stdout"].as_str().unwrap_or("").contains("314572800"),
        "{v}"
    );
    // Counted as used while the workers live (once the next sample has it): the buffer once,
    // not four times.
    let t0 = std::time::Instant::now();
    let (mib, info) = loop {
        let info = structured(
            &server
                .call("get_session", json!({"session_id": "cow"}))
                .await,
        );
        let mib = info["memory_mib"].as_u64().expect("memory_mib");
        if mib >= 300 || t0.elapsed() > Duration::from_secs(10) {
            break (mib, info);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!((300..900).contains(&mib), "memory_mib {mib}: {info}");
    let v = server.exec("cow", "pool.terminate(); print('done')").await;
    assert_eq!(status(&v), "ok", "{v}");
    server.destroy("cow").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_pool_sharing_its_parents_pages_fits_a_limit_it_really_fits_in() {
    cow_pool_fits(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cgroup_a_forked_pool_is_counted_by_pss_and_fits_too() {
    cow_pool_fits(&[("KERNEL_MCP_TEST_NO_CGROUP", std::ffi::OsStr::new("1"))]).await;
}

/// 600 MiB written into a memfd (no RSS, no mapping) under a 300 MiB limit.
const MEMFD_FLOOD: &str = "import os, time\nfd = os.memfd_create('flood')\nchunk = b'y' * (10 * 1024 * 1024)\nfor _ in range(60):\n    os.write(fd, chunk)\n    time.sleep(0.02)\ntime.sleep(2)\nprint('survived')";

async fn memfd_is_stopped(env: &[(&str, &std::ffi::OsStr)]) {
    let server = Server::start_with(env, &[]).await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "shm", "max_memory_mib": 300}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let pid = structured(&r)["pid"].as_u64().expect("pid");
    counted_where_expected(&server, pid, !env.is_empty()).await;
    let r = server
        .call(
            "execute",
            json!({"session_id": "shm", "code": MEMFD_FLOOD, "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "kernel_died", "{}", dump(&r));
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("memory limit") && notices.contains("300 MiB"),
        "{notices}"
    );
    let next = server.exec("shm", "1 + 1").await;
    assert_eq!(next["result"], "2", "{next}");
    server.destroy("shm").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_in_a_memfd_counts_and_stops_a_kernel_over_its_limit() {
    memfd_is_stopped(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cgroup_memory_in_a_memfd_still_counts() {
    memfd_is_stopped(&[("KERNEL_MCP_TEST_NO_CGROUP", std::ffi::OsStr::new("1"))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_memory_mib_is_the_servers_ceiling_a_session_may_only_ask_below() {
    let server = Server::start_with_args(&["serve", "--max-memory-mib", "512"]).await;
    for asked in [1024, 0] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": "big", "max_memory_mib": asked}),
            )
            .await;
        assert!(is_error(&r), "{asked}: {}", dump(&r));
        assert_eq!(
            structured(&r)["error_code"],
            "INVALID_ARGUMENT",
            "{}",
            dump(&r)
        );
        assert!(
            text(&r).contains("ceiling of 512 MiB") || text(&r).contains("ceiling is 512 MiB"),
            "{}",
            text(&r)
        );
    }
    let r = server
        .call(
            "create_session",
            json!({"session_id": "small", "max_memory_mib": 256}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    server.destroy("small").await;
    server.shutdown().await;
}
