//! Who may reach what, through the real service (DESIGN §12): two connections of one
//! `kernel-mcp service`, each with a `default` session of its own. Another connection's
//! `default` — its history and journal, its exports, its runs (`get_execution`,
//! `send_input`, `cancel_execution`), its tasks and resources, its log events — is out of
//! reach exactly as if it did not exist; named sessions stay shared. Each test has its own
//! service (see `common/service.rs`).

use std::time::Duration;

use crate::common::person::Person;
use crate::common::service::TestService;
use crate::common::*;
use rmcp::model::{
    CallToolRequestParams, CancelTaskParams, ClientCapabilities, ClientConfig, ClientRequest,
    GetTaskParams, Implementation, ReadResourceRequestParams, Request, ServerResult,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

fn error_code(r: &rmcp::model::CallToolResult) -> String {
    structured(r)["error_code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every history entry's code, in order.
fn codes(history: &Value) -> Vec<String> {
    history["entries"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|x| x["code"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn another_connections_default_history_and_journal_are_not_found() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let b = svc.relay().await;
    let r = a
        .call("execute", json!({"code": "secret = 'A-SECRET'; secret"}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));

    // b has no default yet: nothing of a's, neither live nor from the journal on disk.
    for (tool, args) in [
        ("get_history", json!({"session_id": "default"})),
        (
            "export_history",
            json!({"session_id": "default", "path": b.workdir().join("b.txt"), "format": "transcript"}),
        ),
    ] {
        let r = b.call(tool, args).await;
        assert_eq!(error_code(&r), "SESSION_NOT_FOUND", "{tool}: {}", dump(&r));
        assert!(
            !dump(&r).contains("A-SECRET"),
            "{tool} leaked: {}",
            dump(&r)
        );
    }
    assert!(!b.workdir().join("b.txt").exists());

    // b's own default has only b's history; so has its export.
    let r = b.call("execute", json!({"code": "mine = 'B'"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let h = structured(
        &b.call("get_history", json!({"session_id": "default"}))
            .await,
    );
    assert_eq!(codes(&h), ["mine = 'B'"], "{h}");
    let out = b.workdir().join("mine.txt");
    let r = b
        .call(
            "export_history",
            json!({"session_id": "default", "path": out, "format": "transcript"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let exported = std::fs::read_to_string(&out).expect("export written");
    assert!(
        exported.contains("mine = 'B'") && !exported.contains("A-SECRET"),
        "{exported}"
    );

    // a's default ends with its connection; its journal stays a's. b, whose own default then
    // ends too, reads its own journal of it, never a's.
    a.shutdown().await;
    b.destroy("default").await;
    let h = structured(
        &b.call("get_history", json!({"session_id": "default"}))
            .await,
    );
    assert_eq!(
        codes(&h),
        ["mine = 'B'"],
        "b reads its own ended default: {h}"
    );
    let c = svc.relay().await;
    let r = c
        .call("get_history", json!({"session_id": "default"}))
        .await;
    assert_eq!(error_code(&r), "SESSION_NOT_FOUND", "{}", dump(&r));
    assert!(!dump(&r).contains("A-SECRET") && !dump(&r).contains("mine = 'B'"));
    b.shutdown().await;
    c.shutdown().await;
}

/// What is left of a spawned relay once its client owns the transport.
struct Relay {
    pid: u32,
    _workdir: tempfile::TempDir,
}

/// A client declaring the tasks extension, on a relay to `svc`.
async fn task_client(svc: &TestService) -> (RunningService<RoleClient, ClientConfig>, Relay) {
    let env = svc.env();
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let Spawned {
        transport,
        pid,
        workdir,
        ..
    } = spawn_server(&env, &["serve", "--shared"]);
    let info = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("scope-test", "0"),
    );
    let client = tokio::time::timeout(Duration::from_secs(60), info.serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize");
    (
        client,
        Relay {
            pid,
            _workdir: workdir,
        },
    )
}

async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    tool: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().expect("object").clone());
    let r = tokio::time::timeout(
        CALL_TIMEOUT,
        client.send_request(ClientRequest::CallToolRequest(Request::new(params))),
    )
    .await
    .expect("answered in time")
    .expect("tools/call");
    match r {
        ServerResult::CallToolResult(r) => r,
        other => panic!("{tool} answered {other:?}"),
    }
}

async fn request(
    client: &RunningService<RoleClient, ClientConfig>,
    req: ClientRequest,
) -> Result<ServerResult, ServiceError> {
    tokio::time::timeout(CALL_TIMEOUT, client.send_request(req))
        .await
        .expect("answered in time")
}

#[tokio::test]
async fn another_connections_default_run_task_and_resources_are_not_found() {
    let svc = TestService::new();
    let (a, a_server) = task_client(&svc).await;
    let (b, b_server) = task_client(&svc).await;
    let r = call(
        &a,
        "execute",
        json!({"code": "print('A-OUT'); name = input('who? ')", "wait_s": 5}),
    )
    .await;
    let run = structured(&r);
    assert_eq!(status(&run), "awaiting_input", "{run}");
    let run_id = run["run_id"].as_str().expect("run_id").to_string();

    for (tool, args) in [
        ("get_execution", json!({"run_id": run_id})),
        (
            "get_execution",
            json!({"run_id": run_id, "stream": "stdout"}),
        ),
        ("send_input", json!({"run_id": run_id, "value": "b"})),
        ("cancel_execution", json!({"run_id": run_id})),
    ] {
        let r = call(&b, tool, args.clone()).await;
        assert_eq!(
            structured(&r)["error_code"],
            "EXECUTION_NOT_FOUND",
            "{tool}({args}): {}",
            dump(&r)
        );
        assert!(!dump(&r).contains("A-OUT"), "{tool} leaked: {}", dump(&r));
    }
    let read = request(
        &b,
        ClientRequest::ReadResourceRequest(Request::new(ReadResourceRequestParams::new(format!(
            "kernel-mcp://runs/{run_id}/stdout"
        )))),
    )
    .await;
    assert!(
        read.as_ref()
            .is_err_and(|e| !format!("{e}").contains("A-OUT")),
        "resources/read of another connection's run: {read:?}"
    );
    let got = request(
        &b,
        ClientRequest::GetTaskRequest(Request::new(GetTaskParams::new(run_id.clone()))),
    )
    .await;
    assert!(
        got.is_err(),
        "tasks/get of another connection's run: {got:?}"
    );
    let cancelled = request(
        &b,
        ClientRequest::CancelTaskRequest(Request::new(CancelTaskParams::new(run_id.clone()))),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "tasks/cancel of another connection's run: {cancelled:?}"
    );

    // a's run is untouched, and a still reaches all of it.
    let r = structured(&call(&a, "get_execution", json!({"run_id": run_id})).await);
    assert_eq!(
        status(&r),
        "awaiting_input",
        "b's calls changed a's run: {r}"
    );
    assert!(r["stdout"].as_str().unwrap_or_default().contains("A-OUT"));
    let got = request(
        &a,
        ClientRequest::GetTaskRequest(Request::new(GetTaskParams::new(run_id.clone()))),
    )
    .await;
    assert!(got.is_ok(), "a's own task: {got:?}");
    let r = structured(&call(&a, "send_input", json!({"run_id": run_id, "value": "a"})).await);
    assert_eq!(status(&r), "ok", "{r}");

    a.cancel().await.ok();
    b.cancel().await.ok();
    for s in [a_server, b_server] {
        assert!(
            wait_until(Duration::from_secs(15), || !pid_alive(s.pid)).await,
            "relay {} still running",
            s.pid
        );
    }
}

#[tokio::test]
async fn log_messages_reach_only_the_clients_that_see_their_session() {
    require_venv();
    let svc = TestService::new();
    let env = svc.env();
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let mut watcher = raw::RawClient::start_with(&env, &["serve", "--shared"]).await;
    let set = json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
                     "params": {"level": "debug"}});
    watcher.write(&format!("{set}\n")).await;
    assert!(watcher.read(1).await.get("result").is_some());

    // Another connection's default, with a person's console output in it (logged at debug
    // as output that belongs to no run of the agent's).
    let other = svc.relay().await;
    let r = other.call("execute", json!({"code": "1"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let info = structured(
        &other
            .call("get_session", json!({"session_id": "default"}))
            .await,
    );
    let file = info["connection_file"].as_str().expect("connection_file");
    Person::start(file, &["print('PERSON-SECRET')"], Duration::ZERO)
        .finish()
        .await;
    // A named session: every client may see its events.
    other.create_session("everyones").await;

    let seen = watcher
        .notification(Duration::from_secs(30), |m| {
            m["method"] == "notifications/message"
                && m["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("kernel ready") && d.contains("everyones"))
        })
        .await;
    assert!(
        seen.is_some(),
        "the named session's events reach every client"
    );
    let all = watcher.notifications_within(Duration::from_secs(2)).await;
    let leaked: Vec<&Value> = all
        .iter()
        .filter(|m| {
            let d = m["params"]["data"].as_str().unwrap_or_default();
            d.contains("PERSON-SECRET")
                || d.contains("session=\"default\"")
                || d.contains("session=default")
        })
        .collect();
    assert!(
        leaked.is_empty(),
        "another connection's default leaked: {leaked:?}"
    );
    assert!(watcher.close().await);
    other.shutdown().await;
}

#[tokio::test]
async fn a_clients_end_while_execute_waits_leaves_a_named_sessions_run_going() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let b = svc.relay().await;
    a.create_session("long").await;
    // Longer than rmcp's 5 s drain of a closed connection, after which it cancels the calls
    // still running.
    let code = "import time\nfor i in range(24):\n    time.sleep(0.5)\nfinished = 'yes'\nfinished";
    let params = CallToolRequestParams::new("execute").with_arguments(
        json!({"session_id": "long", "code": code, "wait_s": 60})
            .as_object()
            .unwrap()
            .clone(),
    );
    let waiting = {
        let peer = a.client().peer().clone();
        tokio::spawn(async move { peer.call_tool(params).await })
    };
    // The run has started in the kernel.
    let started = tokio::time::Instant::now();
    loop {
        let info = structured(&b.call("get_session", json!({"session_id": "long"})).await);
        if info["status"] == "busy" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never busy: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The relay dies: the service sees the connection end while the call waits.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the relay");
    let _ = waiting.await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let entry = loop {
        let h = structured(&b.call("get_history", json!({"session_id": "long"})).await);
        if let Some(e) = h["entries"].as_array().and_then(|e| e.first()) {
            break e.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never finished: {h}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(entry["status"], "ok", "the run was stopped: {entry}");
    assert_eq!(b.exec("long", "finished").await["result"], "'yes'");
    drop(a);
    b.shutdown().await;
}

#[tokio::test]
async fn a_clients_cancellation_still_stops_its_run() {
    let svc = TestService::new();
    let a = svc.relay().await;
    a.create_session("stopped").await;
    let params = CallToolRequestParams::new("execute").with_arguments(
        json!({"session_id": "stopped", "code": "import time\ntime.sleep(30)", "wait_s": 60})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = a
        .client()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    let started = tokio::time::Instant::now();
    loop {
        let info = structured(
            &a.call("get_session", json!({"session_id": "stopped"}))
                .await,
        );
        if info["status"] == "busy" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never busy: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    handle
        .cancel(Some("test".into()))
        .await
        .expect("cancel sent");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let entry = loop {
        let h = structured(
            &a.call("get_history", json!({"session_id": "stopped"}))
                .await,
        );
        if let Some(e) = h["entries"].as_array().and_then(|e| e.first()) {
            break e.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was not stopped: {h}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(entry["status"], "interrupted", "{entry}");
    a.shutdown().await;
}

#[tokio::test]
async fn an_expired_default_answers_session_expired_instead_of_a_fresh_one() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let info = structured(
        &a.call(
            "create_session",
            json!({"session_id": "default", "expires_after_s": 2}),
        )
        .await,
    );
    let kernel = info["pid"].as_u64().expect("pid") as u32;
    let r = structured(&a.call("execute", json!({"code": "kept = 1"})).await);
    assert_eq!(status(&r), "ok", "{r}");
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(kernel)).await,
        "the default never expired"
    );
    let r = a.call("execute", json!({"code": "kept"})).await;
    assert_eq!(
        error_code(&r),
        "SESSION_EXPIRED",
        "a silent fresh default: {}",
        dump(&r)
    );
    assert!(
        text(&r).contains("create_session"),
        "says how to go on: {}",
        text(&r)
    );
    // History stays readable, and a new default is there for the asking.
    let h = structured(
        &a.call("get_history", json!({"session_id": "default"}))
            .await,
    );
    assert_eq!(codes(&h), ["kept = 1"], "{h}");
    a.call("create_session", json!({"session_id": "default"}))
        .await;
    let r = structured(&a.call("execute", json!({"code": "1 + 1"})).await);
    assert_eq!(r["result"], "2", "{r}");
    a.shutdown().await;
}

#[tokio::test]
async fn a_persons_cells_on_the_kernel_keep_its_session_from_expiring() {
    let server = Server::start().await;
    let info = structured(
        &server
            .call(
                "create_session",
                json!({"session_id": "watched", "expires_after_s": 3}),
            )
            .await,
    );
    let file = info["connection_file"].as_str().expect("connection_file");
    // Short cells a second apart for 6 s, then one cell that runs for 5 s: 11 s of a
    // person's work, past the 3 s expiry, with no agent call in between.
    let mut cells = vec!["1 + 1"; 7];
    cells.push("import time; time.sleep(5)");
    let person = Person::start(file, &cells, Duration::from_secs(1));
    person.finish().await;
    let r = server
        .call("get_session", json!({"session_id": "watched"}))
        .await;
    assert!(
        !is_error(&r),
        "expired while a person worked on it: {}",
        dump(&r)
    );
    // Left alone, it expires as before.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = server
            .call("get_session", json!({"session_id": "watched"}))
            .await;
        if error_code(&r) == "SESSION_EXPIRED" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never expired: {}",
            dump(&r)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    server.shutdown().await;
}

/// The port a `service --http 127.0.0.1:0` announces on stderr.
async fn announced_port(child: &mut tokio::process::Child) -> u16 {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let port = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                return rest.split('/').next().and_then(|p| p.parse().ok());
            }
        }
        None
    })
    .await
    .expect("the service announces its HTTP address")
    .expect("a port");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    port
}

#[tokio::test]
async fn an_http_default_outlives_the_keep_alive_and_an_empty_idle_session_does_not() {
    let svc = TestService::new();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args([
            "service",
            "--http",
            "127.0.0.1:0",
            "--http-keep-alive-s",
            "2",
            "--socket",
        ])
        .arg(svc.socket())
        .envs(svc.env())
        .env("VIRTUAL_ENV", venv())
        .env_remove("KERNEL_MCP_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the service");
    let port = announced_port(&mut child).await;
    let agent = http::HttpClient::connect(port).await;
    let idle = http::HttpClient::connect(port).await;
    let r = agent.call("execute", json!({"code": "x = 41; x"})).await;
    assert_eq!(r["result"], "41", "{r}");
    let r = idle.call("list_sessions", json!({})).await;
    assert!(r["sessions"].is_array(), "{r}");
    // Well past the keep-alive, with no request from either.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let r = agent.call("execute", json!({"code": "x + 1"})).await;
    assert_eq!(
        r["result"], "42",
        "the default did not outlive the keep-alive: {r}"
    );
    let (head, _) = http::post(
        port,
        Some(idle.session()),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "list_sessions", "arguments": {}}}),
    )
    .await;
    assert!(
        head.contains(" 404"),
        "an idle session with nothing in it stays: {head}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the service exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn checkpoints_and_exports_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start().await;
    let dir = server.workdir().join("shared");
    std::fs::create_dir(&dir).unwrap();
    // Others may traverse to `dir` and list it: only the files' own modes protect them.
    std::fs::set_permissions(server.workdir(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "keeper", "cwd": dir}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = server.exec("keeper", "token = 'SECRET-TOKEN'").await;
    assert_eq!(status(&r), "ok", "{r}");
    let checkpoint = dir.join("ns.json");
    // An existing readable file is replaced by a private one.
    std::fs::write(&checkpoint, "{}").unwrap();
    std::fs::set_permissions(&checkpoint, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = server
        .call(
            "checkpoint_session",
            json!({"session_id": "keeper", "path": "ns.json"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let mut written = vec![checkpoint];
    for format in ["transcript", "script", "notebook"] {
        let r = server
            .call(
                "export_history",
                json!({"session_id": "keeper", "path": format!("out-{format}"), "format": format}),
            )
            .await;
        assert!(!is_error(&r), "{}", text(&r));
        written.push(structured(&r)["path"].as_str().expect("path").into());
    }
    let control = dir.join("public.txt");
    std::fs::write(&control, "public").unwrap();
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o644)).unwrap();
    let can_root = nix::unistd::getuid().is_root();
    for path in &written {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", path.display());
        if can_root {
            assert!(
                !read_as_nobody(path),
                "another user read {}",
                path.display()
            );
        }
    }
    if can_root {
        assert!(
            read_as_nobody(&control),
            "the check itself must be able to read a public file"
        );
    }
    server.shutdown().await;
}

/// Whether uid/gid 65534 can read `path`.
fn read_as_nobody(path: &std::path::Path) -> bool {
    std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "cat",
        ])
        .arg(path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
