//! Sessions belong to who is calling, not to a connection (docs/auth.md), through the real
//! service (`service --http`) and a real authorization server (oidc-provider):
//! - a 2026-07-28 client (no `initialize`, no `Mcp-Session-Id`) keeps its principal's
//!   `default` across requests, with an honest `state_reset`;
//! - closing such a request's response stream cancels its run (the spec's only cancel);
//! - a request's `_meta` log level delivers log messages in its response, and none without;
//! - two OAuth principals on one service: neither lists, reads, runs in, interrupts, exports,
//!   forks or destroys the other's sessions, by MCP or by the Jupyter API (not-found codes,
//!   never "forbidden"), each may use the same names; an admin sees both, with owners;
//! - `session_id` parameters carry `x-mcp-header` for routing by session.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::jupyter::FaceService;
use crate::common::oauth::{AuthServer, OAuthServe, Reply, call_2026, request};
use crate::common::service::TestService;

const RW: &str = "kernel-mcp:read kernel-mcp:execute";
const ADMIN: &str = "kernel-mcp:read kernel-mcp:execute kernel-mcp:admin";

/// The result of the reply's answer to request 1 (an error result included).
fn result(reply: &Reply) -> Value {
    reply
        .messages()
        .into_iter()
        .find(|m| m["id"] == 1)
        .map(|m| m["result"].clone())
        .unwrap_or_else(|| panic!("no answer ({}): {}", reply.status, reply.body))
}

/// The error code of an `isError` result, or "" when the call succeeded.
fn error_code(reply: &Reply) -> String {
    let r = result(reply);
    match r["isError"] == true {
        true => r["structuredContent"]["error_code"]
            .as_str()
            .unwrap_or("(run error)")
            .to_string(),
        false => String::new(),
    }
}

fn structured(reply: &Reply) -> Value {
    result(reply)["structuredContent"].clone()
}

#[tokio::test]
async fn a_stateless_client_keeps_its_default_across_requests_on_service_http() {
    let face = FaceService::start(&[], &[]).await;
    let url = face.url("/mcp");
    let token = Some(face.token.as_str());
    let first = call_2026(&url, token, "execute", json!({"code": "x = 42"})).await;
    assert_eq!(structured(&first)["status"], "ok", "{}", first.body);
    let second = call_2026(&url, token, "execute", json!({"code": "x"})).await;
    let r = structured(&second);
    assert_eq!(
        r["result"], "42",
        "the second request's default is the first's: {r}"
    );
    assert_eq!(r["state_reset"], false);
    assert_eq!(r["session_id"], "default");
    let listed = structured(&call_2026(&url, token, "list_sessions", json!({})).await);
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert_eq!(ids, ["default"], "one default, kept: {listed}");
    face.stop().await;
}

#[tokio::test]
async fn closing_a_stateless_requests_stream_interrupts_its_run() {
    let face = FaceService::start(&[], &[]).await;
    let url = face.url("/mcp");
    let token = Some(face.token.as_str());
    structured(&call_2026(&url, token, "execute", json!({"code": "import time"})).await);
    // The client gives up on its request after 3 s: its response stream closes.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"code": "time.sleep(120)"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let sent = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap()
        .post(&url)
        .bearer_auth(&face.token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "execute")
        .body(body.to_string())
        .send()
        .await;
    if let Ok(r) = sent {
        let _ = tokio::time::timeout(Duration::from_secs(3), r.text()).await;
    }
    // Its run is interrupted: the session is idle again long before the sleep's end.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (mut last, mut stopped) = (Value::Null, false);
    while !stopped && tokio::time::Instant::now() < deadline {
        let args = json!({"session_id": "default", "latest_n": 1});
        let reply = call_2026(&url, token, "get_history", args).await;
        last = result(&reply);
        stopped = last["structuredContent"]["entries"][0]["status"] == "interrupted";
        if !stopped {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    assert!(stopped, "the cancelled run was not interrupted: {last}");
    face.stop().await;
}

#[tokio::test]
async fn a_meta_log_level_delivers_log_messages_in_that_requests_response_and_none_without() {
    let face = FaceService::start(&[], &[("KERNEL_MCP_LOG", "kernel_mcp=debug")]).await;
    let url = face.url("/mcp");
    // Each request starts a session (a kernel start logs several lines at info).
    let call = |session: &str, level: Option<&str>| {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        if let Some(l) = level {
            meta["io.modelcontextprotocol/logLevel"] = json!(l);
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "create_session", "arguments": {"session_id": session}, "_meta": meta}})
    };
    let post = |session: &'static str, level: Option<&'static str>| {
        let (url, token, body) = (url.clone(), face.token.clone(), call(session, level));
        async move {
            let headers = [
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "create_session"),
                ("mcp-param-session-id", session),
            ];
            request(Method::POST, &url, Some(&token), &headers, Some(&body)).await
        }
    };
    let logs = |r: &Reply| {
        r.messages()
            .into_iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    let quiet = post("quiet", None).await;
    assert_eq!(structured(&quiet)["session_id"], "quiet", "{}", quiet.body);
    assert_eq!(logs(&quiet), 0, "no level, no log messages: {}", quiet.body);
    let told = post("told", Some("info")).await;
    assert_eq!(structured(&told)["session_id"], "told", "{}", told.body);
    assert!(
        logs(&told) > 0,
        "an info level gets log messages: {}",
        told.body
    );
    face.stop().await;
}

#[tokio::test]
async fn two_principals_reach_only_their_own_sessions_and_an_admin_sees_both_with_owners() {
    let auth = AuthServer::start().await;
    let svc = TestService::new();
    let service = OAuthServe::service(&svc, &auth.issuer).await;
    let url = service.url();
    let alice = auth.token("alice", RW, &url).await;
    let bob = auth.token("bob", RW, &url).await;
    let call = |token: &str, tool: &'static str, args: Value| {
        let (url, token) = (url.clone(), token.to_string());
        async move { call_2026(&url, Some(&token), tool, args).await }
    };

    let made = structured(&call(&alice, "create_session", json!({"session_id": "analysis"})).await);
    let kernel_id = made["kernel_id"].as_str().unwrap().to_string();
    let ran = structured(
        &call(
            &alice,
            "execute",
            json!({"session_id": "analysis", "code": "secret = 7"}),
        )
        .await,
    );
    let run_id = ran["run_id"].as_str().unwrap().to_string();

    // Bob: alice's session and run do not exist for him, whatever he tries.
    let listed = structured(&call(&bob, "list_sessions", json!({})).await);
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    let named = json!({"session_id": "analysis"});
    for (tool, args, code) in [
        ("get_session", named.clone(), "SESSION_NOT_FOUND"),
        (
            "execute",
            json!({"session_id": "analysis", "code": "secret"}),
            "SESSION_NOT_FOUND",
        ),
        ("interrupt_session", named.clone(), "SESSION_NOT_FOUND"),
        ("get_history", named.clone(), "SESSION_NOT_FOUND"),
        (
            "export_history",
            json!({"session_id": "analysis", "path": "/tmp/x.py", "format": "script"}),
            "SESSION_NOT_FOUND",
        ),
        (
            "fork_session",
            json!({"session_id": "analysis", "new_session_id": "mine"}),
            "SESSION_NOT_FOUND",
        ),
        ("destroy_session", named.clone(), "SESSION_NOT_FOUND"),
        (
            "get_execution",
            json!({"run_id": run_id}),
            "EXECUTION_NOT_FOUND",
        ),
        (
            "cancel_execution",
            json!({"run_id": run_id}),
            "EXECUTION_NOT_FOUND",
        ),
    ] {
        let r = call(&bob, tool, args).await;
        assert_eq!(error_code(&r), code, "bob's {tool}: {}", r.body);
        assert!(
            !r.body.contains("forbidden") && !r.body.contains("belongs"),
            "{}",
            r.body
        );
    }
    // The same name is bob's own, a session of his.
    structured(&call(&bob, "create_session", json!({"session_id": "analysis"})).await);
    let his = structured(
        &call(
            &bob,
            "execute",
            json!({"session_id": "analysis", "code": "'secret' in dir()"}),
        )
        .await,
    );
    assert_eq!(his["result"], "False", "{his}");
    // The Jupyter API shows bob his kernel only.
    let api = format!("http://127.0.0.1:{}/api/kernels", service.port);
    let kernels: Value =
        serde_json::from_str(&request(Method::GET, &api, Some(&bob), &[], None).await.body)
            .unwrap();
    assert_eq!(kernels.as_array().map(Vec::len), Some(1), "{kernels}");
    assert_ne!(kernels[0]["id"], kernel_id.as_str());
    let theirs = request(
        Method::GET,
        &format!("{api}/{kernel_id}"),
        Some(&bob),
        &[],
        None,
    )
    .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    let del = request(
        Method::DELETE,
        &format!("{api}/{kernel_id}"),
        Some(&bob),
        &[],
        None,
    )
    .await;
    assert_eq!(del.status, 404, "{}", del.body);

    // Alice's session is untouched; an admin sees both, each with its owner.
    let still = structured(
        &call(
            &alice,
            "execute",
            json!({"session_id": "analysis", "code": "secret"}),
        )
        .await,
    );
    assert_eq!(still["result"], "7", "{still}");
    let root = auth.token("alice", ADMIN, &url).await;
    let all = structured(&call(&root, "list_sessions", json!({})).await);
    let owners: Vec<String> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}|{}", s["session_id"], s["owner"]))
        .collect();
    assert_eq!(owners.len(), 2, "{all}");
    let bobs = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["owner"].as_str().is_some_and(|o| o.ends_with("#bob")))
        .unwrap_or_else(|| panic!("bob's session with its owner: {all}"));
    let qualified = bobs["session_id"].as_str().unwrap().to_string();
    assert!(qualified.ends_with("/analysis"), "{qualified}");
    let seen = structured(&call(&root, "get_session", json!({"session_id": qualified})).await);
    assert_eq!(seen["status"], "idle", "{seen}");
    for token in [&alice, &bob] {
        structured(&call(token, "destroy_session", json!({"session_id": "analysis"})).await);
    }

    // The audit trail: a line per call, who and what, never code or tokens.
    let cwd = tempfile::tempdir().unwrap();
    let out = crate::common::cli::run(
        &svc,
        cwd.path(),
        &["log", "--audit", "--json", "--lines", "0"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let by = |who: &str, tool: &str, outcome: &str| {
        lines.iter().any(|l| {
            l["principal"].as_str().is_some_and(|p| p.ends_with(who))
                && l["tool"] == tool
                && l["outcome"] == outcome
        })
    };
    assert!(by("#alice", "execute", "ok"), "{}", out.stdout);
    assert!(
        by("#bob", "get_session", "SESSION_NOT_FOUND"),
        "{}",
        out.stdout
    );
    assert!(
        lines.iter().any(|l| l["run"] == run_id.as_str()),
        "{}",
        out.stdout
    );
    let log = format!("{}\n{}", service.stderr(), svc.log_text());
    for secret in [alice.as_str(), bob.as_str(), root.as_str(), "secret = 7"] {
        assert!(!log.contains(secret), "{secret} is in the service's log");
    }
    service.stop().await;
}

#[tokio::test]
async fn session_id_parameters_carry_x_mcp_header_for_routing_by_session() {
    let face = FaceService::start(&[], &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = request(
        Method::POST,
        &face.url("/mcp"),
        Some(&face.token),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        Some(&body),
    )
    .await;
    let tools = result(&r)["tools"].clone();
    let routed: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["inputSchema"]["properties"]["session_id"]["x-mcp-header"] == "Session-Id")
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in ["execute", "get_session", "destroy_session", "get_history"] {
        assert!(routed.contains(&tool), "{tool} is not routable: {routed:?}");
    }
    // A call that names a session without mirroring it is refused; one that mirrors it, as
    // the spec asks, is served.
    let unmirrored = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "get_session", "arguments": {"session_id": "nope"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let refused = request(
        Method::POST,
        &face.url("/mcp"),
        Some(&face.token),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "get_session"),
        ],
        Some(&unmirrored),
    )
    .await;
    assert!(refused.body.contains("-32020"), "{}", refused.body);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "list_sessions", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let listed = request(
        Method::POST,
        &face.url("/mcp"),
        Some(&face.token),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "list_sessions"),
        ],
        Some(&call),
    )
    .await;
    assert_eq!(error_code(&listed), "", "{}", listed.body);
    face.stop().await;
}

/// A raw 2026-07-28 client on a child's stdio: no `initialize`, `_meta` in each request.
struct StdioClient {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl StdioClient {
    fn spawn(svc: &TestService, args: &[&str]) -> StdioClient {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
            .args(args)
            .envs(svc.env())
            .env("VIRTUAL_ENV", crate::common::venv())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kernel-mcp");
        let stdin = child.stdin.take().unwrap();
        let out = tokio::io::BufReader::new(child.stdout.take().unwrap());
        StdioClient {
            child,
            stdin,
            lines: tokio::io::AsyncBufReadExt::lines(out),
            next: 1,
        }
    }

    /// Send `method` with `params` (plus the revision's `_meta`) and return its result.
    async fn request(&mut self, method: &str, mut params: Value) -> Value {
        use tokio::io::AsyncWriteExt;
        let id = self.next;
        self.next += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}});
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = async {
            while let Ok(Some(l)) = self.lines.next_line().await {
                let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
                if v["id"] == id {
                    return v;
                }
            }
            Value::Null
        };
        let v = tokio::time::timeout(Duration::from_secs(120), answer)
            .await
            .expect("an answer");
        assert!(v.get("result").is_some(), "{method}: {v}");
        v["result"].clone()
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

#[tokio::test]
async fn a_2026_client_through_the_relay_gets_the_relays_toolset_and_keeps_its_default() {
    let svc = TestService::new();
    let mut client = StdioClient::spawn(&svc, &["serve", "--shared", "--tools", "all"]);
    let tools = client.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for t in [
        "register_environment",
        "checkpoint_session",
        "renew_session",
        "complete",
    ] {
        assert!(names.contains(&t), "--tools all lists {t}: {names:?}");
    }
    let call = |code: &str| json!({"name": "execute", "arguments": {"code": code}});
    let first = client.request("tools/call", call("x = 42")).await;
    assert_eq!(first["structuredContent"]["status"], "ok", "{first}");
    let second = client.request("tools/call", call("x")).await;
    assert_eq!(second["structuredContent"]["result"], "42", "{second}");
    client.stop().await;
    if let Some(pid) = svc.pid() {
        crate::common::terminate(pid, Duration::from_secs(30));
    }
}

/// `kernel-mcp ARGS` run as uid 65534 (`nobody`) against the service of `svc`, which runs as
/// root: `KERNEL_MCP_SERVICE_UID=0` says whom that client trusts.
async fn as_nobody(svc: &TestService, home: &Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_STATE_HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env("KERNEL_MCP_SOCKET", svc.socket())
        .env("KERNEL_MCP_SERVICE_UID", "0")
        .uid(65534)
        .gid(65534)
        .output()
        .await
        .expect("run kernel-mcp as nobody")
}

#[tokio::test]
async fn two_socket_users_keep_their_sessions_apart_and_the_owner_sees_both() {
    if !nix::unistd::getuid().is_root() {
        crate::common::skip("needs root to run a client as another uid (nobody)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let svc = TestService::new();
    let root_dir = svc
        .socket()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::set_permissions(&root_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut service = svc.start(&["--pool", "python3=0", "--allow-uid", "65534"]);
    let socket = svc.socket();
    assert!(crate::common::wait_until(Duration::from_secs(30), || socket.exists()).await);
    let owner = svc.relay().await;
    owner.create_session("analysis").await;
    owner
        .call(
            "execute",
            json!({"session_id": "analysis", "code": "secret = 1"}),
        )
        .await;

    let home = tempfile::tempdir().unwrap();
    nix::unistd::chown(home.path(), Some(65534.into()), Some(65534.into())).unwrap();
    let out = as_nobody(
        &svc,
        home.path(),
        &["exec", "-s", "analysis", "-c", "secret"],
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "nobody reaches no session of root's: {err}"
    );
    assert!(
        err.contains("SESSION_NOT_FOUND") || err.contains("not found"),
        "{err}"
    );
    let out = as_nobody(
        &svc,
        home.path(),
        &[
            "exec",
            "-s",
            "analysis",
            "--create",
            "-c",
            "'secret' in dir()",
        ],
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "False",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The owner (an admin) sees both, nobody's as uid:65534/analysis.
    let listed = crate::common::structured(&owner.call("list_sessions", json!({})).await);
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert!(
        ids.contains(&"analysis") && ids.contains(&"uid:65534/analysis"),
        "{listed}"
    );
    // Only the service's own user may see its status or stop it.
    for cmd in [&["service", "stop"][..], &["service", "status", "--json"]] {
        let out = as_nobody(&svc, home.path(), cmd).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(err.contains("only the service's own user"), "{err}");
        assert!(out.stdout.is_empty(), "{cmd:?}");
    }
    assert!(svc.pid().is_some(), "the service still runs");
    owner.shutdown().await;
    if let Some(pid) = service.id() {
        crate::common::terminate(pid, Duration::from_secs(30));
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), service.wait()).await;
}
