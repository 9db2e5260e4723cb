//! The MCP Apps view (docs/apps.md) on a real `kernel-mcp serve --transport http`
//! with a token: what `tools/list`, `resources/list` and `resources/read` show a client that
//! declared the `io.modelcontextprotocol/ui` extension (in `initialize`, or in a 2026-07-28
//! request's `_meta`) and one that did not, byte for byte; `view_run`'s cell; and the browser
//! test — headless Chromium running the official ext-apps `AppBridge` and the MCP TypeScript
//! SDK client against this server (`ui/test/drive.mjs`, needing Debian's `chromium` and
//! `npm ci` in `ui/`, both done by `make test`). Its screenshots land in `target/apps/`
//! (`make ui-shots` copies them to `docs/`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::http::{HttpClient, post_as, post_with};
use crate::common::{server_command, terminate};

const TOKEN: &str = "apps-view-test-token";
const EXTENSION: &str = "io.modelcontextprotocol/ui";
const MIME: &str = "text/html;profile=mcp-app";

/// `kernel-mcp serve --transport http` on a free port, with [`TOKEN`]; stopped on drop.
struct HttpServer {
    child: tokio::process::Child,
    port: u16,
    _workdir: tempfile::TempDir,
}

impl HttpServer {
    async fn start() -> HttpServer {
        crate::common::require_venv();
        let workdir = tempfile::tempdir().unwrap();
        let mut child = server_command(workdir.path())
            .args(["serve", "--transport", "http", "--port", "0"])
            .env("KERNEL_MCP_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kernel-mcp");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                let port = line.split("/mcp").next().and_then(|l| l.rsplit(':').next());
                if let Some(Ok(p)) = port.map(str::parse::<u16>) {
                    return Some(p);
                }
            }
            None
        })
        .await
        .expect("the server announces its address")
        .expect("a port in the announcement");
        // Keep draining its log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HttpServer {
            child,
            port,
            _workdir: workdir,
        }
    }

    async fn client(&self, extension: bool) -> HttpClient {
        let caps = if extension {
            json!({"extensions": {EXTENSION: {"mimeTypes": [MIME]}}})
        } else {
            json!({})
        };
        HttpClient::connect_asking(self.port, Some(TOKEN), caps).await
    }

    /// One JSON-RPC request on `session`; its `result` (or the whole answer when an error).
    async fn rpc(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        let req = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let (head, msgs) = post_as(self.port, Some(TOKEN), session, &req).await;
        let answer = msgs
            .into_iter()
            .find(|m| m["id"] == 7)
            .unwrap_or_else(|| panic!("no answer to {method}: {head}"));
        if answer.get("result").is_some() {
            answer["result"].clone()
        } else {
            answer
        }
    }

    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            terminate(pid, Duration::from_secs(10));
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

/// A `tools/list` with the view's marks taken out: `_meta.ui` and the app-only tools.
fn without_view(mut list: Value) -> Value {
    let tools = list["tools"].as_array_mut().unwrap();
    tools.retain(|t| t["_meta"]["ui"]["visibility"] != json!(["app"]));
    for t in tools.iter_mut() {
        if let Some(meta) = t.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("ui");
            if meta.is_empty() {
                t.as_object_mut().unwrap().remove("_meta");
            }
        }
    }
    list
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or(&Value::Null)
}

#[tokio::test]
async fn tools_list_names_the_view_only_for_a_client_that_declared_the_extension() {
    let server = HttpServer::start().await;
    let with = server.client(true).await;
    let without = server.client(false).await;
    let listed_with = server
        .rpc(Some(with.session()), "tools/list", json!({}))
        .await;
    let listed_without = server
        .rpc(Some(without.session()), "tools/list", json!({}))
        .await;
    for name in ["execute", "execute_file", "get_execution", "fork_session"] {
        assert_eq!(
            tool(&listed_with, name)["_meta"]["ui"]["resourceUri"],
            "ui://kernel-mcp/run",
            "{name}"
        );
        assert!(tool(&listed_without, name)["_meta"].is_null(), "{name}");
    }
    let view_run = tool(&listed_with, "view_run");
    assert_eq!(view_run["_meta"]["ui"]["visibility"], json!(["app"]));
    assert!(tool(&listed_without, "view_run").is_null());
    // Apart from the view's marks, the two lists are the same bytes.
    assert_eq!(
        without_view(listed_with).to_string(),
        listed_without.to_string()
    );
    // resources/list names the view for the one client only.
    let res_with = server
        .rpc(Some(with.session()), "resources/list", json!({}))
        .await;
    let res_without = server
        .rpc(Some(without.session()), "resources/list", json!({}))
        .await;
    assert_eq!(res_with["resources"][0]["uri"], "ui://kernel-mcp/run");
    assert_eq!(res_with["resources"][0]["mimeType"], MIME);
    assert_eq!(res_without["resources"], json!([]), "{res_without}");
    // view_run is unknown to a client without the extension.
    let refused = server
        .rpc(
            Some(without.session()),
            "tools/call",
            json!({"name": "view_run", "arguments": {"run_id": "run-x"}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    server.stop().await;
}

#[tokio::test]
async fn a_2026_client_declares_the_extension_in_each_requests_meta() {
    let server = HttpServer::start().await;
    let list = |caps: Value| async move {
        let req = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}});
        let headers = [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ];
        let (head, msgs) = post_with(server.port, Some(TOKEN), &headers, &req).await;
        let answer = msgs.into_iter().find(|m| m["id"] == 7);
        answer.unwrap_or_else(|| panic!("no answer: {head}"))["result"].clone()
    };
    let with = list(json!({"extensions": {EXTENSION: {"mimeTypes": [MIME]}}})).await;
    let without = list(json!({})).await;
    assert_eq!(
        tool(&with, "execute")["_meta"]["ui"]["resourceUri"],
        "ui://kernel-mcp/run",
        "{with}"
    );
    assert!(tool(&without, "execute")["_meta"].is_null(), "{without}");
    assert_eq!(without_view(with).to_string(), without.to_string());
    server.stop().await;
}

#[tokio::test]
async fn resources_read_returns_the_view_with_its_mime_type_and_a_csp_with_nothing_external() {
    let server = HttpServer::start().await;
    let client = server.client(true).await;
    let read = server
        .rpc(
            Some(client.session()),
            "resources/read",
            json!({"uri": "ui://kernel-mcp/run"}),
        )
        .await;
    let c = &read["contents"][0];
    assert_eq!(c["mimeType"], MIME, "{read}");
    let built =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/dist/run.html"))
            .unwrap();
    assert_eq!(c["text"].as_str(), Some(built.as_str()));
    assert!(built.len() <= 150 * 1024, "{} bytes", built.len());
    let csp = &c["_meta"]["ui"]["csp"];
    for key in [
        "connectDomains",
        "resourceDomains",
        "frameDomains",
        "baseUriDomains",
    ] {
        assert_eq!(csp[key], json!([]), "{key}: {csp}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_client_without_the_extension_gets_byte_identical_run_results() {
    let server = HttpServer::start().await;
    let with = server.client(true).await;
    let without = server.client(false).await;
    with.call("create_session", json!({"session_id": "shared"}))
        .await;
    let code = "print('both see this')\nfrom IPython.display import HTML, display\ndisplay(HTML('<b>x</b>'))\n1 + 1";
    let run = with
        .call("execute", json!({"session_id": "shared", "code": code}))
        .await;
    assert_eq!(run["status"], "ok", "{run}");
    let ask = json!({"name": "get_execution", "arguments": {"run_id": run["run_id"]}});
    let a = server
        .rpc(Some(with.session()), "tools/call", ask.clone())
        .await;
    let b = server.rpc(Some(without.session()), "tools/call", ask).await;
    assert_eq!(a.to_string(), b.to_string());
    assert!(!a.to_string().contains("ui://"), "{a}");
    server.stop().await;
}

#[tokio::test]
async fn view_run_gives_a_finished_run_as_a_notebook_cell_in_the_kernels_order() {
    let server = HttpServer::start().await;
    let client = server.client(true).await;
    client
        .call("create_session", json!({"session_id": "cells"}))
        .await;
    let code = "print('first')\nfrom IPython.display import HTML, display\ndisplay(HTML('<table><tr><td>1</td></tr></table>'))\nprint('second')\n1 / 0";
    let run = client
        .call("execute", json!({"session_id": "cells", "code": code}))
        .await;
    assert_eq!(run["status"], "error", "{run}");
    let view = client
        .call("view_run", json!({"run_id": run["run_id"]}))
        .await;
    assert_eq!(view["code"], code, "{view}");
    let kinds: Vec<&str> = view["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["output_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["stream", "display_data", "stream", "error"],
        "{view}"
    );
    assert_eq!(
        view["outputs"][1]["data"]["text/html"],
        "<table><tr><td>1</td></tr></table>"
    );
    assert_eq!(view["total_outputs"], 4);
    assert!(view["next_start"].is_null());
    let rest = client
        .call("view_run", json!({"run_id": run["run_id"], "start": 3}))
        .await;
    assert_eq!(rest["outputs"][0]["ename"], "ZeroDivisionError", "{rest}");
    let unknown = client.call("view_run", json!({"run_id": "run-nope"})).await;
    assert_eq!(unknown["error_code"], "EXECUTION_NOT_FOUND", "{unknown}");
    server.stop().await;
}

#[tokio::test]
async fn the_view_in_chromium_follows_runs_interrupts_and_keeps_hostile_html_inert() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ui = here.join("ui");
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "Debian's chromium is missing: `make kernels` installs it"
    );
    assert!(
        ui.join("node_modules/playwright-core").exists()
            && ui
                .join("node_modules/@modelcontextprotocol/ext-apps")
                .exists(),
        "ui/node_modules is missing: `make ui` (npm ci in ui/)"
    );
    let server = HttpServer::start().await;
    let shots = here.join("target/apps");
    std::fs::create_dir_all(&shots).unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let run = tokio::time::timeout(
        Duration::from_secs(600),
        tokio::process::Command::new("node")
            .current_dir(&ui)
            .arg("test/drive.mjs")
            .args(["--url", &url, "--token", TOKEN, "--shots"])
            .arg(&shots)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser test ends within 10 minutes")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    server.stop().await;
    assert!(run.status.success(), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap();
    assert!(report["failed"].is_null(), "{report}");
    assert_eq!(
        report["passed"].as_array().map(Vec::len),
        Some(13),
        "{report}"
    );
    for shot in [
        "view-plot.png",
        "view-table.png",
        "view-error.png",
        "view-live.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot}");
    }
}
