//! Who may reach what, through the real service (docs/auth.md, "Several users on one service"):
//! two connections of one `kernel-mcp service`, each with a `default` session of its own.
//! Another connection's `default` — its history and journal, its exports, its runs
//! (`get_execution`, `send_input`, `cancel_execution`), its tasks and resources, its log events
//! — is out of reach exactly as if it did not exist; named sessions stay shared. A session's
//! data files (checkpoints, exports) are its owner's only. Each test has its own service (see
//! `common/service.rs`); `lifetimes.rs` has how long what belongs to a client lives.

use std::time::Duration;

use crate::common::history::{codes, error_code};
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
    if !can_root {
        crate::common::skip(
            "needs root to check that another uid (nobody) cannot read the files; only their 0600 modes are checked",
        );
    }
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
