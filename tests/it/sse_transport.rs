//! The legacy HTTP+SSE transport (MCP 2024-11-05) driven by a raw client: GET `/sse`, read
//! the `endpoint` event, POST JSON-RPC there, read the answers from the stream; initialize,
//! list tools and run `1+1` in a real ipykernel. The bearer token guards it like `/mcp`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

fn venv() -> std::path::PathBuf {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv");
    assert!(
        venv.join("bin/python").exists(),
        "no .venv: run `make test`"
    );
    venv
}

/// Start `serve --transport sse --port 0 <args>`; the child and its port.
async fn start(args: &[&str]) -> (tokio::process::Child, u16) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["serve", "--transport", "sse", "--port", "0"])
        .args(args)
        .env("VIRTUAL_ENV", venv())
        .env("KERNEL_MCP_LOG", "kernel_mcp=info")
        .env_remove("KERNEL_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kernel-mcp");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                return rest.split('/').next().and_then(|p| p.parse().ok());
            }
        }
        None
    })
    .await
    .expect("the server announces its address")
    .expect("a port");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// POST `body` to `path`; the status code.
async fn post(port: u16, path: &str, body: &Value) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let body = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut response = String::new();
    s.read_to_string(&mut response).await.expect("read");
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The next SSE event on `stream`: (event name, data).
async fn next_event(stream: &mut tokio::io::Lines<BufReader<TcpStream>>) -> (String, String) {
    let mut name = String::new();
    let mut data = String::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(60), stream.next_line())
            .await
            .expect("an event within 60 s")
            .expect("read")
            .expect("stream open");
        if line.is_empty() {
            if !data.is_empty() {
                return (name, data);
            }
            continue;
        }
        if let Some(v) = line.strip_prefix("event:") {
            name = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
}

/// The `message` event answering request `id`.
async fn answer(stream: &mut tokio::io::Lines<BufReader<TcpStream>>, id: i64) -> Value {
    loop {
        let (name, data) = next_event(stream).await;
        if name != "message" {
            continue;
        }
        let v: Value = serde_json::from_str(&data).expect("JSON in a message event");
        if v["id"] == id {
            return v;
        }
    }
}

#[tokio::test]
async fn a_2024_11_05_client_initializes_lists_tools_and_runs_code_over_sse() {
    let (mut child, port) = start(&[]).await;
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.write_all(b"GET /sse HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        .await
        .expect("write");
    let mut events = BufReader::new(s).lines();
    let status = events.next_line().await.unwrap().unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let (name, endpoint) = next_event(&mut events).await;
    assert_eq!(name, "endpoint");
    assert!(endpoint.starts_with("/messages?session_id="), "{endpoint}");

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}});
    assert_eq!(post(port, &endpoint, &init).await, 202);
    let r = answer(&mut events, 1).await;
    assert_eq!(r["result"]["serverInfo"]["name"], "kernel-mcp", "{r}");
    assert_eq!(r["result"]["protocolVersion"], "2024-11-05", "{r}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(port, &endpoint, &initialized).await, 202);

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(post(port, &endpoint, &list).await, 202);
    let r = answer(&mut events, 2).await;
    let tools = r["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "execute"), "{r}");

    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "1+1"}}});
    assert_eq!(post(port, &endpoint, &call).await, 202);
    let r = answer(&mut events, 3).await;
    assert_eq!(r["result"]["structuredContent"]["result"], "2", "{r}");

    assert_eq!(post(port, "/messages?session_id=nope", &list).await, 404);
    let mut bad = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let body = "{oops";
    bad.write_all(
        format!(
            "POST {endpoint} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut response = String::new();
    bad.read_to_string(&mut response).await.unwrap();
    assert!(
        response.starts_with("HTTP/1.0 400") || response.starts_with("HTTP/1.1 400"),
        "{response}"
    );
    child.start_kill().expect("kill");
    let _ = child.wait().await;
}

#[tokio::test]
async fn sse_needs_the_token_and_refuses_a_foreign_host() {
    let (mut child, port) = start(&["--token", "tok"]).await;
    let get = |extra: &'static str, host: &'static str| async move {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(format!("GET /sse HTTP/1.0\r\nHost: {host}\r\n{extra}\r\n").as_bytes())
            .await
            .unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).await.unwrap();
        line
    };
    assert!(get("", "127.0.0.1").await.contains(" 401 "));
    assert!(
        get("Authorization: Bearer nope\r\n", "127.0.0.1")
            .await
            .contains(" 401 ")
    );
    assert!(
        get("Authorization: Bearer tok\r\n", "evil.example")
            .await
            .contains(" 403 ")
    );
    assert!(
        get("Authorization: Bearer tok\r\n", "127.0.0.1")
            .await
            .contains(" 200 ")
    );
    child.start_kill().expect("kill");
    let _ = child.wait().await;
}
