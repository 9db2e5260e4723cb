//! Door 5 of the attacker's checklist (docs/sandbox.md): the broker works inside the sandbox
//! it ships with. A `workspace` or `read-only` kernel may not open a Unix socket, so it calls
//! through the dialer it inherited: `mcp.help()`, `mcp.call()` (from the cell and from a
//! thread) and `mcp.acall()` reach the reference server, while `socket(AF_UNIX)` stays
//! refused — the broker's own socket included. `--sandbox workspace --tools code`, where
//! code is the agent's only way to other tools, calls the reference server too.

use serde_json::json;

use crate::common::broker::{everything_entry, stdout_of, write_registry};
use crate::common::*;

const CALLS: &str = r#"
import asyncio, threading
from kernel_mcp import mcp
print(mcp.help())
print("CALL", mcp.text(mcp.call("everything", "echo", message="boxed")))
rs = await asyncio.gather(*(mcp.acall("everything", "echo", message=f"a{i}") for i in range(3)))
print("ACALL", [mcp.text(r) for r in rs])
got = []
t = threading.Thread(target=lambda: got.append(mcp.text(mcp.call("everything", "echo", message="thread"))))
t.start(); t.join(60)
print("THREAD", got)
print("JOURNAL", len(mcp.journal()))
"#;

fn assert_calls(out: &str) {
    assert!(out.contains("everything"), "{out}");
    assert!(out.contains("CALL Echo: boxed"), "{out}");
    assert!(
        out.contains("ACALL ['Echo: a0', 'Echo: a1', 'Echo: a2']"),
        "{out}"
    );
    assert!(out.contains("THREAD ['Echo: thread']"), "{out}");
    let journal: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("JOURNAL ")?.trim().parse().ok())
        .unwrap_or(0);
    assert!(journal >= 5, "the calls are journalled: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_and_read_only_kernels_call_the_reference_server_and_still_open_no_unix_socket() {
    let project = tempfile::tempdir().unwrap();
    write_registry(
        project.path(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let server = Server::start().await;
    for policy in ["workspace", "read-only"] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": policy, "sandbox": policy, "cwd": project.path()}),
            )
            .await;
        assert!(!is_error(&r), "{}", dump(&r));
        assert_calls(&stdout_of(&server, policy, CALLS).await);
        // The dialer opens no other door: a Unix socket, even to the broker's own, is refused.
        let out = stdout_of(
            &server,
            policy,
            &super::denied(
                "import json, os, socket; ep = json.load(open(os.environ['KERNEL_MCP_ENDPOINT'])); socket.socket(socket.AF_UNIX).connect(ep['socket'])",
            ),
        )
        .await;
        assert_eq!(out.trim(), "denied", "{policy}");
        server.destroy(policy).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_mode_in_a_workspace_sandbox_calls_the_reference_server() {
    let project = tempfile::tempdir().unwrap();
    write_registry(
        project.path(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let spawned = spawn_server_in(
        project.path(),
        &[],
        &["--sandbox", "workspace", "--tools", "code"],
    );
    let server = Server::start_spawned(spawned).await;
    let tools = server.client().list_all_tools().await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name == "create_session"),
        "code mode: {tools:?}"
    );
    // The lazily created `default` session is sandboxed in the server's directory.
    let r = server
        .call("execute", json!({"code": CALLS, "wait_s": 120}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}\n{}", server.stderr_tail());
    assert_calls(v["stdout"].as_str().unwrap_or_default());
    let v = structured(
        &server
            .call(
                "execute",
                json!({"code": super::denied("open('/etc/shadow').read()")}),
            )
            .await,
    );
    assert_eq!(
        v["stdout"].as_str().unwrap_or_default().trim(),
        "denied",
        "{v}"
    );
    server.shutdown().await;
}
