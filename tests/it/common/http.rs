//! A minimal MCP-over-streamable-HTTP client for tests: one HTTP/1.0 request per connection,
//! JSON-RPC messages read from the JSON or SSE body, with a bearer token when the server
//! wants one.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An initialized MCP session over HTTP.
pub struct HttpClient {
    port: u16,
    /// Sent as `Authorization: Bearer …` with every request.
    token: Option<String>,
    session: String,
    next_id: std::sync::atomic::AtomicU64,
}

/// POST `body` to `/mcp`; returns the response head and the JSON-RPC messages of its body.
pub async fn post(port: u16, session: Option<&str>, body: &Value) -> (String, Vec<Value>) {
    post_as(port, None, session, body).await
}

/// [`post`] with `Authorization: Bearer <token>` when a token is given.
pub async fn post_as(
    port: u16,
    token: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> (String, Vec<Value>) {
    let session = session.map(|s| ("mcp-session-id", s));
    post_with(port, token, session.as_slice(), body).await
}

/// [`post_as`] with these extra headers (a 2026-07-28 request's `MCP-Protocol-Version` and
/// `Mcp-Method`, a session's `mcp-session-id`).
pub async fn post_with(
    port: u16,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: &Value,
) -> (String, Vec<Value>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let body = body.to_string();
    let mut extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    if let Some(t) = token {
        extra.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let request = format!(
        "POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n{body}",
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
    let messages = body
        .lines()
        .filter_map(|l| {
            l.strip_prefix("data: ")
                .or_else(|| l.starts_with('{').then_some(l))
        })
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (head.to_string(), messages)
}

impl HttpClient {
    /// Initialize an MCP session at `http://127.0.0.1:<port>/mcp`.
    pub async fn connect(port: u16) -> HttpClient {
        HttpClient::connect_as(port, None).await
    }

    /// [`HttpClient::connect`] sending `token` as the bearer token.
    pub async fn connect_as(port: u16, token: Option<&str>) -> HttpClient {
        HttpClient::connect_asking(port, token, json!({})).await
    }

    /// [`HttpClient::connect_as`] with these client `capabilities` (a toolset is asked for as
    /// `{"experimental": {"kernel-mcp": {"tools": "…"}}}`).
    pub async fn connect_asking(port: u16, token: Option<&str>, capabilities: Value) -> HttpClient {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}});
        let (head, _) = post_as(port, token, None, &init).await;
        let session = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no mcp-session-id in {head}"));
        post_as(
            port,
            token,
            Some(&session),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        HttpClient {
            port,
            token: token.map(String::from),
            session,
            next_id: 1.into(),
        }
    }

    /// The session's `Mcp-Session-Id`.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Call a tool; returns its `structuredContent`.
    pub async fn call(&self, tool: &str, args: Value) -> Value {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let (head, msgs) =
            post_as(self.port, self.token.as_deref(), Some(&self.session), &call).await;
        msgs.iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {tool}: {head} {msgs:?}"))["result"]["structuredContent"]
            .clone()
    }
}
