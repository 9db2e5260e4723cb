//! Quick start: drive kernel-mcp the way an AI agent's MCP client does.
//!
//! Spawns the `kernel-mcp` binary (MCP over stdio) with the rmcp client and walks through
//! the v1 tools: list kernels, create a session, keep state between runs, show an
//! exception, return a matplotlib plot as an image, use the lazily created `default`
//! session, destroy the sessions. At each step it prints what the agent sees: the text
//! content of the tool result and the key `structuredContent` fields.
//!
//! Run it with `make demo` (which prepares ./.venv with ipykernel and sets VIRTUAL_ENV), or:
//!
//! ```text
//! VIRTUAL_ENV=$PWD/.venv cargo run --features demo --bin quickstart [-- <kernel-mcp args>]
//! ```
//!
//! It is a binary behind the `demo` feature rather than an example, so that building it
//! compiles no test-only crate (examples are built with every dev-dependency), and it talks
//! to the server over the child's pipes with the library's own rmcp client.
//!
//! The server binary is looked up next to this executable
//! (`target/<profile>/quickstart` → `target/<profile>/kernel-mcp`); set
//! `KERNEL_MCP_BIN` to use another one. Extra command-line arguments are passed to the
//! server (e.g. `--kernelspec-dir DIR`). The plot is saved to `target/quickstart-plot.png`.
//! Exits non-zero, with a message and the server's stderr tail, if a step misbehaves.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;
type Client = RunningService<RoleClient, ()>;

const PLOT_CODE: &str = "\
%matplotlib inline
import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
plt.title('kernel-mcp quickstart')
plt.show()";

#[tokio::main]
async fn main() {
    let stderr_tail = Arc::new(Mutex::new(Vec::<u8>::new()));
    if let Err(e) = run(stderr_tail.clone()).await {
        eprintln!("\nquickstart FAILED: {e}");
        let tail = stderr_tail.lock().unwrap();
        if !tail.is_empty() {
            eprintln!("--- kernel-mcp stderr (tail) ---");
            eprintln!("{}", String::from_utf8_lossy(&tail));
        }
        std::process::exit(1);
    }
}

/// `target/<profile>/examples/quickstart` → `target/<profile>/kernel-mcp`.
fn server_binary() -> Res<PathBuf> {
    if let Some(p) = std::env::var_os("KERNEL_MCP_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let profile_dir =
        profile_dir(&exe).ok_or("cannot locate the target directory from this program's path")?;
    let bin = profile_dir.join(format!("kernel-mcp{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        return Err(format!(
            "{} not found: build the server first (`cargo build`), or set KERNEL_MCP_BIN",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}

/// `target/<profile>/` from this program's path (`…/quickstart`, or `…/examples/quickstart`).
fn profile_dir(exe: &Path) -> Option<&Path> {
    let dir = exe.parent()?;
    if dir.file_name().is_some_and(|n| n == "examples") {
        dir.parent()
    } else {
        Some(dir)
    }
}

/// Where to save the plot: `target/quickstart-plot.png` (next to `target/<profile>/`).
fn plot_path() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(profile_dir(&exe)?.parent()?.to_path_buf()))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("quickstart-plot.png")
}

async fn run(stderr_tail: Arc<Mutex<Vec<u8>>>) -> Res<()> {
    let bin = server_binary()?;
    let server_args: Vec<String> = std::env::args().skip(1).collect();
    println!("kernel-mcp: {} {}", bin.display(), server_args.join(" "));
    match std::env::var("VIRTUAL_ENV") {
        Ok(v) => println!("VIRTUAL_ENV={v} (Python environment used for kernelspec discovery)"),
        Err(_) => println!("VIRTUAL_ENV not set: kernel-mcp uses $CONDA_PREFIX or ./.venv"),
    }

    let mut child = tokio::process::Command::new(&bin)
        .args(&server_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the server's stdin and stdout are not pipes".into());
    };
    // Keep the last 16 KiB of the server's log for error reports (and never let the pipe fill).
    if let Some(mut stderr) = child.stderr.take() {
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut t = stderr_tail.lock().unwrap();
                t.extend_from_slice(&buf[..n]);
                let excess = t.len().saturating_sub(16 * 1024);
                t.drain(..excess);
            }
        });
    }
    // MCP over the child's pipes: newline-delimited JSON-RPC, as an agent's client speaks it.
    let client: Client = ().serve((stdout, stdin)).await?;
    if let Some(info) = client.peer_info() {
        let (name, version) = info
            .server_info
            .as_ref()
            .map_or(("?", "?"), |i| (i.name.as_str(), i.version.as_str()));
        println!(
            "connected: {name} {version} (MCP {})",
            info.protocol_version
        );
    }

    let outcome = steps(&client).await;
    // Close stdin; the server shuts its kernels down and exits.
    let _ = client.cancel().await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait()).await;
    outcome
}

async fn steps(client: &Client) -> Res<()> {
    // 1. What kernels can this server start?
    let r = call(client, "list_kernels", json!({})).await?;
    show("list_kernels", &r);
    let s = structured(&r)?;
    let names: Vec<&str> = s["kernels"]
        .as_array()
        .ok_or("list_kernels: no `kernels` array")?
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    println!(
        "  kernels: {names:?}, default_kernel: {}",
        s["default_kernel"]
    );
    if !names.contains(&"python3") {
        return Err(
            "list_kernels: no `python3` kernel (run `make .venv` and set VIRTUAL_ENV)".into(),
        );
    }

    // 2. A named session on a python3 kernel.
    let r = call(
        client,
        "create_session",
        json!({"session_id": "demo", "kernel": "python3"}),
    )
    .await?;
    show("create_session demo", &r);
    expect_ok(&r, "create_session")?;
    let s = structured(&r)?;
    println!(
        "  session_id={} kernel={} status={} generation={} pid={}",
        s["session_id"], s["kernel"], s["status"], s["generation"], s["pid"]
    );

    // 3. State persists between calls.
    let r = execute(client, Some("demo"), "x = 21").await?;
    expect_status(&r, "ok", "x = 21")?;
    let r = execute(client, Some("demo"), "print(x * 2)").await?;
    expect_status(&r, "ok", "print(x * 2)")?;
    let stdout = structured(&r)?["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if stdout.trim() != "42" {
        return Err(format!("print(x * 2): expected stdout \"42\", got {stdout:?}").into());
    }

    // 4. An exception is a result with status "error" (and isError), not a protocol error.
    let r = execute(client, Some("demo"), "1/0").await?;
    expect_status(&r, "error", "1/0")?;
    let err = &structured(&r)?["error"];
    println!(
        "  error.ename={} error.evalue={}",
        err["ename"], err["evalue"]
    );
    if err["ename"] != "ZeroDivisionError" {
        return Err(format!(
            "1/0: expected ename ZeroDivisionError, got {}",
            err["ename"]
        )
        .into());
    }
    if r.is_error != Some(true) {
        println!("  (note: isError was not set on this error result)");
    }

    // 5. A plot comes back as an MCP image content block (base64 PNG).
    let r = execute(client, Some("demo"), PLOT_CODE).await?;
    expect_status(&r, "ok", "matplotlib plot")?;
    let image = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .ok_or("matplotlib plot: the result has no image content block")?;
    let png = base64::engine::general_purpose::STANDARD
        .decode(image.data.as_bytes())
        .map_err(|e| format!("image content is not valid base64: {e}"))?;
    if !png.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(format!("image content ({}) is not a PNG", image.mime_type).into());
    }
    let path = plot_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, &png)?;
    println!(
        "  image: {} {} bytes -> saved to {}",
        image.mime_type,
        png.len(),
        path.display()
    );

    // 6. No session_id: the `default` session is created on first use.
    let r = execute(client, None, "import sys; sys.version.split()[0]").await?;
    expect_status(&r, "ok", "execute without session_id")?;
    let s = structured(&r)?;
    println!("  session_id={} result={}", s["session_id"], s["result"]);
    if s["session_id"] != "default" {
        return Err(format!("execute without session_id ran in {}", s["session_id"]).into());
    }

    // 7. Both sessions are listed.
    let r = call(client, "list_sessions", json!({})).await?;
    show("list_sessions", &r);
    for sess in structured(&r)?["sessions"].as_array().into_iter().flatten() {
        println!(
            "  {} kernel={} status={} generation={} history_count={}",
            sess["session_id"],
            sess["kernel"],
            sess["status"],
            sess["generation"],
            sess["history_count"]
        );
    }

    // 8. Clean up: shut both kernels down.
    for id in ["demo", "default"] {
        let r = call(client, "destroy_session", json!({"session_id": id})).await?;
        show(&format!("destroy_session {id}"), &r);
        expect_ok(&r, "destroy_session")?;
        println!("  shutdown={}", structured(&r)?["shutdown"]);
    }

    println!("\nquickstart OK");
    Ok(())
}

/// tools/call; a JSON-RPC error (malformed call, unknown tool) becomes an Err.
async fn call(client: &Client, tool: &'static str, args: Value) -> Res<CallToolResult> {
    let args = match args {
        Value::Object(m) => m,
        _ => unreachable!("tool arguments are an object"),
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .map_err(|e| format!("{tool}: {e}").into())
}

async fn execute(client: &Client, session: Option<&str>, code: &str) -> Res<CallToolResult> {
    let mut args = json!({ "code": code });
    if let Some(id) = session {
        args["session_id"] = json!(id);
    }
    let r = call(client, "execute", args).await?;
    show(
        &format!("execute [{}] {code:?}", session.unwrap_or("no session_id")),
        &r,
    );
    let s = structured(&r)?;
    println!(
        "  status={} execution_count={} generation={} state_reset={} elapsed_ms={}",
        s["status"], s["execution_count"], s["generation"], s["state_reset"], s["elapsed_ms"]
    );
    Ok(r)
}

/// Print what the agent sees: text blocks (indented) and a note per image block.
fn show(title: &str, r: &CallToolResult) {
    let flag = if r.is_error == Some(true) {
        "  [isError]"
    } else {
        ""
    };
    println!("\n== {title}{flag}");
    for c in &r.content {
        if let Some(t) = c.as_text() {
            for line in t.text.lines() {
                println!("  | {line}");
            }
        } else if let Some(i) = c.as_image() {
            println!(
                "  | <image {} , {} base64 chars>",
                i.mime_type,
                i.data.len()
            );
        } else {
            println!("  | <other content block>");
        }
    }
}

fn structured(r: &CallToolResult) -> Res<&Value> {
    r.structured_content
        .as_ref()
        .ok_or_else(|| "tool result has no structuredContent".into())
}

/// A tool-level error: `isError` with `{error_code, message}`.
fn expect_ok(r: &CallToolResult, what: &str) -> Res<()> {
    if r.is_error == Some(true) {
        let s = r.structured_content.clone().unwrap_or(Value::Null);
        return Err(format!("{what} failed: {} {}", s["error_code"], s["message"]).into());
    }
    Ok(())
}

fn expect_status(r: &CallToolResult, want: &str, what: &str) -> Res<()> {
    let s = structured(r)?;
    if s["status"] != want {
        let detail = if s.get("error_code").is_some() {
            format!("{} {}", s["error_code"], s["message"])
        } else {
            format!("error={} stderr={}", s["error"], s["stderr"])
        };
        return Err(format!(
            "{what}: expected status {want:?}, got {} ({detail})",
            s["status"]
        )
        .into());
    }
    Ok(())
}
