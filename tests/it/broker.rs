//! The broker through the real binary (docs/broker.md): cells call the tools of the reference
//! MCP server (`server-everything`, stdio and streamable HTTP) with `from kernel_mcp import
//! mcp`; the grant, unknown servers, fail-closed variables, the journal and `explain` without
//! secrets. Lifecycle (cancellation, sharing, restarts, `--mcp-scope none`, the recursion
//! guard) is in `broker_lifecycle`.

use serde_json::json;

use crate::common::Server;
use crate::common::broker::{everything_entry, run, stdout_of, write_registry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_call_acall_and_text_reach_the_reference_server() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
print(mcp.help())
r = mcp.call("everything", "echo", arguments={"message": "hi there"})
print("TEXT", mcp.text(r))
print("KEYS", sorted(r), r["isError"])
print(mcp.help("everything"))
schema = mcp.help("everything", "echo")
print("SCHEMA", schema["inputSchema"]["properties"]["message"]["type"], schema["granted"])
r = mcp.call("everything", "get-sum", a=2, b=3)
print("SUM", mcp.text(r))
"#,
    )
    .await;
    assert!(
        out.contains("everything") && out.contains("every tool"),
        "{out}"
    );
    assert!(out.contains("TEXT Echo: hi there"), "{out}");
    assert!(
        out.contains("KEYS ['content', 'isError', 'structuredContent'] False"),
        "{out}"
    );
    assert!(out.contains("echo") && out.contains("get-sum"), "{out}");
    assert!(out.contains("SCHEMA string True"), "{out}");
    assert!(out.contains("SUM") && out.contains('5'), "{out}");

    // acall: concurrent calls on the kernel's event loop; and a call from a thread while
    // the cell that started it runs.
    let out = stdout_of(
        &server,
        "s",
        r#"
import asyncio, threading
rs = await asyncio.gather(*(mcp.acall("everything", "echo", arguments={"message": f"m{i}"}) for i in range(5)))
print("ACALL", [mcp.text(r) for r in rs])
got = []
t = threading.Thread(target=lambda: got.append(mcp.text(mcp.call("everything", "echo", message="from a thread"))))
t.start(); t.join(60)
print("THREAD", got)
"#,
    )
    .await;
    assert!(
        out.contains("ACALL ['Echo: m0', 'Echo: m1', 'Echo: m2', 'Echo: m3', 'Echo: m4']"),
        "{out}"
    );
    assert!(out.contains("THREAD ['Echo: from a thread']"), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_allowed_tools_raises_permission_error_naming_the_grant() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({"allowedTools": ["echo"]}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
print(mcp.text(mcp.call("everything", "echo", message="allowed")))
try:
    mcp.call("everything", "get-sum", a=1, b=2)
except PermissionError as e:
    print("DENIED", e)
print("JOURNAL", [(e["tool"], e["outcome"]) for e in mcp.journal()])
print(mcp.help("everything"))
"#,
    )
    .await;
    assert!(out.contains("Echo: allowed"), "{out}");
    assert!(
        out.contains("DENIED")
            && out.contains("get-sum")
            && out.contains(r#"allowedTools is ["echo"]"#),
        "{out}"
    );
    // The denied call never reached the server: only the echo is journalled.
    assert!(out.contains("JOURNAL [('echo', 'ok')]"), "{out}");
    assert!(
        out.contains("Not granted (outside allowedTools):") && out.contains("get-sum"),
        "{out}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_server_is_an_error_naming_the_configured_ones() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
try:
    mcp.call("nope", "echo", message="x")
except LookupError as e:
    print("UNKNOWN", type(e).__name__, e.kind, e)
print("EXPLAIN", mcp.explain("nope")["fix"])
"#,
    )
    .await;
    assert!(
        out.contains("UNKNOWN")
            && out.contains("unknown_server")
            && out.contains("\"nope\"")
            && out.contains("Configured: everything"),
        "{out}"
    );
    assert!(out.contains("EXPLAIN Add \"nope\""), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_variable_fails_closed_and_ordinary_execution_goes_on() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({"env": {"API_KEY": "${KERNEL_MCP_TEST_SURELY_UNSET}"}}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
print("SUM", 1 + 1)
try:
    mcp.call("everything", "echo", message="x")
except mcp.BrokerError as e:
    print("REFUSED", e.kind, e)
print("HELP", mcp.help())
print("FIX", mcp.explain("everything")["fix"])
"#,
    )
    .await;
    assert!(out.contains("SUM 2"), "{out}");
    assert!(
        out.contains("REFUSED config")
            && out.contains("${KERNEL_MCP_TEST_SURELY_UNSET}")
            && out.contains("server \"everything\""),
        "{out}"
    );
    assert!(
        out.contains("HELP The MCP registry") && out.contains("cannot be used"),
        "{out}"
    );
    assert!(
        out.contains("FIX Fix") && out.contains("KERNEL_MCP_TEST_SURELY_UNSET"),
        "{out}"
    );
    // Nothing was started for an invalid registry.
    assert!(
        crate::common::broker::descendants_running(server.pid(), "server-everything").is_empty()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_records_ok_error_and_outcome_unknown_without_payloads() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
mcp.call("everything", "echo", message="secret-payload-1")
try:
    mcp.call("everything", "echo", arguments={"wrong": "secret-payload-2"})
except mcp.ToolError as e:
    print("TOOLERROR", e.result is not None or e.error is not None)
try:
    mcp.call("everything", "trigger-long-running-operation", arguments={"duration": 30, "steps": 30}, timeout=1)
except TimeoutError as e:
    print("TIMEOUT", e.kind)
j = mcp.journal()
print("OUTCOMES", [e["outcome"] for e in j])
print("FIELDS", sorted(j[0]))
print("RAW", j)
"#,
    )
    .await;
    assert!(out.contains("TOOLERROR True"), "{out}");
    assert!(out.contains("TIMEOUT timeout"), "{out}");
    assert!(
        out.contains("OUTCOMES ['ok', 'error', 'outcome_unknown']"),
        "{out}"
    );
    assert!(
        out.contains("FIELDS ['ms', 'outcome', 'server', 'started', 'tool']"),
        "{out}"
    );
    let raw = out.lines().find(|l| l.starts_with("RAW")).unwrap();
    assert!(!raw.contains("secret-payload"), "{raw}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_every_other_output_never_show_a_credential() {
    const TOKEN: &str = "fake-token-7f3a9c1e5b";
    let node = crate::common::broker::node();
    let js = crate::common::broker::everything_js();
    // The reference server over streamable HTTP, on a free port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = tokio::process::Command::new(&node)
        .args([js.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let up = crate::common::wait_until(std::time::Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    assert!(
        up,
        "server-everything streamableHttp did not listen on {port}"
    );

    let server = Server::start_with(&[("KERNEL_MCP_TEST_FAKE_TOKEN", TOKEN.as_ref())], &[]).await;
    write_registry(
        server.workdir(),
        json!({
            "web": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp"),
                    "headers": {"Authorization": "Bearer ${KERNEL_MCP_TEST_FAKE_TOKEN}", "X-Api-Key": "${KERNEL_MCP_TEST_FAKE_TOKEN}"}},
            "local": everything_entry(json!({"env": {"API_KEY": "${KERNEL_MCP_TEST_FAKE_TOKEN}"}})),
        }),
    );
    server.create_session("s").await;
    let before = run(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
e = mcp.explain("web")
print("STATE", e["state"]["state"], "CREDS", e["credentials"], "VARS", e["variables"])
print(e)
print(mcp.explain("local", "echo"))
print(mcp.help())
"#,
    )
    .await;
    let out = before["stdout"].as_str().unwrap_or_default().to_string();
    assert_eq!(before["status"], "ok", "{before:#}");
    assert!(
        out.contains("STATE not_started")
            && out.contains("'headers.Authorization': 'present'")
            && out.contains("'KERNEL_MCP_TEST_FAKE_TOKEN': 'present'"),
        "{out}"
    );
    // A call through the HTTP entry works (its headers reach the server), and the explanation
    // of a connected server still holds no value.
    let after = run(
        &server,
        "s",
        r#"
print(mcp.text(mcp.call("web", "echo", message="over http")))
print(mcp.text(mcp.call("local", "echo", message="over stdio")))
print(mcp.explain("web"))
print(mcp.explain("local"))
print(mcp.journal())
"#,
    )
    .await;
    let out2 = after["stdout"].as_str().unwrap_or_default().to_string();
    assert_eq!(after["status"], "ok", "{after:#}");
    assert!(
        out2.contains("Echo: over http") && out2.contains("Echo: over stdio"),
        "{out2}"
    );
    for (what, text) in [
        ("first cell", before.to_string()),
        ("second cell", after.to_string()),
        ("server log", server.stderr()),
    ] {
        assert!(!text.contains(TOKEN), "{what} shows the token:\n{text}");
    }
    server.shutdown().await;
    let _ = http.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_come_back_whole_with_structured_content() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let info = server.create_session("s").await;
    assert_eq!(info["language"], "python");
    let r = run(
        &server,
        "s",
        r#"
from kernel_mcp import mcp
r = mcp.call("everything", "get-structured-content", location="New York")
print(sorted(r["structuredContent"]), r["content"][0]["type"])
"#,
    )
    .await;
    let out = r["stdout"].as_str().unwrap_or_default();
    assert!(out.contains("temperature") && out.contains("text"), "{r:#}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interpreter_session_gets_the_broker_and_a_bash_session_does_not() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let python = crate::common::venv().join("bin/python");
    let r = server
        .call(
            "create_session",
            json!({"session_id": "py", "python": python.display().to_string()}),
        )
        .await;
    assert!(!crate::common::is_error(&r), "{}", crate::common::text(&r));
    let out = stdout_of(
        &server,
        "py",
        "from kernel_mcp import mcp; print(mcp.text(mcp.call('everything', 'echo', message='interp')))",
    )
    .await;
    assert!(out.contains("Echo: interp"), "{out}");
    server.create_session_on("sh", "bash").await;
    let out = stdout_of(&server, "sh", "echo \"[${KERNEL_MCP_ENDPOINT:-none}]\"").await;
    assert!(out.contains("[none]"), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_over_256_kib_are_refused_by_the_helper_and_by_the_broker() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        r#"
import kernel_mcp
from kernel_mcp import mcp
big = "x" * (300 * 1024)
try:
    mcp.call("everything", "echo", message=big)
except ValueError as e:
    print("HELPER", e.kind)
# The broker checks too, whatever the client.
try:
    kernel_mcp._request("call", server="everything", tool="echo", arguments={"message": big})
except mcp.BrokerError as e:
    print("BROKER", e.kind, e)
print("JOURNAL", mcp.journal())
"#,
    )
    .await;
    assert!(out.contains("HELPER limit"), "{out}");
    assert!(
        out.contains("BROKER limit") && out.contains("262144"),
        "{out}"
    );
    assert!(out.contains("JOURNAL []"), "{out}");
    server.shutdown().await;
}
