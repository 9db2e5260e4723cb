//! Toolsets (`--tools`, docs/tools.md, "Toolsets"): what each set lists, how many bytes its
//! `tools/list` takes as a client receives it (the raw JSON-RPC line over stdio, envelope
//! included, in both protocol eras), and that a tool or parameter outside the set is refused.
//! No kernel starts here.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::*;

/// The `tools/list` response line of `kernel-mcp serve --tools <tools>`, as the bytes the
/// client reads (without the newline), in the legacy era (after `initialize`, 2025-11-25)
/// and in the stateless one (2026-07-28, `_meta` on the request; a server of its own, since
/// the first request fixes a connection's era); and the instructions of `initialize`.
async fn raw_tools_list(tools: &str) -> (String, String, String) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "toolsets-test", "version": "1"}}});
    let legacy = exchange(
        tools,
        &[
            init,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ],
    )
    .await;
    let modern = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let modern = exchange(tools, &[modern]).await;
    let init: Value = serde_json::from_str(&legacy[0]).unwrap();
    let instructions = init["result"]["instructions"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (legacy[1].clone(), modern[0].clone(), instructions)
}

/// Send `messages` to a fresh `serve --tools <tools>`, one line each, and return the lines
/// it answers with (one per request).
async fn exchange(tools: &str, messages: &[Value]) -> Vec<String> {
    exchange_with(&["serve", "--tools", tools], &[], messages).await
}

/// [`exchange`] with kernel-mcp's arguments and extra environment.
async fn exchange_with(
    args: &[&str],
    env: &[(&str, std::ffi::OsString)],
    messages: &[Value],
) -> Vec<String> {
    let workdir = tempfile::tempdir().unwrap();
    let mut child = server_command(workdir.path())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kernel-mcp");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = Vec::new();
    for m in messages {
        stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
        if m.get("id").is_some() {
            let line = tokio::time::timeout(CALL_TIMEOUT, lines.next_line())
                .await
                .expect("no answer from kernel-mcp")
                .expect("read stdout")
                .expect("kernel-mcp closed stdout");
            answers.push(line);
        }
    }
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    answers
}

/// Tool names of a `tools/list` response line, sorted.
fn names(line: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(line).expect("a JSON-RPC line");
    let mut names: Vec<String> = v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {line}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

fn sorted(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Checks one toolset: its exact tool names in both eras and its size on the wire.
async fn check(tools: &str, want: &[&str], max_bytes: usize) -> String {
    let (legacy, modern, instructions) = raw_tools_list(tools).await;
    assert_eq!(names(&legacy), sorted(want), "--tools {tools}");
    assert_eq!(names(&modern), sorted(want), "--tools {tools} (2026-07-28)");
    eprintln!(
        "--tools {tools}: tools/list is {} bytes on the wire ({} in 2026-07-28), {} tools",
        legacy.len(),
        modern.len(),
        want.len()
    );
    for (era, line) in [("2025-11-25", &legacy), ("2026-07-28", &modern)] {
        assert!(
            line.len() < max_bytes,
            "--tools {tools} ({era}): tools/list is {} bytes on the wire, over {max_bytes}",
            line.len()
        );
    }
    instructions
}

/// The caps: 2 % over each set's `tools/list` at 484dafd (legacy era, envelope included), the
/// figures issue 48 measures growth from: default 13 981 bytes, minimal 3 046, code 2 679,
/// `all` 23 437 (its 32 tools then, [`TOOLS_AT_484DAFD`]). Both eras must fit.
const DEFAULT_CAP: usize = 14_261;
const MINIMAL_CAP: usize = 3_107;
const CODE_CAP: usize = 2_733;
const TOOLS_AT_484DAFD_CAP: usize = 23_906;

/// The tools `--tools all` listed at 484dafd; tools added since are growth of their own.
const TOOLS_AT_484DAFD: [&str; 32] = [
    "cancel_execution",
    "checkpoint_session",
    "clear_queue",
    "complete",
    "create_session",
    "delete_history",
    "destroy_session",
    "execute",
    "execute_file",
    "export_history",
    "fork_session",
    "get_environment",
    "get_execution",
    "get_history",
    "get_session",
    "inspect",
    "install_packages",
    "interrupt_session",
    "is_complete",
    "list_environments",
    "list_kernels",
    "list_sessions",
    "mirror_notebook",
    "register_environment",
    "remove_environment",
    "renew_session",
    "rerun_history",
    "restart_session",
    "restore_session",
    "send_input",
    "server_info",
    "validate_environment",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_toolset_lists_the_everyday_tools_in_under_16_kb() {
    require_venv();
    let instructions = check("default", &kernel_mcp::mcp::DEFAULT_TOOLS, DEFAULT_CAP).await;
    assert!(
        !instructions.contains("kernel_mcp import"),
        "{instructions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_toolset_is_under_5_kb_on_the_wire() {
    require_venv();
    check("minimal", &kernel_mcp::mcp::MINIMAL_TOOLS, MINIMAL_CAP).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_toolset_is_four_tools_under_4_kb_pointing_to_the_broker() {
    require_venv();
    let instructions = check(
        "code",
        &[
            "execute",
            "get_execution",
            "send_input",
            "interrupt_session",
        ],
        CODE_CAP,
    )
    .await;
    assert!(
        instructions.contains("from kernel_mcp import mcp"),
        "code mode must say how to reach other tools: {instructions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_lists_every_tool_and_a_named_set_adds_its_tools() {
    require_venv();
    let (line, _, _) = raw_tools_list("all").await;
    let all = names(&line);
    let mut want: Vec<&str> = kernel_mcp::mcp::DEFAULT_TOOLS.to_vec();
    for set in kernel_mcp::mcp::NamedSet::ALL {
        want.extend(set.tools());
    }
    assert_eq!(all, sorted(&want));
    // The same line with only the tools of 484dafd (the length of a JSON text does not depend
    // on the order of its keys).
    let mut old: Value = serde_json::from_str(&line).unwrap();
    old["result"]["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| TOOLS_AT_484DAFD.iter().any(|n| t["name"] == *n));
    let old_bytes = old.to_string().len();
    eprintln!(
        "--tools all: tools/list is {} bytes on the wire, {} tools; {old_bytes} bytes for the {} of 484dafd",
        line.len(),
        all.len(),
        TOOLS_AT_484DAFD.len()
    );
    assert!(
        TOOLS_AT_484DAFD
            .iter()
            .all(|n| all.contains(&n.to_string())),
        "a tool of 484dafd is gone from --tools all"
    );
    assert!(
        old_bytes < TOOLS_AT_484DAFD_CAP,
        "--tools all: the tools of 484dafd take {old_bytes} bytes, over {TOOLS_AT_484DAFD_CAP}"
    );

    let (line, _, _) = raw_tools_list("default,environments,checkpoints").await;
    let mut want = kernel_mcp::mcp::DEFAULT_TOOLS.to_vec();
    want.extend(kernel_mcp::mcp::NamedSet::Environments.tools());
    want.extend(kernel_mcp::mcp::NamedSet::Checkpoints.tools());
    assert_eq!(names(&line), sorted(&want));
}

/// `execute_file`'s input schema in a `tools/list` line.
fn execute_file_params(line: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(line).unwrap();
    let tool = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "execute_file")
        .expect("execute_file listed")
        .clone();
    tool["inputSchema"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_runs_are_a_named_set_of_their_own() {
    require_venv();
    let (default, _, _) = raw_tools_list("default").await;
    assert!(!execute_file_params(&default).contains(&"mode".to_string()));
    let (fresh, _, _) = raw_tools_list("default,fresh").await;
    assert!(execute_file_params(&fresh).contains(&"mode".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_or_parameter_outside_the_toolset_is_refused() {
    for (tools, outside) in [
        ("default", "register_environment"),
        ("default", "checkpoint_session"),
        ("default", "renew_session"),
        ("minimal", "list_kernels"),
        ("code", "create_session"),
        ("code", "restart_session"),
    ] {
        let server = Server::start_with_args(&["serve", "--tools", tools]).await;
        let r = server
            .try_call(
                outside,
                json!({"session_id": "x", "name": "x", "path": "x"}),
            )
            .await;
        assert!(
            r.is_err(),
            "{outside} must be unknown to tools/call with --tools {tools}: {:?}",
            r.map(|r| dump(&r))
        );
        server.shutdown().await;
    }
    // A parameter of a named set: refused with the set's name, before any kernel starts.
    let server = Server::start_with_args(&["serve", "--tools", "default"]).await;
    let r = server
        .call("execute_file", json!({"path": "x.py", "mode": "fresh"}))
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["error_code"], "INVALID_ARGUMENT", "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("fresh") && message.contains("--tools default,fresh"),
        "{message}"
    );
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "no session was started");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_may_ask_for_another_toolset_in_its_capabilities() {
    require_venv();
    // What the CLI sends to reach every tool of the shared service.
    let init = serde_json::to_value(kernel_mcp::mcp::toolset::client_config(
        kernel_mcp::mcp::Toolset::all(),
    ))
    .unwrap();
    let answers = exchange(
        "default",
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "list_environments", "arguments": {}}}),
        ],
    )
    .await;
    assert!(names(&answers[1]).contains(&"renew_session".to_string()));
    let call: Value = serde_json::from_str(&answers[2]).unwrap();
    assert!(
        call["result"]["structuredContent"]["environments"].is_array(),
        "{call}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_asks_the_shared_service_for_its_own_toolset() {
    require_venv();
    let svc = crate::common::service::TestService::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "toolsets-test", "version": "1"}}});
    let messages = [
        init,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    // The first relay starts the service (with the default toolset); each lists its own.
    let minimal = exchange_with(&["--shared", "--tools", "minimal"], &svc.env(), &messages).await;
    assert_eq!(names(&minimal[1]), sorted(&kernel_mcp::mcp::MINIMAL_TOOLS));
    // `default` asks for nothing: the service's own (the default too).
    let everyday = exchange_with(&["--shared", "--tools", "default"], &svc.env(), &messages).await;
    assert_eq!(names(&everyday[1]), sorted(&kernel_mcp::mcp::DEFAULT_TOOLS));
    // Dropping the service stops it.
    drop(svc);
}
