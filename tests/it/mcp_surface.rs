//! The MCP surface: tool list and annotations, server identity, error codes, malformed
//! calls. Most of these start no kernel.

use std::time::Duration;

use crate::common::history::error_code;
use crate::common::*;
use rmcp::service::ServiceError;
use serde_json::{Value, json};

/// Every v1 tool implemented so far.
const TOOLS: &[&str] = &[
    "list_kernels",
    "create_session",
    "fork_session",
    "list_sessions",
    "get_session",
    "interrupt_session",
    "restart_session",
    "destroy_session",
    "execute",
    "get_execution",
    "send_input",
    "cancel_execution",
    "server_info",
    "checkpoint_session",
    "restore_session",
    "register_environment",
    "list_environments",
    "get_environment",
    "validate_environment",
    "remove_environment",
    "renew_session",
    "clear_queue",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_has_every_tool_with_annotations() {
    let server = Server::start_with_args(&["serve", "--tools", "all"]).await;
    let tools = tokio::time::timeout(CALL_TIMEOUT, server.client().list_all_tools())
        .await
        .expect("tools/list hangs")
        .expect("tools/list fails");
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let by_name = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("tool {name} missing from tools/list"))
    };
    for name in TOOLS {
        let t = by_name(name);
        assert!(
            t["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{name} has no description"
        );
        assert_eq!(t["inputSchema"]["type"], "object", "{name}: {t}");
    }
    for name in [
        "list_kernels",
        "list_sessions",
        "get_session",
        "get_execution",
        "server_info",
        "list_environments",
        "get_environment",
    ] {
        assert_eq!(
            by_name(name)["annotations"]["readOnlyHint"],
            true,
            "{name} should be readOnlyHint: true"
        );
    }
    for name in [
        "create_session",
        "execute",
        "destroy_session",
        "restart_session",
    ] {
        assert_ne!(
            by_name(name)["annotations"]["readOnlyHint"],
            true,
            "{name} is not read-only"
        );
    }
    assert_eq!(
        by_name("destroy_session")["annotations"]["destructiveHint"],
        true
    );
    // execute's `code` is required.
    let required = by_name("execute")["inputSchema"]["required"].clone();
    assert!(
        required
            .as_array()
            .is_some_and(|r| r.contains(&json!("code"))),
        "execute.code should be required: {required}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_identifies_itself_as_kernel_mcp() {
    let server = Server::start().await;
    let info = server.client().peer_info().expect("no initialize result");
    let implementation = info
        .server_info
        .as_ref()
        .expect("initialize result without serverInfo");
    assert_eq!(implementation.name, "kernel-mcp");
    assert_eq!(implementation.version, env!("CARGO_PKG_VERSION"));

    let r = server.call("server_info", json!({})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["name"], "kernel-mcp", "{v}");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{v}");
    assert_eq!(v["session_count"], 0, "{v}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_kernels_finds_the_venv_python3() {
    let server = Server::start().await;
    let r = server.call("list_kernels", json!({})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    let python3 = v["kernels"]
        .as_array()
        .and_then(|ks| ks.iter().find(|k| k["name"] == "python3"))
        .unwrap_or_else(|| panic!("no python3 kernel listed: {v}"));
    assert_eq!(python3["language"], "python", "{python3}");
    assert_eq!(v["default_kernel"], "python3", "{v}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_session_is_session_not_found() {
    let server = Server::start().await;
    for (tool, args) in [
        (
            "execute",
            json!({"session_id": "no-such-session", "code": "1"}),
        ),
        ("get_session", json!({"session_id": "no-such-session"})),
        (
            "interrupt_session",
            json!({"session_id": "no-such-session"}),
        ),
        ("restart_session", json!({"session_id": "no-such-session"})),
        ("destroy_session", json!({"session_id": "no-such-session"})),
    ] {
        let r = server.call(tool, args).await;
        assert!(is_error(&r), "{tool}: expected isError: {}", dump(&r));
        let v = structured(&r);
        assert_eq!(v["error_code"], "SESSION_NOT_FOUND", "{tool}: {v}");
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("no-such-session")),
            "{tool}: the message names the session: {v}"
        );
    }
    // Nothing was created along the way.
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kernel_is_kernel_not_found_naming_available_kernels() {
    let server = Server::start().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "typo", "kernel": "pyton3"}),
        )
        .await;
    assert!(is_error(&r), "expected isError: {}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["error_code"], "KERNEL_NOT_FOUND", "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("pyton3"),
        "names the missing kernel: {message}"
    );
    assert!(
        message.contains("python3"),
        "names the available kernels: {message}"
    );
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_run_id_is_execution_not_found() {
    let server = Server::start().await;
    let r = server
        .call("get_execution", json!({"run_id": "no-such-run"}))
        .await;
    assert!(is_error(&r), "expected isError: {}", dump(&r));
    assert_eq!(
        structured(&r)["error_code"],
        "EXECUTION_NOT_FOUND",
        "{}",
        dump(&r)
    );
    server.shutdown().await;
}

/// A malformed call is a tool error or a JSON-RPC error, never a hang or a dead server.
fn assert_rejected(what: &str, outcome: Result<rmcp::model::CallToolResult, ServiceError>) {
    match outcome {
        Ok(r) => assert!(is_error(&r), "{what}: accepted: {}", dump(&r)),
        Err(ServiceError::McpError(_)) => {}
        Err(e) => panic!("{what}: expected a tool or JSON-RPC error, got {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_arguments_are_rejected_and_the_server_keeps_answering() {
    let server = Server::start().await;
    assert_rejected(
        "execute code: 5",
        server.try_call("execute", json!({"code": 5})).await,
    );
    assert_rejected(
        "execute without code",
        server.try_call("execute", json!({"session_id": "x"})).await,
    );
    assert_rejected(
        "get_session session_id: []",
        server
            .try_call("get_session", json!({"session_id": []}))
            .await,
    );
    assert_rejected(
        "unknown tool",
        server.try_call("no_such_tool", json!({})).await,
    );
    assert_rejected(
        "execute wait_s: -1",
        server
            .try_call("execute", json!({"code": "1", "wait_s": -1}))
            .await,
    );
    assert_rejected(
        "create_session with a bad id",
        server
            .try_call("create_session", json!({"session_id": "../../etc"}))
            .await,
    );

    // Wrong argument types are tool errors with the contract's error_code, like any other.
    let r = server.call("execute", json!({"code": 5})).await;
    assert_eq!(
        structured(&r)["error_code"],
        "INVALID_ARGUMENT",
        "{}",
        dump(&r)
    );

    let r = server.call("server_info", json!({})).await;
    assert!(!is_error(&r), "server_info after bad calls: {}", dump(&r));
    assert_eq!(structured(&r)["name"], "kernel-mcp");
    server.shutdown().await;
}

/// A misspelt or guessed parameter is refused, naming the one meant, and nothing runs (it
/// used to be ignored: `timeout` ran with no time limit, `kernel_name` made a python3 session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parameter_the_tool_does_not_have_is_refused_naming_the_closest() {
    let server = Server::start().await;
    let r = server
        .call("execute", json!({"code": "1", "timeout": 1}))
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    assert!(
        text(&r).contains("`timeout`") && text(&r).contains("Did you mean `timeout_s`?"),
        "{}",
        text(&r)
    );
    let r = server
        .call(
            "create_session",
            json!({"session_id": "k", "kernel_name": "bash", "working_dir": "/tmp"}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    assert!(text(&r).contains("`kernel`"), "{}", text(&r));
    // Nothing ran: no session, not even `default`.
    let listed = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    server.shutdown().await;
}

/// The whole `tools/list` result, as JSON text.
async fn tools_list_json(server: &Server) -> String {
    let tools = tokio::time::timeout(CALL_TIMEOUT, server.client().list_all_tools())
        .await
        .expect("tools/list hangs")
        .expect("tools/list fails");
    serde_json::to_string(&json!({ "tools": tools })).expect("serialize")
}

/// Every tool of every toolset declares an object output schema (what each set lists, and
/// its size on the wire, are pinned in `toolsets.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_declares_an_output_schema() {
    for tools in ["all", "minimal", "code"] {
        let server = Server::start_with_args(&["serve", "--tools", tools]).await;
        let text = tools_list_json(&server).await;
        let v: Value = serde_json::from_str(&text).unwrap();
        for t in v["tools"].as_array().unwrap() {
            assert_eq!(
                t["outputSchema"]["type"], "object",
                "{tools}: {}",
                t["name"]
            );
        }
        eprintln!("tools/list (--tools {tools}): {} bytes", text.len());
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trivial_result_is_at_most_80_bytes_of_text_and_says_status_and_run_id() {
    let server = Server::start().await;
    let r = server.call("execute", json!({"code": "1+1"})).await;
    let v = structured(&r);
    let t = text(&r);
    eprintln!("text of 1+1: {} bytes: {t:?}", t.len());
    assert!(t.len() <= 80, "{} bytes: {t:?}", t.len());
    assert!(t.contains("ok"), "{t}");
    assert!(t.contains(v["run_id"].as_str().unwrap()), "{t}");
    assert!(t.ends_with('2'), "{t}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_logging_set_level_the_client_gets_server_log_messages() {
    require_venv();
    let mut raw = raw::RawClient::start().await;
    let set = json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
                     "params": {"level": "info"}});
    raw.write(&format!("{set}\n")).await;
    let answer = raw.read(1).await;
    assert!(answer.get("result").is_some(), "setLevel refused: {answer}");
    raw.write(&raw::call_line(
        2,
        "create_session",
        json!({"session_id": "logs"}),
    ))
    .await;
    let created = raw.read(2).await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    let note = raw
        .notification(Duration::from_secs(20), |m| {
            m["method"] == "notifications/message"
                && m["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("kernel ready"))
        })
        .await
        .expect("a 'kernel ready' log message");
    assert_eq!(note["params"]["level"], "info", "{note}");
    assert!(raw.close().await, "server exits on stdin EOF");
}
