//! Kernels on real Jupyter servers on loopback (see `crate::common::gateways`): one conformance walk
//! run against Jupyter Kernel Gateway, Jupyter Server and Jupyter Enterprise Gateway; and,
//! on one backend each, adopting a kernel by id, a websocket cut under a running loop, a
//! wrong token, a gateway that is down, and a kernel deleted on the server.
//!
//! Every test's token is searched for in every tool result and in the server's stderr log.

use std::time::{Duration, Instant};

use crate::common::gateways::{Backend, GatewayProc, Proxy, free_port};
use crate::common::*;
use serde_json::{Value, json};

/// kernel-mcp configured with `gw` (through `via`, a proxy port, when given) and its token.
async fn server_for(gw: &GatewayProc, via: Option<u16>, token: &str) -> Server {
    let flag = gw.flag(via);
    Server::start_with(
        &[("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new(token))],
        &["--gateway", &flag],
    )
    .await
}

/// Every result a test saw, to search for the token at the end.
#[derive(Default)]
struct Seen(std::sync::Mutex<String>);

impl Seen {
    async fn call(&self, server: &Server, tool: &str, args: Value) -> Value {
        let r = server.call(tool, args).await;
        self.0.lock().unwrap().push_str(&dump(&r));
        structured(&r)
    }

    fn assert_no_token(&self, server: &Server, token: &str) {
        assert!(
            !self.0.lock().unwrap().contains(token),
            "the token appears in a tool result"
        );
        assert!(
            !server.stderr().contains(token),
            "the token appears in the server's log"
        );
    }
}

async fn exec(seen: &Seen, server: &Server, session: &str, code: &str, extra: Value) -> Value {
    let mut args = json!({"session_id": session, "code": code});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    seen.call(server, "execute", args).await
}

async fn finish(seen: &Seen, server: &Server, run: &Value) -> Value {
    let mut v = run.clone();
    for _ in 0..4 {
        if !matches!(status(&v), "running" | "queued") {
            break;
        }
        v = seen
            .call(
                server,
                "get_execution",
                json!({"run_id": v["run_id"], "wait_s": 30}),
            )
            .await;
    }
    v
}

/// The conformance walk: the session semantics local kernels have, on `backend`.
async fn walk(backend: Backend) {
    let gw = GatewayProc::start(backend).await;
    let server = server_for(&gw, None, &gw.token).await;
    let seen = Seen::default();
    let name = backend.name();

    // list_kernels shows the gateway's python3 next to the local kernels.
    let list = seen.call(&server, "list_kernels", json!({})).await;
    let kernels = list["kernels"].as_array().unwrap();
    assert!(
        kernels
            .iter()
            .any(|k| k["gateway"] == name && k["name"] == "python3"),
        "{list}"
    );
    assert!(kernels.iter().any(|k| k["gateway"].is_null()), "{list}");
    assert_eq!(list["gateways"][0]["error"], Value::Null, "{list}");

    let info = seen
        .call(
            &server,
            "create_session",
            json!({"session_id": "w", "gateway": name, "kernel": "python3"}),
        )
        .await;
    assert_eq!(info["location"], name, "{info}");
    assert_eq!(info["pid"], Value::Null, "{info}");
    let kernel_id = info["kernel_id"].as_str().expect("kernel_id").to_string();
    assert!(gw.kernel_ids().await.contains(&kernel_id));
    let generation = info["generation"].as_u64().unwrap();

    // State across calls; stdout and stderr apart.
    exec(&seen, &server, "w", "x = 41", json!({})).await;
    let v = exec(
        &seen,
        &server,
        "w",
        "import sys\nprint('out'); print('err', file=sys.stderr)\nx + 1",
        json!({}),
    )
    .await;
    assert_eq!(v["result"], "42", "{v}");
    assert_eq!(v["stdout"], "out\n", "{v}");
    assert_eq!(v["stderr"], "err\n", "{v}");

    // An error with a plain traceback.
    let v = exec(&seen, &server, "w", "1/0", json!({})).await;
    assert_eq!(status(&v), "error", "{v}");
    assert_eq!(ename(&v), "ZeroDivisionError", "{v}");
    let tb = v["error"]["traceback"].to_string();
    assert!(!tb.contains("\\u001b"), "traceback has ANSI escapes: {tb}");

    // Interrupt stops the code and keeps the state.
    let run = exec(
        &seen,
        &server,
        "w",
        "import time; time.sleep(60)",
        json!({"wait_s": 1}),
    )
    .await;
    assert_eq!(status(&run), "running", "{run}");
    seen.call(&server, "interrupt_session", json!({"session_id": "w"}))
        .await;
    let done = finish(&seen, &server, &run).await;
    assert_eq!(status(&done), "interrupted", "{done}");
    let v = exec(&seen, &server, "w", "x", json!({})).await;
    assert_eq!(v["result"], "41", "{v}");

    // timeout_s.
    let t0 = Instant::now();
    let v = exec(
        &seen,
        &server,
        "w",
        "time.sleep(60)",
        json!({"timeout_s": 2}),
    )
    .await;
    let v = finish(&seen, &server, &v).await;
    assert_eq!(status(&v), "timeout", "{v}");
    assert!(
        t0.elapsed() < Duration::from_secs(40),
        "timeout took {:?}",
        t0.elapsed()
    );

    // input() → awaiting_input → send_input.
    let v = exec(
        &seen,
        &server,
        "w",
        "name = input('name? ')\nprint('hello', name)",
        json!({"wait_s": 10}),
    )
    .await;
    assert_eq!(status(&v), "awaiting_input", "{v}");
    assert_eq!(v["prompt"]["text"], "name? ", "{v}");
    let v = seen
        .call(
            &server,
            "send_input",
            json!({"run_id": v["run_id"], "value": "Ada"}),
        )
        .await;
    let v = finish(&seen, &server, &v).await;
    assert_eq!(status(&v), "ok", "{v}");
    assert!(
        v["stdout"].as_str().unwrap_or("").contains("hello Ada"),
        "{v}"
    );

    // A matplotlib plot arrives as an image.
    let r = server
        .call("execute", json!({"session_id": "w", "code": "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()"}))
        .await;
    let imgs = images(&r);
    assert!(
        imgs.iter().any(|(mime, _)| mime == "image/png"),
        "{}",
        dump(&r)
    );

    // A 10 MB print is bounded in the response and pageable in full.
    let r = server
        .call(
            "execute",
            json!({"session_id": "w", "code": "print('x' * 10_000_000)"}),
        )
        .await;
    assert!(
        dump(&r).len() < 100_000,
        "response is {} bytes",
        dump(&r).len()
    );
    let v = finish(&seen, &server, &structured(&r)).await;
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(
        v["truncated"]["stdout"]["total_bytes"], 10_000_001,
        "{}",
        v["truncated"]
    );
    let page = seen
        .call(
            &server,
            "get_execution",
            json!({"run_id": v["run_id"], "stream": "stdout", "offset": 9_999_990, "limit": 100}),
        )
        .await;
    assert_eq!(page["text"], "xxxxxxxxxx\n", "{page}");

    // Restart bumps the generation and loses the state.
    let info = seen
        .call(&server, "restart_session", json!({"session_id": "w"}))
        .await;
    assert_eq!(info["generation"].as_u64(), Some(generation + 1), "{info}");
    let v = exec(&seen, &server, "w", "x", json!({})).await;
    assert_eq!(ename(&v), "NameError", "{v}");

    // Destroy removes the kernel from the server.
    let id_now = seen
        .call(&server, "get_session", json!({"session_id": "w"}))
        .await["kernel_id"]
        .as_str()
        .unwrap()
        .to_string();
    server.destroy("w").await;
    let t0 = Instant::now();
    while gw.kernel_ids().await.contains(&id_now) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "kernel {id_now} still on the server"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_walk_on_kernel_gateway() {
    walk(Backend::KernelGateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_walk_on_jupyter_server() {
    walk(Backend::JupyterServer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_walk_on_enterprise_gateway() {
    walk(Backend::EnterpriseGateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopting_a_kernel_by_id_works_and_destroy_leaves_it_running() {
    let gw = GatewayProc::start(Backend::JupyterServer).await;
    let id = gw.start_kernel().await;
    let server = server_for(&gw, None, &gw.token).await;
    let seen = Seen::default();
    let info = seen
        .call(
            &server,
            "create_session",
            json!({"session_id": "a", "gateway": "js", "kernel_id": id}),
        )
        .await;
    assert_eq!(info["kernel_id"], id.as_str(), "{info}");
    assert_eq!(info["attached"], true, "{info}");
    let v = exec(&seen, &server, "a", "6 * 7", json!({})).await;
    assert_eq!(v["result"], "42", "{v}");
    let d = seen
        .call(&server, "destroy_session", json!({"session_id": "a"}))
        .await;
    assert_eq!(d["shutdown"], "detached", "{d}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        gw.kernel_ids().await.contains(&id),
        "the adopted kernel was shut down"
    );
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_websocket_reconnects_and_the_run_completes_with_every_line() {
    let gw = GatewayProc::start(Backend::KernelGateway).await;
    let proxy = Proxy::start(gw.port).await;
    let server = server_for(&gw, Some(proxy.port), &gw.token).await;
    let seen = Seen::default();
    seen.call(
        &server,
        "create_session",
        json!({"session_id": "c", "gateway": "kg"}),
    )
    .await;
    // Jupyter's channels have no acknowledgements: a message the gateway wrote just before
    // the cut is lost with the connection (the server buffers for a reconnect only once it
    // sees the close). So cut in the quiet second after a line, as a network would fail
    // between two outputs; every line printed after the cut must arrive.
    let run = exec(
        &seen,
        &server,
        "c",
        "import time\nfor i in range(10):\n    print(i, flush=True)\n    time.sleep(0.5 if i != 2 else 3)",
        json!({"wait_s": 0.5}),
    )
    .await;
    assert_eq!(status(&run), "running", "{run}");
    let mut seen_lines = 0;
    for _ in 0..300 {
        let page = seen
            .call(
                &server,
                "get_execution",
                json!({"run_id": run["run_id"], "wait_s": 0}),
            )
            .await;
        seen_lines = page["stdout"].as_str().unwrap_or("").lines().count();
        if seen_lines >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen_lines, 3, "line 2 (then a 3 s pause) never arrived");
    let cut = proxy.cut();
    assert!(cut >= 1, "no connection to cut");
    let done = finish(&seen, &server, &run).await;
    assert_eq!(status(&done), "ok", "{done}");
    let lines: Vec<&str> = done["stdout"].as_str().unwrap_or("").lines().collect();
    let want: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    assert_eq!(lines, want, "{done}");
    assert!(
        server.stderr().contains("reconnected"),
        "no reconnect was logged"
    );
    let v = exec(&seen, &server, "c", "i", json!({})).await;
    assert_eq!(v["result"], "9", "{v}");
    server.destroy("c").await;
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_unauthorized_at_once_and_never_shown() {
    let gw = GatewayProc::start(Backend::KernelGateway).await;
    let wrong = format!("wrong-{}", uuid::Uuid::new_v4().simple());
    let server = server_for(&gw, None, &wrong).await;
    let seen = Seen::default();
    let t0 = Instant::now();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "u", "gateway": "kg"}),
        )
        .await;
    let took = t0.elapsed();
    seen.0.lock().unwrap().push_str(&dump(&r));
    assert!(is_error(&r), "{}", dump(&r));
    assert_eq!(structured(&r)["error_code"], "UNAUTHORIZED", "{}", dump(&r));
    // At once, not after retrying until the start-up timeout.
    assert!(took < Duration::from_secs(10), "UNAUTHORIZED took {took:?}");
    let list = seen.call(&server, "list_kernels", json!({})).await;
    assert!(
        list["gateways"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("token")),
        "{list}"
    );
    seen.assert_no_token(&server, &wrong);
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_is_down_is_unavailable_at_once_and_local_kernels_stay_listed() {
    let port = free_port();
    let server = Server::start_with(
        &[(
            "KERNEL_MCP_GATEWAY_TOKEN",
            std::ffi::OsStr::new("down-token-123"),
        )],
        &["--gateway", &format!("down=http://127.0.0.1:{port}")],
    )
    .await;
    let seen = Seen::default();
    let t0 = Instant::now();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "d", "gateway": "down"}),
        )
        .await;
    let took = t0.elapsed();
    assert_eq!(
        structured(&r)["error_code"],
        "GATEWAY_UNAVAILABLE",
        "{}",
        dump(&r)
    );
    // At once, not after retrying until the start-up timeout.
    assert!(
        took < Duration::from_secs(10),
        "GATEWAY_UNAVAILABLE took {took:?}"
    );
    let list = seen.call(&server, "list_kernels", json!({})).await;
    assert!(
        list["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["name"] == "python3" && k["gateway"].is_null()),
        "{list}"
    );
    assert_eq!(list["gateways"][0]["name"], "down", "{list}");
    assert!(list["gateways"][0]["error"].is_string(), "{list}");
    seen.assert_no_token(&server, "down-token-123");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_deleted_on_the_server_ends_the_run_kernel_died() {
    let gw = GatewayProc::start(Backend::JupyterServer).await;
    let server = server_for(&gw, None, &gw.token).await;
    let seen = Seen::default();
    let info = seen
        .call(
            &server,
            "create_session",
            json!({"session_id": "k", "gateway": "js"}),
        )
        .await;
    let id = info["kernel_id"].as_str().unwrap().to_string();
    let run = exec(
        &seen,
        &server,
        "k",
        "import time; time.sleep(60)",
        json!({"wait_s": 1}),
    )
    .await;
    assert_eq!(status(&run), "running", "{run}");
    let t0 = Instant::now();
    let (st, _) = gw
        .rest(reqwest::Method::DELETE, &format!("api/kernels/{id}"), None)
        .await;
    assert_eq!(st, 204);
    let done = finish(&seen, &server, &run).await;
    let took = t0.elapsed();
    assert_eq!(status(&done), "kernel_died", "{done}");
    // A server may answer 404 for a while for a kernel it is moving (Enterprise Gateway with
    // kernel persistence): the kernel counts as gone once the grace has passed, not before.
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(40),
        "kernel_died took {took:?}: expected the 10 s grace"
    );
    eprintln!("kernel deleted → kernel_died after {took:?}");
    server.destroy("k").await;
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}

/// The pid of the process whose command line names kernel `id`'s connection file.
fn kernel_process(id: &str) -> Option<i32> {
    let needle = format!("kernel-{id}.json");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&cmd)
            .contains(&needle)
            .then_some(pid)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_killed_on_the_gateway_side_ends_the_run_kernel_died() {
    let gw = GatewayProc::start(Backend::KernelGateway).await;
    let server = server_for(&gw, None, &gw.token).await;
    let seen = Seen::default();
    let info = seen
        .call(
            &server,
            "create_session",
            json!({"session_id": "kk", "gateway": "kg"}),
        )
        .await;
    let id = info["kernel_id"].as_str().unwrap().to_string();
    let pid = kernel_process(&id).expect("the kernel's process");
    let run = exec(
        &seen,
        &server,
        "kk",
        "import time; time.sleep(60)",
        json!({"wait_s": 1}),
    )
    .await;
    assert_eq!(status(&run), "running", "{run}");
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the kernel");
    let done = finish(&seen, &server, &run).await;
    let took = t0.elapsed();
    assert_eq!(status(&done), "kernel_died", "{done}");
    assert!(took < Duration::from_secs(15), "kernel_died took {took:?}");
    eprintln!("kernel killed → kernel_died after {took:?}");
    // The replacement the gateway started after the death is ours too: deleted.
    let t0 = Instant::now();
    while gw.kernel_ids().await.contains(&id) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "kernel {id} left on the gateway"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    server.destroy("kk").await;
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enterprise_gateway_kernel_runs_as_the_caller_and_no_other_kernel_setting_passes() {
    let gw = GatewayProc::start(Backend::EnterpriseGateway).await;
    let server = server_for(&gw, None, &gw.token).await;
    let seen = Seen::default();
    let gateway = gw.flag(None).split('=').next().unwrap().to_string();
    let info = seen
        .call(
            &server,
            "create_session",
            json!({"session_id": "u", "gateway": gateway, "env": {"KERNEL_LAUNCH_TIMEOUT": "50"}}),
        )
        .await;
    assert_eq!(info["session_id"], "u", "{info}");
    // The stdio client is the owner: its kernels run as this process's user.
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let v = exec(
        &seen,
        &server,
        "u",
        "import os; os.environ.get('KERNEL_USERNAME')",
        json!({}),
    )
    .await;
    assert_eq!(v["result"], format!("'{me}'"), "{v}");
    for (k, val) in [
        ("KERNEL_USERNAME", "root"),
        ("KERNEL_UID", "0"),
        ("KERNEL_NAMESPACE", "x"),
    ] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": "v", "gateway": gateway, "env": {k: val}}),
            )
            .await;
        assert_eq!(
            crate::common::history::error_code(&r),
            "INVALID_ARGUMENT",
            "{k}: {}",
            dump(&r)
        );
        assert!(dump(&r).contains(k), "{}", dump(&r));
    }
    seen.call(&server, "destroy_session", json!({"session_id": "u"}))
        .await;
    seen.assert_no_token(&server, &gw.token);
    server.shutdown().await;
}
