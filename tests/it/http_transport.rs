//! The streamable HTTP transport: a real `kernel-mcp serve --transport http` on a free loopback
//! port, driven with raw HTTP/1.0 requests (one per connection), runs code in a real ipykernel,
//! rejects a foreign Host header (DNS-rebinding protection), and on SIGTERM shuts its kernels
//! down and exits.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// POST `body` to `/mcp`; returns (status code, headers text, JSON-RPC messages in the body).
async fn post(
    port: u16,
    host: &str,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, Vec<Value>) {
    post_with(port, host, session, "", body).await
}

/// [`post`] with extra header lines (each ending in `\r\n`).
async fn post_with(
    port: u16,
    host: &str,
    session: Option<&str>,
    extra_headers: &str,
    body: &Value,
) -> (u16, String, Vec<Value>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let body = body.to_string();
    let session_header = session
        .map(|s| format!("mcp-session-id: {s}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{session_header}{extra_headers}\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(60),
        stream.read_to_string(&mut response),
    )
    .await
    .expect("the server answers within 60 s")
    .expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let messages = body
        .lines()
        .filter_map(|l| {
            l.strip_prefix("data: ")
                .or_else(|| l.starts_with('{').then_some(l))
        })
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (status, head.to_string(), messages)
}

fn venv() -> std::path::PathBuf {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv");
    assert!(
        venv.join("bin/python").exists(),
        "no .venv: run `make test` (it creates .venv with ipykernel)"
    );
    venv
}

#[tokio::test]
async fn http_transport_runs_code_checks_host_and_cleans_up_on_sigterm() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["serve", "--transport", "http", "--port", "0"])
        .env("VIRTUAL_ENV", venv())
        .env("KERNEL_MCP_LOG", "kernel_mcp=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kernel-mcp");
    // The server logs the address it bound.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port: u16 = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                return rest.split('/').next().and_then(|p| p.parse().ok());
            }
        }
        None
    })
    .await
    .expect("the server announces its address")
    .expect("a port in the announcement");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, head, msgs) = post(port, "127.0.0.1", None, &init).await;
    assert_eq!(status, 200, "{head}");
    assert_eq!(msgs[0]["result"]["serverInfo"]["name"], "kernel-mcp");
    let session = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(|_| l[16..].trim().to_string())
        })
        .expect("an mcp-session-id header");
    post(
        port,
        "127.0.0.1",
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "create_session", "arguments": {"session_id": "web"}}});
    let (_, _, msgs) = post(port, "localhost", Some(&session), &call).await;
    let pid = msgs
        .iter()
        .find(|m| m["id"] == 2)
        .expect("create_session answer")["result"]["structuredContent"]["pid"]
        .as_i64()
        .expect("a kernel pid");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"session_id": "web", "code": "6 * 7"}}});
    let (_, _, msgs) = post(port, "127.0.0.1", Some(&session), &call).await;
    let result =
        &msgs.iter().find(|m| m["id"] == 3).expect("execute answer")["result"]["structuredContent"];
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["result"], "42");

    let (status, _, _) = post(port, "evil.example.com", Some(&session), &call).await;
    assert_eq!(status, 403, "a foreign Host header is refused");
    let (status, _, _) = post_with(
        port,
        "127.0.0.1",
        Some(&session),
        "Origin: http://evil.example\r\n",
        &call,
    )
    .await;
    assert_eq!(status, 403, "a page from a foreign origin is refused");
    let (status, _, _) = post_with(
        port,
        "127.0.0.1",
        Some(&session),
        "Origin: http://localhost:3000\r\n",
        &call,
    )
    .await;
    assert_eq!(status, 200, "a page served from this machine is accepted");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("exits after SIGTERM");
    assert!(exit.is_ok());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "kernel {pid} outlived the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Start `kernel-mcp serve --transport http --port 0` plus `args`; returns the child and the
/// port it announced.
async fn start_http(
    args: &[&str],
) -> (tokio::process::Child, u16, tokio::task::JoinHandle<String>) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["serve", "--transport", "http", "--port", "0"])
        .args(args)
        .env("VIRTUAL_ENV", venv())
        .env("KERNEL_MCP_LOG", "kernel_mcp=debug")
        .env_remove("KERNEL_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kernel-mcp");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    let port: u16 = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            log.push_str(&line);
            log.push('\n');
            if let Some(Ok(p)) = line
                .split("/mcp")
                .next()
                .and_then(|l| l.rsplit(':').next())
                .map(str::parse)
            {
                return Some(p);
            }
        }
        None
    })
    .await
    .expect("the server announces its address")
    .expect("a port in the announcement");
    let rest = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    (child, port, rest)
}

/// Send `request` as is on a fresh connection; returns (status, head, body).
async fn send_raw(port: u16, request: String) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(60),
        stream.read_to_string(&mut response),
    )
    .await
    .expect("the server answers within 60 s")
    .expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

#[tokio::test]
async fn with_a_token_only_the_right_bearer_header_gets_in_and_the_token_is_never_logged() {
    let token = "s3cret-Token-4711";
    let (mut child, port, log) = start_http(&["--token", token]).await;
    let init = initialize();
    let (status, _, _) = post(port, "127.0.0.1", None, &init).await;
    assert_eq!(status, 401, "no Authorization header");
    let (status, _, _) = post_with(
        port,
        "127.0.0.1",
        None,
        "Authorization: Bearer wrong\r\n",
        &init,
    )
    .await;
    assert_eq!(status, 401, "a wrong token");
    let (status, head, msgs) = post_with(
        port,
        "127.0.0.1",
        None,
        &format!("Authorization: Bearer {token}\r\n"),
        &init,
    )
    .await;
    assert_eq!(status, 200, "{head}");
    assert_eq!(msgs[0]["result"]["serverInfo"]["name"], "kernel-mcp");
    child.start_kill().expect("kill");
    let _ = child.wait().await;
    let log = log.await.expect("log");
    assert!(!log.contains(token), "the token appears in the log:\n{log}");
}

#[tokio::test]
async fn a_non_loopback_bind_without_a_token_exits_at_once_saying_how_to_set_one() {
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
            .args([
                "serve",
                "--transport",
                "http",
                "--host",
                "0.0.0.0",
                "--port",
                "0",
            ])
            .env("VIRTUAL_ENV", venv())
            .env_remove("KERNEL_MCP_TOKEN")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("exits at once")
    .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--token") && err.contains("KERNEL_MCP_TOKEN"),
        "{err}"
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_rpc_is_400_and_deleting_an_unknown_session_is_404() {
    let (mut child, port, _log) = start_http(&[]).await;
    let body = "{not json";
    let (status, head, _) = send_raw(
        port,
        format!(
            "POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert_eq!(status, 400, "{head}");
    let (status, head, _) = send_raw(
        port,
        "DELETE /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nmcp-session-id: no-such-session\r\n\r\n"
            .to_string(),
    )
    .await;
    assert_eq!(status, 404, "{head}");
    child.start_kill().expect("kill");
    let _ = child.wait().await;
}
