//! The warm pool (`serve --pool KERNEL=N`), against the real binary and real ipykernels: a
//! session that takes a pool kernel cannot tell it from a cold one (execution_count 1, its
//! cwd, its env, an empty namespace), also when it asked for its own cwd, env and memory
//! limit (the kernel is adapted as it is taken); a session asking for what the pool cannot
//! honour starts cold, `server_info` lists the pool, and a server with a full pool leaves no
//! kernel behind.
//! Always standalone (`serve` is given), also under `KERNEL_MCP_TEST_SHARED`.

use std::time::Duration;

use crate::common::*;
use serde_json::{Value, json};

/// `server_info.pool.<kernel>` ({ready, starting}).
async fn pool_of(server: &Server, kernel: &str) -> Value {
    let info = structured(&server.call("server_info", json!({})).await);
    info["pool"][kernel].clone()
}

/// Wait (generously) until `ready` pool kernels of `kernel` are ready.
async fn wait_pool_ready(server: &Server, kernel: &str, ready: u64) {
    for _ in 0..600 {
        if pool_of(server, kernel).await["ready"].as_u64() == Some(ready) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "pool never had {ready} ready {kernel} kernels: {}\n{}",
        pool_of(server, kernel).await,
        server.stderr_tail()
    );
}

/// What a session can observe about its kernel: the first execution count, cwd, one env
/// variable, and the user names in its namespace.
const PROBE: &str = "import os as _os\n\
    print(repr((_os.getcwd(), _os.environ.get('POOL_TEST_VAR'), \
    sorted(k for k in globals() if not k.startswith('_') and k not in ('In','Out','exit','quit','get_ipython','open')))))";

async fn probe(server: &Server, session: &str) -> (Value, String) {
    let v = server.exec(session, PROBE).await;
    assert_eq!(status(&v), "ok", "{v}");
    (
        v["execution_count"].clone(),
        v["stdout"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_session_is_indistinguishable_from_a_cold_one() {
    require_venv();
    let server = Server::start_with_args(&["serve", "--pool", "python3=1"]).await;
    wait_pool_ready(&server, "python3", 1).await;
    let cwd = std::fs::canonicalize(server.workdir()).unwrap();

    // Takes the pool kernel: no cwd (the server's) and no env.
    let pooled = server.create_session_on("pooled", "python3").await;
    assert_eq!(pooled["status"], "idle", "{pooled}");
    let after = pool_of(&server, "python3").await;
    assert_eq!(after["ready"], 0, "the pool gave its kernel away: {after}");
    let (count, seen) = probe(&server, "pooled").await;
    assert_eq!(count, 1, "a pooled kernel's first execute is number 1");
    assert_eq!(seen.trim(), format!("('{}', None, [])", cwd.display()));

    // The same observations on a cold kernel (the pool is refilling meanwhile).
    let r = server
        .call(
            "create_session",
            json!({"session_id": "cold", "kernel": "python3", "env": {"POOL_TEST_VAR": "x"}}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let (count, seen) = probe(&server, "cold").await;
    assert_eq!(count, 1);
    assert_eq!(seen.trim(), format!("('{}', 'x', [])", cwd.display()));

    // A variable read as the interpreter starts cannot be adapted: a cold start, which
    // leaves the pool alone.
    wait_pool_ready(&server, "python3", 1).await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "elsewhere", "kernel": "python3", "env": {"PYTHONHASHSEED": "7", "POOL_TEST_VAR": "z"}}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let (count, seen) = probe(&server, "elsewhere").await;
    assert_eq!(count, 1);
    assert_eq!(seen.trim(), format!("('{}', 'z', [])", cwd.display()));
    assert_eq!(
        pool_of(&server, "python3").await["ready"],
        1,
        "a cold start leaves the pool alone"
    );

    // The pooled session restarts cold and stays correct.
    let r = server
        .call("restart_session", json!({"session_id": "pooled"}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let (count, _) = probe(&server, "pooled").await;
    assert_eq!(count, 1);
    for s in ["pooled", "cold", "elsewhere"] {
        server.destroy(s).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_kernel_taken_for_another_cwd_env_and_limit_has_exactly_those() {
    require_venv();
    let server = Server::start_with_args(&["serve", "--pool", "python3=1"]).await;
    let work = server.workdir().join("project");
    let lib = server.workdir().join("lib");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(work.join("localmod.py"), "VALUE = 42\n").unwrap();
    std::fs::write(lib.join("libmod.py"), "NAME = 'lib'\n").unwrap();
    wait_pool_ready(&server, "python3", 1).await;

    let r = server
        .call(
            "create_session",
            json!({"session_id": "adapted", "kernel": "python3", "cwd": work,
                   "env": {"POOL_TEST_VAR": "y", "PYTHONPATH": lib}, "max_memory_mib": 300}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        pool_of(&server, "python3").await["ready"],
        0,
        "the session took the pool's kernel"
    );
    let (count, seen) = probe(&server, "adapted").await;
    assert_eq!(count, 1, "adapting ran nothing the session can count");
    let work = std::fs::canonicalize(&work).unwrap();
    assert_eq!(seen.trim(), format!("('{}', 'y', [])", work.display()));
    // PYTHONPATH is the session's, after the broker's helper as a cold launch puts it (so
    // `kernel_mcp` still imports).
    let code = "import localmod, libmod, kernel_mcp, os, subprocess, sys\n\
                pp = os.environ['PYTHONPATH'].split(os.pathsep)\n\
                var, cpp, pwd = subprocess.run(['sh', '-c', 'echo $POOL_TEST_VAR $PYTHONPATH; pwd'], capture_output=True, text=True).stdout.split()\n\
                print(localmod.VALUE, libmod.NAME, pp[-1], sys.path[:len(pp)] == pp, var, cpp == os.environ['PYTHONPATH'], pwd)";
    let v = server.exec("adapted", code).await;
    assert_eq!(status(&v), "ok", "{v}");
    let lib = lib.display().to_string();
    assert_eq!(
        v["stdout"].as_str().unwrap().trim(),
        format!("42 lib {lib} True y True {}", work.display()),
        "relative imports from the cwd, PYTHONPATH first in sys.path, subprocesses inherit both"
    );
    let v = server.exec("adapted", "print(len(In), _dh)").await;
    assert_eq!(
        v["stdout"].as_str().unwrap().trim(),
        format!("4 ['{}']", work.display()),
        "history holds the session's cells only; IPython's directory history starts at its cwd"
    );

    // The session's memory limit, not the pool's, is enforced by the kernel's supervisor.
    let grow = "import time\nheap = []\nfor _ in range(20):\n    heap.append(bytearray(50 * 1024 * 1024))\n    time.sleep(0.2)\nprint('survived')";
    let r = server
        .call(
            "execute",
            json!({"session_id": "adapted", "code": grow, "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "kernel_died", "{}", dump(&r));
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("memory limit") && notices.contains("300 MiB"),
        "the notice names the session's limit: {notices}"
    );
    server.destroy("adapted").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_kernel_taken_with_only_a_new_memory_limit_is_held_to_it_from_its_first_code() {
    require_venv();
    let server = Server::start_with_args(&["serve", "--pool", "python3=1"]).await;
    wait_pool_ready(&server, "python3", 1).await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "capped", "kernel": "python3", "max_memory_mib": 300}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        pool_of(&server, "python3").await["ready"],
        0,
        "from the pool"
    );
    // At once, and in one allocation: no time for a limit that is still on its way.
    let r = server
        .call(
            "execute",
            json!({"session_id": "capped", "code": "x = b'x' * (700 << 20)\nprint('survived')", "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "kernel_died", "{}", dump(&r));
    server.destroy("capped").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_full_pool_leaves_no_kernel_process() {
    require_venv();
    let server = Server::start_with_args(&["serve", "--pool", "python3=2"]).await;
    wait_pool_ready(&server, "python3", 2).await;
    let kernels = descendants(server.pid());
    assert!(
        kernels.len() >= 2,
        "two pool kernels (and their supervisors) run: {kernels:?}"
    );
    server.shutdown().await;
    let gone = wait_until(Duration::from_secs(15), || {
        kernels.iter().all(|&p| !pid_alive(p))
    })
    .await;
    let alive: Vec<u32> = kernels.into_iter().filter(|&p| pid_alive(p)).collect();
    assert!(gone, "processes left behind by the pool: {alive:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_for_an_unknown_kernelspec_is_refused_at_start() {
    require_venv();
    let workdir = tempfile::tempdir().unwrap();
    let out = server_command(workdir.path())
        .args(["serve", "--pool", "no-such-kernel=1"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-kernel"), "{err}");
}
