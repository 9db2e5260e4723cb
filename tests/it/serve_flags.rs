//! Every option of `serve` works without the word `serve` (docs/cli.md), as MCP client configs
//! write them right after the command, and so does configuration by environment alone; the
//! real binary is asked for `tools/list` to show the option took. (`--pool` without `serve`:
//! `kernel_secrets.rs`.)

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::common::http::post_as;
use crate::common::*;

/// The tool names a server lists.
async fn tool_names(server: &Server) -> Vec<String> {
    let tools = server.client().list_all_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    names
}

fn minimal() -> Vec<String> {
    let mut m: Vec<String> = [
        "create_session",
        "execute",
        "get_execution",
        "send_input",
        "interrupt_session",
        "restart_session",
        "list_sessions",
    ]
    .map(String::from)
    .to_vec();
    m.sort();
    m
}

#[tokio::test]
async fn tools_minimal_works_without_the_word_serve_and_from_the_environment_alone() {
    let server = Server::start_with_args(&["--tools", "minimal"]).await;
    assert_eq!(tool_names(&server).await, minimal());
    server.shutdown().await;
    let server = Server::start_with(&[("KERNEL_MCP_TOOLS", "minimal".as_ref())], &[]).await;
    assert_eq!(tool_names(&server).await, minimal());
    server.shutdown().await;
}

/// Start `kernel-mcp ARGS` with `env` on HTTP, and return it with the port its log announces.
async fn start_http(args: &[&str], env: &[(&str, &str)]) -> (tokio::process::Child, u16) {
    require_venv();
    let workdir = tempfile::tempdir().unwrap();
    let mut cmd = server_command(workdir.path());
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn kernel-mcp");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let port = tokio::time::timeout(Duration::from_secs(60), async {
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
    tokio::spawn(async move {
        let _workdir = workdir;
        while let Ok(Some(_)) = lines.next_line().await {}
    });
    (child, port)
}

/// `tools/list` over HTTP: initialize, then list, on one MCP session.
async fn http_tool_names(port: u16) -> Vec<String> {
    let client = crate::common::http::HttpClient::connect(port).await;
    let session = client.session();
    let (_, msgs) = post_as(
        port,
        None,
        Some(session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let list: &Value = msgs
        .iter()
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("no tools/list answer: {msgs:?}"));
    let mut names: Vec<String> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    names
}

async fn stop(mut child: tokio::process::Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_http_transport_works_without_the_word_serve_and_from_the_environment_alone() {
    let (child, port) = start_http(
        &["--transport", "http", "--port", "0", "--tools", "minimal"],
        &[],
    )
    .await;
    assert_eq!(http_tool_names(port).await, minimal());
    stop(child).await;
    let env = [
        ("MCP_TRANSPORT", "streamable-http"),
        ("MCP_PORT", "0"),
        ("KERNEL_MCP_TOOLS", "minimal"),
    ];
    let (child, port) = start_http(&[], &env).await;
    assert_eq!(http_tool_names(port).await, minimal());
    stop(child).await;
}

#[tokio::test]
async fn a_serve_option_before_another_command_is_a_usage_error() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["--tools", "minimal", "sessions"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run kernel-mcp");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tools is an option of `serve`"), "{err}");
}

#[tokio::test]
async fn serve_over_http_takes_its_token_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-a-file-42\n").unwrap();
    let (child, port) = start_http(
        &[
            "--transport",
            "http",
            "--port",
            "0",
            "--token-file",
            file.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let status = |head: String| {
        head.split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(status(post_as(port, None, None, &init).await.0), "401");
    assert_eq!(
        status(post_as(port, Some("from-a-file-42"), None, &init).await.0),
        "200"
    );
    stop(child).await;
}
