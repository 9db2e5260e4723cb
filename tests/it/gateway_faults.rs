//! What a gateway's kernel or a broken gateway must not do to a session or the server, against
//! a real Jupyter Kernel Gateway on loopback (through [`Proxy`] where the gateway misbehaves)
//! and a hostile HTTP server ([`HugeBody`]):
//! - a person's kernel adopted by id is never restarted or deleted, not even when a
//!   `timeout_s` interrupt does not take effect;
//! - 404/503 for a while (a kernel being restarted or moved, as Enterprise Gateway with kernel
//!   persistence answers) is waited out, and the run goes on;
//! - a 256 MiB REST body is cut off at the bound with an error naming the gateway, while the
//!   server's resident memory stays small.

use std::time::Duration;

use crate::common::gateways::{Backend, GatewayProc, HugeBody, Proxy};
use crate::common::*;
use serde_json::{Value, json};

/// kernel-mcp configured with `gw` (through `via`, a proxy port, when given).
async fn server_for(gw: &GatewayProc, via: Option<u16>) -> Server {
    let flag = gw.flag(via);
    Server::start_with(
        &[(
            "KERNEL_MCP_GATEWAY_TOKEN",
            std::ffi::OsStr::new(gw.token.as_str()),
        )],
        &["--gateway", &flag],
    )
    .await
}

async fn execute(server: &Server, args: Value) -> Value {
    structured(&server.call("execute", args).await)
}

/// Follow a run with `get_execution` until it is no longer queued or running.
async fn finish(server: &Server, run: &Value) -> Value {
    let mut v = run.clone();
    for _ in 0..6 {
        if !matches!(status(&v), "running" | "queued") {
            break;
        }
        v = structured(
            &server
                .call(
                    "get_execution",
                    json!({"run_id": v["run_id"], "wait_s": 30}),
                )
                .await,
        );
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_never_restarts_a_kernel_adopted_on_a_gateway_and_destroy_leaves_it() {
    let gw = GatewayProc::start(Backend::KernelGateway).await;
    let id = gw.start_kernel().await;
    let server = server_for(&gw, None).await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "a", "gateway": "kg", "kernel_id": id}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let set = execute(&server, json!({"session_id": "a", "code": "x = 41"})).await;
    assert_eq!(status(&set), "ok", "{set}");

    // Code that ignores interrupts until a person stops it (by creating the flag file).
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("stop");
    let code = format!(
        "import os, time\nwhile not os.path.exists({:?}):\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n        pass",
        flag.display().to_string()
    );
    let run = execute(
        &server,
        json!({"session_id": "a", "code": code, "timeout_s": 1, "wait_s": 40}),
    )
    .await;
    assert_eq!(status(&run), "timeout", "{run}");
    let notices = run["notices"].to_string().to_lowercase();
    assert!(notices.contains("cannot restart"), "{run}");
    assert!(!notices.contains("state in it is lost"), "{run}");

    std::fs::write(&flag, "").unwrap();
    let next = execute(&server, json!({"session_id": "a", "code": "x + 1"})).await;
    assert_eq!(next["result"], "42", "the kernel was restarted: {next}");
    assert_eq!(next["state_reset"], false, "{next}");
    assert_eq!(next["generation"], 1, "{next}");

    let d = structured(
        &server
            .call("destroy_session", json!({"session_id": "a"}))
            .await,
    );
    assert_eq!(d["shutdown"], "detached", "{d}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        gw.kernel_ids().await.contains(&id),
        "the person's kernel was deleted from the gateway"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_answering_503_then_404_for_a_while_does_not_end_the_run() {
    let gw = GatewayProc::start(Backend::KernelGateway).await;
    let proxy = Proxy::start(gw.port).await;
    let server = server_for(&gw, Some(proxy.port)).await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "p", "gateway": "kg"}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let run = execute(
        &server,
        json!({"session_id": "p", "code": "import time\nfor i in range(16):\n    print(i, flush=True)\n    time.sleep(0.5)", "wait_s": 1.5}),
    )
    .await;
    assert_eq!(status(&run), "running", "{run}");
    // The kernel is being moved: the server first answers 503, then has no such kernel,
    // then has it again. Both the status poll and the reconnects see it.
    proxy.answer_with(Some(503));
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.answer_with(Some(404));
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.answer_with(None);

    let done = finish(&server, &run).await;
    assert_eq!(status(&done), "ok", "{done}");
    let lines: Vec<&str> = done["stdout"].as_str().unwrap_or("").lines().collect();
    let want: Vec<String> = (0..16).map(|i| i.to_string()).collect();
    assert_eq!(lines, want, "{done}");
    let v = execute(&server, json!({"session_id": "p", "code": "i"})).await;
    assert_eq!(v["result"], "15", "{v}");
    assert_eq!(v["generation"], 1, "{v}");
    server.destroy("p").await;
    server.shutdown().await;
}

/// A memory figure of `pid` in KiB (`VmRSS:`, `VmHWM:`… of /proc/PID/status).
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_rest_body_is_cut_off_with_an_error_naming_the_gateway_and_memory_stays_small() {
    const BODY: u64 = 256 << 20;
    let bad = HugeBody::start(BODY).await;
    let server = Server::start_with(
        &[("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new("t0k"))],
        &["--gateway", &format!("bad=http://127.0.0.1:{}", bad.port)],
    )
    .await;
    let pid = server.pid();
    let list = structured(&server.call("list_kernels", json!({})).await);
    let error = list["gateways"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("'bad'") && error.contains("MiB"),
        "the error names the gateway and the bound: {list}"
    );
    assert!(
        list["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["gateway"].is_null()),
        "local kernels are still listed: {list}"
    );
    let r = server
        .call(
            "create_session",
            json!({"session_id": "b", "gateway": "bad"}),
        )
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    assert_eq!(
        structured(&r)["error_code"],
        "GATEWAY_UNAVAILABLE",
        "{}",
        dump(&r)
    );

    // The kernel's own high-water mark: a peak between two samples cannot be missed.
    let peak_mib = status_kib(pid, "VmHWM:") / 1024;
    eprintln!(
        "huge REST body: server peak RSS {peak_mib} MiB; the gateway wrote {} MiB",
        bad.sent() >> 20
    );
    assert!(peak_mib < 100, "server RSS reached {peak_mib} MiB");
    assert!(
        bad.sent() < BODY / 4,
        "the server read {} MiB of the body",
        bad.sent() >> 20
    );
    // The server still works.
    let r = server.call("server_info", json!({})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    server.shutdown().await;
}
