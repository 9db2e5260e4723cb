//! The MCP tools in-process: the server handler on one end of a `tokio::io::duplex`, an rmcp
//! client on the other, real ipykernel kernels behind them (from the project's `.venv`). No
//! server process: this rung checks what the tools answer, not the binary around them.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{is_error, require_venv, structured, venv};
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::mcp::KernelMcp;
use kernel_mcp::registry::Registry;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

struct InProcess {
    client: RunningService<RoleClient, ()>,
    registry: Arc<Registry>,
    _state: tempfile::TempDir,
}

impl InProcess {
    async fn start() -> InProcess {
        require_venv();
        let state = tempfile::tempdir().expect("temp dir");
        let search = KernelSearch::new(&[], Some(&venv()), None);
        let registry = Arc::new(Registry::new(
            search,
            Some(venv()),
            Limits::default(),
            tokio::runtime::Handle::current(),
        ));
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let server = KernelMcp::new(registry.clone());
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let client = ().serve(client_io).await.expect("initialize");
        InProcess {
            client,
            registry,
            _state: state,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(map) = args else {
            panic!("arguments must be an object");
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(map);
        tokio::time::timeout(Duration::from_secs(60), self.client.call_tool(params))
            .await
            .unwrap_or_else(|_| panic!("{tool} did not answer"))
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
    }

    async fn stop(self) {
        self.registry.shutdown_all().await;
        let _ = self.client.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_is_listed_and_tool_errors_carry_the_contract_shape() {
    let s = InProcess::start().await;
    let tools = s.client.list_all_tools().await.expect("tools/list");
    assert_eq!(
        tools.len(),
        // 20 of v1, checkpoint/restore_session, five environment tools, renew_session, clear_queue,
        // is_complete, fork_session, mirror_notebook, the five notebook tools, and five
        // artifact tools.
        42,
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );

    let r = s.call("get_session", json!({"session_id": "nope"})).await;
    assert!(is_error(&r));
    let v = structured(&r);
    assert_eq!(v["error_code"], "SESSION_NOT_FOUND", "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("create_session"),
        "{v}"
    );

    let r = s.call("execute", json!({"code": 42})).await;
    assert_eq!(structured(&r)["error_code"], "INVALID_ARGUMENT", "{r:?}");

    let r = s
        .call(
            "get_execution",
            json!({"run_id": "run-x", "stream": "bogus"}),
        )
        .await;
    assert_eq!(structured(&r)["error_code"], "EXECUTION_NOT_FOUND");

    let info = structured(&s.call("server_info", json!({})).await);
    assert_eq!(info["session_count"], 0, "{info}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_result_is_bounded_in_the_response_and_pageable_as_the_result_stream() {
    let s = InProcess::start().await;
    let r = s.call("execute", json!({"code": "'y' * 3_000_000"})).await;
    let v = structured(&r);
    assert_eq!(v["status"], "ok", "{v}");
    let shown = v["result"].as_str().expect("a result");
    assert!(shown.len() < 30_000, "result shown: {} bytes", shown.len());
    let total = v["truncated"]["result"]["total_bytes"]
        .as_u64()
        .expect("result truncation");
    assert_eq!(total, 3_000_002, "the repr with its quotes");
    let run_id = v["run_id"].as_str().expect("run id");
    let mut offset = 0;
    let mut paged = String::new();
    loop {
        let page = structured(
            &s.call(
                "get_execution",
                json!({"run_id": run_id, "stream": "result", "offset": offset, "limit": 1_000_000}),
            )
            .await,
        );
        let text = page["text"].as_str().expect("page text");
        if text.is_empty() {
            break;
        }
        paged.push_str(text);
        offset = page["next_offset"].as_u64().expect("next offset") as usize;
    }
    assert_eq!(paged.len(), 3_000_002);
    assert!(paged.starts_with("'yyy") && paged.ends_with("yyy'"));
    s.call("destroy_session", json!({"session_id": "default"}))
        .await;
    s.stop().await;
}
