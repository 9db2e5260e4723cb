//! The broker's lifecycle through the real binary: interrupting a run cancels its call in
//! flight (`outcome_unknown`), downstream servers are shared by a project's sessions and stop
//! with the last one, a broken server is replaced, a pooled kernel gets its endpoint when a
//! session takes it, `--mcp-scope none` turns the broker off, and a downstream kernel-mcp does
//! not broker again.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::broker::{
    descendants_running, everything_entry, run, stdout_of, write_registry,
};
use crate::common::{Server, structured, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_run_cancels_its_call_in_flight_as_outcome_unknown() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    stdout_of(
        &server,
        "s",
        "from kernel_mcp import mcp; mcp.call('everything', 'echo', message='warm')",
    )
    .await;
    // A 60 s tool; the run is interrupted after a few seconds.
    let r = server
        .call(
            "execute",
            json!({"session_id": "s", "wait_s": 3,
                   "code": "mcp.call('everything', 'trigger-long-running-operation', arguments={'duration': 60, 'steps': 60})"}),
        )
        .await;
    let r = structured(&r);
    assert_eq!(r["status"], "running", "{r:#}");
    let run_id = r["run_id"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    server
        .call("interrupt_session", json!({"session_id": "s"}))
        .await;
    let done = server
        .call("get_execution", json!({"run_id": run_id, "wait_s": 30}))
        .await;
    let done = structured(&done);
    assert!(
        matches!(done["status"].as_str(), Some("interrupted" | "error")),
        "{done:#}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the run took {:?} to stop",
        t0.elapsed()
    );
    let out = stdout_of(
        &server,
        "s",
        "j = mcp.journal(); print('LAST', j[-1]['tool'], j[-1]['outcome']); print(mcp.text(mcp.call('everything', 'echo', message='after')))",
    )
    .await;
    assert!(
        out.contains("LAST trigger-long-running-operation outcome_unknown"),
        "{out}"
    );
    // The server goes on serving the next call.
    assert!(out.contains("Echo: after"), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_sessions_share_its_servers_which_stop_with_the_last_session() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let call =
        "from kernel_mcp import mcp; print(mcp.text(mcp.call('everything', 'echo', message='x')))";
    server.create_session("a").await;
    server.create_session("b").await;
    // Nothing starts before a call needs it.
    assert!(descendants_running(server.pid(), "server-everything").is_empty());
    assert!(stdout_of(&server, "a", call).await.contains("Echo: x"));
    assert!(stdout_of(&server, "b", call).await.contains("Echo: x"));
    let running = descendants_running(server.pid(), "server-everything");
    assert_eq!(
        running.len(),
        1,
        "one server for both sessions: {running:?}"
    );
    server.destroy("a").await;
    assert!(stdout_of(&server, "b", call).await.contains("Echo: x"));
    assert_eq!(
        descendants_running(server.pid(), "server-everything"),
        running
    );
    server.destroy("b").await;
    let pid = server.pid();
    let gone = wait_until(Duration::from_secs(15), || {
        descendants_running(pid, "server-everything").is_empty()
    })
    .await;
    assert!(gone, "the server outlived the project's last session");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_died_is_started_again_for_the_next_call() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let call =
        "from kernel_mcp import mcp; print(mcp.text(mcp.call('everything', 'echo', message='x')))";
    assert!(stdout_of(&server, "s", call).await.contains("Echo: x"));
    let first = descendants_running(server.pid(), "server-everything");
    assert_eq!(first.len(), 1, "{first:?}");
    crate::common::terminate(first[0], Duration::from_secs(5));
    // A call that races the death fails `broken` and is not sent again; the next call
    // starts a new server.
    let again = r#"
try:
    r = mcp.call('everything', 'echo', message='x')
except mcp.BrokerError as e:
    print('RACED', e.kind)
    r = mcp.call('everything', 'echo', message='x')
print(mcp.text(r))
"#;
    let out = stdout_of(&server, "s", again).await;
    assert!(out.contains("Echo: x"), "{out}");
    assert!(
        !out.contains("RACED") || out.contains("RACED broken"),
        "{out}"
    );
    let second = descendants_running(server.pid(), "server-everything");
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(first, second);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_kernel_gets_its_endpoint_when_a_session_takes_it() {
    let server = Server::start_with_args(&["serve", "--pool", "python3=1"]).await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    // Wait for the pool kernel to be ready (server_info reports the pool).
    let ready = async {
        for _ in 0..300 {
            let info = structured(&server.call("server_info", json!({})).await);
            if info["pool"]["python3"]["ready"].as_u64() == Some(1) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    };
    assert!(ready.await, "the pool kernel did not become ready");
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        "import os; from kernel_mcp import mcp; print('PID', os.getpid()); print(mcp.text(mcp.call('everything', 'echo', message='pooled')))",
    )
    .await;
    assert!(out.contains("Echo: pooled"), "{out}");
    assert!(
        server.stderr().contains("session takes a pool kernel"),
        "the session did not take the pool kernel"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mcp_scope_none_the_broker_is_off() {
    let server = Server::start_with_args(&["--mcp-scope", "none"]).await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
import os
from kernel_mcp import mcp
print("HELP", mcp.help())
try:
    mcp.call("everything", "echo", message="x")
except mcp.BrokerError as e:
    print("OFF", e.kind, e)
print("ENDPOINT", os.environ.get("KERNEL_MCP_ENDPOINT"))
"#,
    )
    .await;
    assert!(
        out.contains("HELP The MCP broker is off") && out.contains("--mcp-scope none"),
        "{out}"
    );
    assert!(out.contains("OFF off"), "{out}");
    assert!(out.contains("ENDPOINT None"), "{out}");
    assert!(descendants_running(server.pid(), "server-everything").is_empty());
    assert!(
        !server.stderr().contains("broker endpoint session"),
        "an endpoint was made"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstream_kernel_mcp_does_not_broker_again() {
    let server = Server::start().await;
    // kernel-mcp itself as a downstream server; its sessions' cwd (the registry's directory)
    // holds the same .mcp.json, which would make it call itself again without the guard.
    write_registry(
        server.workdir(),
        json!({"self": {"command": env!("CARGO_BIN_EXE_kernel-mcp"), "args": ["serve"]}}),
    );
    server.create_session("s").await;
    let r = run(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
inner = "from kernel_mcp import mcp\ntry:\n    mcp.call('self', 'list_sessions')\nexcept Exception as e:\n    print('INNER', type(e).__name__, e)\n"
r = mcp.call("self", "execute", arguments={"code": inner, "wait_s": 100}, timeout=120)
print("OUTER", r["structuredContent"]["status"], r["structuredContent"]["stdout"])
"#,
    )
    .await;
    let out = r["stdout"].as_str().unwrap_or_default();
    assert_eq!(r["status"], "ok", "{r:#}\n{}", server.stderr_tail());
    assert!(
        out.contains("OUTER ok") && out.contains("INNER BrokerError"),
        "{out}"
    );
    assert!(out.contains("recursion guard"), "{out}");
    server.destroy("s").await;
    let pid = server.pid();
    let gone = wait_until(Duration::from_secs(20), || {
        descendants_running(pid, "kernel-mcp serve").is_empty()
    })
    .await;
    assert!(gone, "the downstream kernel-mcp outlived the session");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_session_says_in_its_notices_that_the_broker_is_not_there() {
    use crate::common::gateways::{Backend, GatewayProc};
    let gw = GatewayProc::start(Backend::KernelGateway).await;
    let server = Server::start_with(
        &[("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new(&gw.token))],
        &["--gateway", &gw.flag(None)],
    )
    .await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let r = server
        .call(
            "create_session",
            json!({"session_id": "r", "gateway": "kg"}),
        )
        .await;
    assert!(!crate::common::is_error(&r), "{}", crate::common::text(&r));
    let first = run(&server, "r", "1 + 1").await;
    let second = run(&server, "r", "2 + 2").await;
    let third = run(&server, "r", "import kernel_mcp").await;
    let says = |r: &serde_json::Value| r["notices"].to_string().contains("MCP broker");
    assert!(says(&first), "{first:#}");
    assert!(!says(&second), "{second:#}");
    assert!(says(&third) && third["status"] == "error", "{third:#}");
    server.destroy("r").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_that_dies_mid_call_leaves_outcome_unknown_and_the_next_kernel_calls_on() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let r = run(
        &server,
        "s",
        r#"
import os, signal, threading
from kernel_mcp import mcp
mcp.call("everything", "echo", message="warm")  # the server is up: the next call is sent at once
threading.Timer(3, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
mcp.call("everything", "trigger-long-running-operation", arguments={"duration": 60, "steps": 60})
"#,
    )
    .await;
    assert_eq!(r["status"], "kernel_died", "{r:#}");
    // The new kernel (generation 2) gets the session's endpoint too; the journal is the
    // session's.
    let out = stdout_of(
        &server,
        "s",
        "from kernel_mcp import mcp; print('LAST', mcp.journal()[-1]['outcome']); print(mcp.text(mcp.call('everything', 'echo', message='again')))",
    )
    .await;
    assert!(out.contains("LAST outcome_unknown"), "{out}");
    assert!(out.contains("Echo: again"), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_cancels_a_call_that_a_thread_of_the_run_waits_for() {
    // SIGINT reaches the main thread only: the thread's call ends because the session
    // cancels its calls in flight when it interrupts the kernel.
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let r = server
        .call(
            "execute",
            json!({"session_id": "s", "wait_s": 4, "code": r#"
import threading
from kernel_mcp import mcp
box = []
def work():
    try:
        mcp.call("everything", "trigger-long-running-operation", arguments={"duration": 60, "steps": 60})
    except Exception as e:
        box.append("%s:%s" % (type(e).__name__, getattr(e, "kind", "")))
t = threading.Thread(target=work)
t.start()
t.join()
"#}),
        )
        .await;
    let r = structured(&r);
    assert_eq!(r["status"], "running", "{r:#}");
    server
        .call("interrupt_session", json!({"session_id": "s"}))
        .await;
    let out = stdout_of(&server, "s", "t.join(15); print('BOX', box, t.is_alive())").await;
    assert!(out.contains("BOX ['BrokerError:cancelled'] False"), "{out}");
    server.shutdown().await;
}
