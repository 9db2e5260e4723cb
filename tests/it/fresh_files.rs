//! Issue 14 acceptance for `execute_file(mode="fresh")` against the real binary and real
//! ipykernel: the output comes back, the session's namespace is untouched, the helper kernel
//! runs with the session's cwd and env and is gone when the result arrives; `timeout_s` ends a
//! sleeping fresh run; a run that outlasts `wait_s` is followed and cancelled by its run id.

use std::time::{Duration, Instant};

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

/// True for the session's kernel, what it started, and what runs it (a supervisor process
/// between the server and the kernel).
fn belongs_to_session(pid: u32, session_pid: u32) -> bool {
    pid == session_pid
        || descendants(session_pid).contains(&pid)
        || descendants(pid).contains(&session_pid)
}

/// The pid a fresh script printed as `PID <n>`.
fn printed_pid(r: &Value) -> u32 {
    let out = r["stdout"].as_str().unwrap_or_default();
    out.lines()
        .find_map(|l| l.strip_prefix("PID "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no PID line in {r}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_run_returns_its_output_leaves_the_namespace_alone_and_no_kernel_behind() {
    let server = Server::start().await;
    let cwd = tempfile::tempdir().unwrap();
    create_session_with(
        &server,
        json!({"session_id": "s", "cwd": cwd.path(), "env": {"FRESH_MARK": "m42"}}),
    )
    .await;
    let session_pid = server.kernel_pid("s").await;
    std::fs::write(
        cwd.path().join("script.py"),
        "import os, sys\nx = 1\nprint('PID', os.getpid())\nprint('CWD', os.getcwd())\nprint('ENV', os.environ.get('FRESH_MARK'))\nprint('ARGV', sys.argv[1:])\n",
    )
    .unwrap();
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "s", "path": "script.py", "mode": "fresh", "argv": ["a b"]}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["session_id"], "s");
    let out = v["stdout"].as_str().unwrap();
    let real_cwd = std::fs::canonicalize(cwd.path()).unwrap();
    assert!(
        out.contains(&format!("CWD {}", real_cwd.display())),
        "{out}"
    );
    assert!(out.contains("ENV m42"), "{out}");
    assert!(out.contains("ARGV ['a b']"), "{out}");
    let helper = printed_pid(&v);
    assert_ne!(helper, session_pid);
    assert!(
        !pid_alive(helper),
        "the helper kernel {helper} is still running"
    );
    let left: Vec<u32> = descendants(server.pid())
        .into_iter()
        .filter(|p| !belongs_to_session(*p, session_pid))
        .collect();
    assert!(
        left.is_empty(),
        "processes left besides the session's kernel: {left:?}"
    );
    assert!(
        v["notices"].to_string().contains("fresh kernel"),
        "{}",
        v["notices"]
    );

    let after = server.exec("s", "x").await;
    assert_eq!(ename(&after), "NameError", "{after}");
    // The session itself still runs files in its own namespace by default.
    let r = structured(
        &server
            .call(
                "execute_file",
                json!({"session_id": "s", "path": "script.py"}),
            )
            .await,
    );
    assert_eq!(status(&r), "ok", "{r}");
    assert_eq!(printed_pid(&r), session_pid);
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "s", "path": "script.py", "mode": "sideways"}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_ends_a_sleeping_fresh_run_and_its_kernel() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    create_session_with(&server, json!({"session_id": "s", "cwd": dir.path()})).await;
    std::fs::write(
        dir.path().join("sleep.py"),
        "import os, time\nprint('PID', os.getpid(), flush=True)\ntime.sleep(120)\n",
    )
    .unwrap();
    let started = Instant::now();
    let v = structured(
        &server
            .call(
                "execute_file",
                json!({"session_id": "s", "path": "sleep.py", "mode": "fresh", "timeout_s": 2}),
            )
            .await,
    );
    let took = started.elapsed();
    assert_eq!(status(&v), "timeout", "{v}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let helper = printed_pid(&v);
    assert!(
        !pid_alive(helper),
        "the helper kernel {helper} is still running"
    );
    eprintln!("fresh run with timeout_s=2 answered after {took:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_run_past_wait_s_is_followed_and_cancelled_by_its_run_id() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    create_session_with(&server, json!({"session_id": "s", "cwd": dir.path()})).await;
    std::fs::write(
        dir.path().join("slow.py"),
        "import os, time\nprint('PID', os.getpid(), flush=True)\ntime.sleep(1.5)\nprint('done')\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("forever.py"),
        "import os, time\nprint('PID', os.getpid(), flush=True)\ntime.sleep(600)\n",
    )
    .unwrap();

    let v = structured(
        &server
            .call(
                "execute_file",
                json!({"session_id": "s", "path": "slow.py", "mode": "fresh", "wait_s": 0.3}),
            )
            .await,
    );
    assert_eq!(status(&v), "running", "{v}");
    let run_id = v["run_id"].as_str().unwrap().to_string();
    let v = structured(
        &server
            .call("get_execution", json!({"run_id": run_id, "wait_s": 30}))
            .await,
    );
    assert_eq!(status(&v), "ok", "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("done"), "{v}");
    let helper = printed_pid(&v);
    assert!(
        wait_until(Duration::from_secs(15), || !pid_alive(helper)).await,
        "helper {helper} still alive"
    );
    // Its final result stays readable after the kernel is gone.
    let again = structured(
        &server
            .call("get_execution", json!({"run_id": run_id}))
            .await,
    );
    assert_eq!(status(&again), "ok", "{again}");

    let v = structured(
        &server
            .call(
                "execute_file",
                json!({"session_id": "s", "path": "forever.py", "mode": "fresh", "wait_s": 1}),
            )
            .await,
    );
    assert_eq!(status(&v), "running", "{v}");
    let helper = printed_pid(&v);
    let run_id = v["run_id"].as_str().unwrap().to_string();
    let c = structured(
        &server
            .call("cancel_execution", json!({"run_id": run_id}))
            .await,
    );
    assert!(matches!(status(&c), "interrupted" | "cancelled"), "{c}");
    assert!(
        wait_until(Duration::from_secs(15), || !pid_alive(helper)).await,
        "helper {helper} still alive after cancel"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_call_of_a_fresh_run_shuts_its_kernel_down() {
    use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
    use rmcp::service::PeerRequestOptions;

    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    create_session_with(&server, json!({"session_id": "s", "cwd": dir.path()})).await;
    let session_pid = server.kernel_pid("s").await;
    std::fs::write(
        dir.path().join("forever.py"),
        "import os, time\nopen('pid.txt', 'w').write(str(os.getpid()))\ntime.sleep(600)\n",
    )
    .unwrap();
    let args = json!({"session_id": "s", "path": "forever.py", "mode": "fresh"});
    let params = CallToolRequestParams::new("execute_file")
        .with_arguments(args.as_object().unwrap().clone());
    let handle = server
        .client()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send execute_file");
    let pid_file = dir.path().join("pid.txt");
    assert!(
        wait_until(Duration::from_secs(30), || std::fs::read_to_string(
            &pid_file
        )
        .is_ok_and(|s| !s.is_empty()))
        .await,
        "the fresh run never started"
    );
    let helper: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    handle
        .cancel(Some("test cancels".into()))
        .await
        .expect("send notifications/cancelled");
    let t0 = Instant::now();
    assert!(
        wait_until(Duration::from_secs(20), || !pid_alive(helper)).await,
        "helper {helper} alive 20 s after the cancel\n{}",
        server.stderr_tail()
    );
    eprintln!("helper kernel gone {:?} after the cancel", t0.elapsed());
    // The helper's supervisor ends right after its kernel; give it a moment to be reaped.
    let left = || -> Vec<u32> {
        descendants(server.pid())
            .into_iter()
            .filter(|p| !belongs_to_session(*p, session_pid))
            .collect()
    };
    wait_until(Duration::from_secs(10), || left().is_empty()).await;
    assert!(left().is_empty(), "processes left: {:?}", left());
    let v = server.exec("s", "print('still here')").await;
    assert_eq!(status(&v), "ok", "{v}");
    server.shutdown().await;
}
