//! A raw 2026-07-28 client on the stdio of `serve --shared` (the relay to the service): it
//! gets the relay's toolset and keeps its principal's `default` across requests.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::service::TestService;

/// A raw 2026-07-28 client on a child's stdio: no `initialize`, `_meta` in each request.
struct StdioClient {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl StdioClient {
    fn spawn(svc: &TestService, args: &[&str]) -> StdioClient {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
            .args(args)
            .envs(svc.env())
            .env("VIRTUAL_ENV", crate::common::venv())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kernel-mcp");
        let stdin = child.stdin.take().unwrap();
        let out = tokio::io::BufReader::new(child.stdout.take().unwrap());
        StdioClient {
            child,
            stdin,
            lines: tokio::io::AsyncBufReadExt::lines(out),
            next: 1,
        }
    }

    /// Send `method` with `params` (plus the revision's `_meta`) and return its result.
    async fn request(&mut self, method: &str, mut params: Value) -> Value {
        use tokio::io::AsyncWriteExt;
        let id = self.next;
        self.next += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}});
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = async {
            while let Ok(Some(l)) = self.lines.next_line().await {
                let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
                if v["id"] == id {
                    return v;
                }
            }
            Value::Null
        };
        let v = tokio::time::timeout(Duration::from_secs(120), answer)
            .await
            .expect("an answer");
        assert!(v.get("result").is_some(), "{method}: {v}");
        v["result"].clone()
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

#[tokio::test]
async fn a_2026_client_through_the_relay_gets_the_relays_toolset_and_keeps_its_default() {
    let svc = TestService::new();
    let mut client = StdioClient::spawn(&svc, &["serve", "--shared", "--tools", "all"]);
    let tools = client.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for t in [
        "register_environment",
        "checkpoint_session",
        "renew_session",
        "complete",
    ] {
        assert!(names.contains(&t), "--tools all lists {t}: {names:?}");
    }
    let call = |code: &str| json!({"name": "execute", "arguments": {"code": code}});
    let first = client.request("tools/call", call("x = 42")).await;
    assert_eq!(first["structuredContent"]["status"], "ok", "{first}");
    let second = client.request("tools/call", call("x")).await;
    assert_eq!(second["structuredContent"]["result"], "42", "{second}");
    client.stop().await;
    if let Some(pid) = svc.pid() {
        crate::common::terminate(pid, Duration::from_secs(30));
    }
}
