//! `forward_artifact` through the real binary, a real Python kernel and the reference MCP
//! server (`server-everything`, as the broker suites start it): a 1 MB artifact is forwarded
//! into `echo`'s `message` while the agent's call and answer carry only references; the call
//! is in the session's broker journal; a forward over the argument budget, or outside the
//! registry's grant, is refused before anything is sent.

use serde_json::{Value, json};

use crate::common::broker::{everything_entry, stdout_of, write_registry};
use crate::common::history::error_code;
use crate::common::*;

/// The journal's `(tool, outcome)` pairs, read by kernel code.
async fn journal(server: &Server, session: &str) -> String {
    stdout_of(
        server,
        session,
        "from kernel_mcp import mcp\nprint([(e['tool'], e['outcome']) for e in mcp.journal()])",
    )
    .await
}

fn artifact_of(v: &Value) -> String {
    v["truncated"]["result"]["artifact"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no artifact beside the result: {v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_artifact_is_forwarded_by_reference_and_journalled() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({"allowedTools": ["echo"]}))}),
    );
    server.create_session("f").await;
    let v = server.exec("f", "'y' * 1_000_000").await;
    let id = artifact_of(&v);
    let args = json!({"id": id, "server": "everything", "tool": "echo", "argument": "message"});
    let r = server.call("forward_artifact", args.clone()).await;
    assert!(!is_error(&r), "{}", dump(&r));
    let wire = serde_json::to_string(&r).unwrap();
    assert!(
        wire.len() < 16 * 1024,
        "the agent's answer is {} bytes: it carries references, not the payload",
        wire.len()
    );
    let out = structured(&r);
    assert_eq!(out["forwarded"]["id"], json!(id), "{out}");
    assert_eq!(out["forwarded"]["bytes"], json!(1_000_002));
    // The echo of a megabyte is a megabyte: it comes back as an artifact of its own.
    let back = out["result_artifact"]["id"]
        .as_str()
        .expect("result artifact");
    let page = structured(
        &server
            .call("read_artifact", json!({"id": back, "length": 200}))
            .await,
    );
    assert_eq!(page["mime"], "application/json");
    assert!(
        page["data"].as_str().unwrap().contains("Echo: 'yyyy"),
        "{page}"
    );
    assert!(out["result_artifact"]["bytes"].as_u64().unwrap() > 1_000_000);
    let j = journal(&server, "f").await;
    assert!(j.contains("('echo', 'ok')"), "{j}");

    // Outside the grant: refused, nothing sent.
    let mut denied = args.clone();
    denied["tool"] = json!("get-sum");
    let r = server.call("forward_artifact", denied).await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    assert!(text(&r).contains("allowedTools"), "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_over_the_argument_budget_is_refused_before_it_is_sent() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({"allowedTools": ["echo"]}))}),
    );
    server.create_session("b").await;
    // 9 MB of backslashes: within an artifact's 16 MiB, twice that as a JSON string.
    let v = server.exec("b", "'\\\\' * 4_500_000").await;
    let id = artifact_of(&v);
    let r = server
        .call(
            "forward_artifact",
            json!({"id": id, "server": "everything", "tool": "echo", "argument": "message"}),
        )
        .await;
    assert_eq!(error_code(&r), "LIMIT_EXCEEDED", "{}", dump(&r));
    assert!(text(&r).contains("at most"), "{}", text(&r));
    let j = journal(&server, "b").await;
    assert_eq!(j.trim(), "[]", "nothing was sent: {j}");
    server.shutdown().await;
}
