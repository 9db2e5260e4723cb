//! A 2026-07-28 client on `service --http` (no `initialize`, no `Mcp-Session-Id`): it keeps
//! its principal's `default` across requests, closing a request's response stream
//! interrupts its run, a request's `_meta` log level delivers log messages in its response
//! (none without), and `session_id` parameters carry `x-mcp-header` for routing by session.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{error_code, result, structured};
use crate::common::jupyter::FaceService;
use crate::common::oauth::{Reply, call_2026, request};

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
