//! `make bench`: kernel-mcp over MCP stdio next to jupyter_client driving the same kernelspec.
//!
//! Measures, in one run on this machine:
//!   (a) `execute 1+1` round trips (median, p95 over N) through kernel-mcp, and the same on a
//!       kernel driven directly by jupyter_client (bench/jupyter_client_ref.py);
//!   (b) kernel-mcp spawn → MCP initialized;
//!   (c) cold `create_session` vs `KernelManager.start_kernel` + `wait_for_ready`, and
//!       `destroy_session` vs `shutdown_kernel`;
//!   (d) the server's RSS (VmRSS of the kernel-mcp process) without kernels and with one
//!       session, next to the jupyter_client driver process's RSS; the kernel's own RSS.
//! Then prints one table with the ratios (kernel-mcp / jupyter_client).
//!
//! ```text
//! cargo build --release --bins --examples
//! VIRTUAL_ENV=$PWD/.venv cargo run --release --example bench [-- --n 200 --starts 3]
//! ```
//! Environment: `KERNEL_MCP_BIN` (server binary; default: next to this example's
//! executable), `KERNEL_MCP_BENCH_PYTHON` (interpreter for the reference script; default
//! `$VIRTUAL_ENV/bin/python`, else `./.venv/bin/python`), `KERNEL_MCP_BENCH_KERNEL`
//! (kernelspec name, default python3).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;
type Client = RunningService<RoleClient, ()>;

struct Opts {
    n: usize,
    warmup: usize,
    starts: usize,
    spawns: usize,
    kernel: String,
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("bench FAILED: {e}");
        std::process::exit(1);
    }
}

fn parse_opts() -> Res<Opts> {
    let mut o = Opts {
        n: 200,
        warmup: 5,
        starts: 3,
        spawns: 5,
        kernel: std::env::var("KERNEL_MCP_BENCH_KERNEL").unwrap_or_else(|_| "python3".into()),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--n" => o.n = val()?.parse()?,
            "--warmup" => o.warmup = val()?.parse()?,
            "--starts" => o.starts = val()?.parse()?,
            "--spawns" => o.spawns = val()?.parse()?,
            "--kernel" => o.kernel = val()?,
            _ => {
                return Err(format!(
                    "unknown argument {a:?} (known: --n --warmup --starts --spawns --kernel)"
                )
                .into());
            }
        }
    }
    o.n = o.n.max(1);
    o.starts = o.starts.max(1);
    o.spawns = o.spawns.max(1);
    Ok(o)
}

fn server_binary() -> Res<PathBuf> {
    if let Some(p) = std::env::var_os("KERNEL_MCP_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot locate the target directory")?
        .join(format!("kernel-mcp{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release --bins --examples` first",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}

fn reference_python() -> PathBuf {
    if let Some(p) = std::env::var_os("KERNEL_MCP_BENCH_PYTHON") {
        return PathBuf::from(p);
    }
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        return Path::new(&v).join("bin/python");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
}

async fn run() -> Res<()> {
    let o = parse_opts()?;
    let bin = server_binary()?;
    eprintln!("bench: server {}", bin.display());
    let total = Instant::now();

    // (b) spawn -> initialized, over fresh server processes.
    let mut spawn_ms = Vec::new();
    for _ in 0..o.spawns {
        let t0 = Instant::now();
        let (client, _pid) = spawn(&bin).await?;
        spawn_ms.push(ms(t0));
        let _ = client.cancel().await;
    }
    eprintln!("bench: spawn -> initialized x{}: done", o.spawns);

    // (d) idle RSS with no kernels.
    let (client, pid) = spawn(&bin).await?;
    let pid = pid.ok_or("could not get the kernel-mcp child's pid")?;
    call(&client, "list_kernels", json!({})).await?;
    call(&client, "list_sessions", json!({})).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_idle = vmrss_kib(pid);

    let measured = measure_sessions(&client, pid, &o).await;
    let _ = client.cancel().await;
    let m = measured?;
    eprintln!("bench: kernel-mcp side done; running the jupyter_client reference");

    // The reference, after kernel-mcp and its kernels are gone (no competition for CPU).
    let reference = run_reference(&o).await?;
    let elapsed = total.elapsed();

    print_table(&o, &spawn_ms, rss_idle, &m, &reference);
    print_tools_list_sizes(&bin).await?;
    println!("\n(total bench time {:.1} s)", elapsed.as_secs_f64());
    Ok(())
}

struct Measured {
    create_ms: Vec<f64>,
    destroy_ms: Vec<f64>,
    exec_ms: Vec<f64>,
    rss_one_session: Option<u64>,
    kernel_rss: Option<u64>,
    /// 50 MB printed as 50 000 lines: wall time, serialized response bytes, server peak RSS.
    flood_ms: Option<f64>,
    flood_response_bytes: Option<f64>,
    flood_peak_rss: Option<u64>,
}

/// The same code as FLOOD_CODE in bench/jupyter_client_ref.py.
const FLOOD_CODE: &str = "for _ in range(50_000):\n    print('x' * 999)";

async fn measure_sessions(client: &Client, server_pid: u32, o: &Opts) -> Res<Measured> {
    // (c) cold create_session; the last session stays up for (a).
    let mut create_ms = Vec::new();
    let mut destroy_ms = Vec::new();
    let mut kernel_pid = None;
    let session = format!("bench-{}", o.starts - 1);
    for i in 0..o.starts {
        let id = format!("bench-{i}");
        let t0 = Instant::now();
        let r = call(
            client,
            "create_session",
            json!({"session_id": id, "kernel": o.kernel}),
        )
        .await?;
        check_tool(&r, "create_session")?;
        wait_until_ready(client, &id, &r).await?;
        create_ms.push(ms(t0));
        kernel_pid = structured(&r)["pid"].as_u64();
        if i + 1 < o.starts {
            let t0 = Instant::now();
            let r = call(client, "destroy_session", json!({"session_id": id})).await?;
            check_tool(&r, "destroy_session")?;
            destroy_ms.push(ms(t0));
        }
    }
    eprintln!("bench: create_session x{}: done", o.starts);

    // (a) execute 1+1.
    for _ in 0..o.warmup {
        execute_1p1(client, &session).await?;
    }
    let mut exec_ms = Vec::with_capacity(o.n);
    for _ in 0..o.n {
        let t0 = Instant::now();
        execute_1p1(client, &session).await?;
        exec_ms.push(ms(t0));
    }
    eprintln!("bench: execute 1+1 x{}: done", o.n);

    // (d) RSS with one session.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_one_session = vmrss_kib(server_pid);
    let kernel_rss = kernel_pid.and_then(|p| vmrss_kib(p as u32));

    // (e) 50 MB of output.
    let t0 = Instant::now();
    let r = call(
        client,
        "execute",
        json!({"session_id": session, "code": FLOOD_CODE, "wait_s": 300}),
    )
    .await?;
    let flood_ms = ms(t0);
    check_tool(&r, "execute (flood)")?;
    let flood_response_bytes = serde_json::to_vec(&r).map(|v| v.len() as f64).ok();
    let flood_peak_rss = proc_status_kib(server_pid, "VmHWM:");
    eprintln!("bench: 50 MB flood: done");

    let t0 = Instant::now();
    let r = call(client, "destroy_session", json!({"session_id": session})).await?;
    check_tool(&r, "destroy_session")?;
    destroy_ms.push(ms(t0));

    Ok(Measured {
        create_ms,
        destroy_ms,
        exec_ms,
        rss_one_session,
        kernel_rss,
        flood_ms: Some(flood_ms),
        flood_response_bytes,
        flood_peak_rss,
    })
}

/// create_session should return once the kernel is ready; if it answered `starting`,
/// poll list_sessions (the wait counts as start time).
async fn wait_until_ready(client: &Client, id: &str, created: &CallToolResult) -> Res<()> {
    if structured(created)["status"] != "starting" {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let r = call(client, "list_sessions", json!({})).await?;
        let ready = structured(&r)["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["session_id"] == id && s["status"] != "starting");
        if ready {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(format!("session {id} still starting after 60 s").into())
}

async fn execute_1p1(client: &Client, session: &str) -> Res<()> {
    let r = call(
        client,
        "execute",
        json!({"session_id": session, "code": "1+1"}),
    )
    .await?;
    let s = structured(&r);
    if s["status"] != "ok" || s["result"] != "2" {
        return Err(format!(
            "execute 1+1: expected status ok and result \"2\", got status={} result={} {}",
            s["status"], s["result"], s["message"]
        )
        .into());
    }
    Ok(())
}

/// The size of `tools/list` (its JSON) for the full and the minimal toolset, against the caps.
async fn print_tools_list_sizes(bin: &Path) -> Res<()> {
    println!();
    for (label, args, cap) in [
        ("full", &[][..], 16_000usize),
        (
            "--tools minimal",
            &["serve", "--tools", "minimal"][..],
            5_000,
        ),
    ] {
        let (client, _) = spawn_with(bin, args).await?;
        let tools = client.list_all_tools().await?;
        let bytes = serde_json::to_string(&json!({ "tools": tools }))?.len();
        let _ = client.cancel().await;
        println!(
            "tools/list ({label}): {} tools, {bytes} bytes (cap {cap}){}",
            tools.len(),
            if bytes < cap { "" } else { "  OVER THE CAP" }
        );
    }
    Ok(())
}

async fn spawn(bin: &Path) -> Res<(Client, Option<u32>)> {
    spawn_with(bin, &[]).await
}

async fn spawn_with(bin: &Path, args: &[&str]) -> Res<(Client, Option<u32>)> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    let pid = transport.id();
    let client = ().serve(transport).await?;
    Ok((client, pid))
}

async fn call(client: &Client, tool: &'static str, args: Value) -> Res<CallToolResult> {
    let Value::Object(args) = args else {
        unreachable!("tool arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .map_err(|e| format!("{tool}: {e}").into())
}

fn structured(r: &CallToolResult) -> &Value {
    static NULL: Value = Value::Null;
    r.structured_content.as_ref().unwrap_or(&NULL)
}

fn check_tool(r: &CallToolResult, what: &str) -> Res<()> {
    if r.is_error == Some(true) {
        let s = structured(r);
        return Err(format!("{what}: {} {}", s["error_code"], s["message"]).into());
    }
    Ok(())
}

async fn run_reference(o: &Opts) -> Res<Value> {
    let python = reference_python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/jupyter_client_ref.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["--n", &o.n.to_string()])
        .args(["--warmup", &o.warmup.to_string()])
        .args(["--starts", &o.starts.to_string()])
        .args(["--kernel", &o.kernel])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e} (run `make .venv`)", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed ({}):\n{}",
            python.display(),
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "reference script printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
        .into()
    })
}

// ---------------------------------------------------------------------------------------
// statistics and output

fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

/// Nearest-rank percentile (same as the Python script).
fn p95(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return None;
    }
    let rank = (95 * n).div_ceil(100).max(1);
    Some(s[rank - 1])
}

fn vmrss_kib(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmRSS:")
}

/// A kB field of /proc/<pid>/status (VmRSS: current, VmHWM: peak).
fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn print_table(o: &Opts, spawn_ms: &[f64], rss_idle: Option<u64>, m: &Measured, r: &Value) {
    let fms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2} ms"));
    let fmib = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{:.1} MiB", x / 1024.0));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_string(),
    };
    let rf = |path: &[&str]| {
        let mut v = r;
        for p in path {
            v = &v[*p];
        }
        v.as_f64()
    };
    let kib = |v: Option<u64>| v.map(|x| x as f64);

    let rows: Vec<(String, Option<f64>, Option<f64>, bool)> = vec![
        (
            format!("execute 1+1, median (n={})", o.n),
            median(&m.exec_ms),
            rf(&["execute_ms", "median"]),
            false,
        ),
        (
            format!("execute 1+1, p95 (n={})", o.n),
            p95(&m.exec_ms),
            rf(&["execute_ms", "p95"]),
            false,
        ),
        (
            format!(
                "cold start, median (n={}): create_session | start_kernel+wait_for_ready",
                o.starts
            ),
            median(&m.create_ms),
            rf(&["start_ms", "median"]),
            false,
        ),
        (
            format!(
                "shutdown, median (n={}): destroy_session | shutdown_kernel",
                m.destroy_ms.len()
            ),
            median(&m.destroy_ms),
            rf(&["shutdown_ms", "median"]),
            false,
        ),
        (
            format!(
                "server spawn -> MCP initialized, median (n={})",
                spawn_ms.len()
            ),
            median(spawn_ms),
            None,
            false,
        ),
        (
            "client process RSS, no kernel: kernel-mcp | python+jupyter_client".into(),
            kib(rss_idle),
            rf(&["client_rss_idle_kib"]),
            true,
        ),
        (
            "client process RSS, one kernel: kernel-mcp | python+jupyter_client".into(),
            kib(m.rss_one_session),
            rf(&["client_rss_kib"]),
            true,
        ),
        (
            format!("kernel process RSS ({}), idle", o.kernel),
            kib(m.kernel_rss),
            rf(&["kernel_rss_kib"]),
            true,
        ),
        (
            "50 MB as 50 000 printed lines: execute until done".into(),
            m.flood_ms,
            rf(&["flood", "ms"]),
            false,
        ),
        (
            "50 MB flood: client peak RSS (VmHWM)".into(),
            kib(m.flood_peak_rss),
            rf(&["flood", "client_peak_rss_kib"]),
            true,
        ),
    ];

    println!();
    println!(
        "kernel-mcp vs jupyter_client {} (python {}, ipykernel {}), kernel '{}' from {}",
        r["versions"]["jupyter_client"].as_str().unwrap_or("?"),
        r["versions"]["python"].as_str().unwrap_or("?"),
        r["versions"]["ipykernel"].as_str().unwrap_or("?"),
        o.kernel,
        r["kernel_resource_dir"].as_str().unwrap_or("?"),
    );
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(40);
    println!(
        "{:<w$}  {:>12}  {:>14}  {:>8}",
        "metric", "kernel-mcp", "jupyter_client", "ratio"
    );
    println!("{}", "-".repeat(w + 2 + 12 + 2 + 14 + 2 + 8));
    for (name, ours, theirs, is_mem) in rows {
        let f = if is_mem { fmib } else { fms };
        println!(
            "{:<w$}  {:>12}  {:>14}  {:>8}",
            name,
            f(ours),
            f(theirs),
            ratio(ours, theirs)
        );
    }
    if let Some(b) = m.flood_response_bytes {
        println!(
            "50 MB flood: kernel-mcp's MCP response was {:.1} KiB (head + tail; the rest pageable); \
             jupyter_client received {} bytes",
            b / 1024.0,
            r["flood"]["bytes_received"]
        );
    }
    println!(
        "\nratio = kernel-mcp / jupyter_client (below 1 means kernel-mcp is faster or smaller).\n\
         kernel-mcp times are MCP tools/call round trips over stdio (client-side wall clock);\n\
         jupyter_client times are direct ZeroMQ round trips from Python. Done = execute_reply\n\
         plus iopub idle on both sides."
    );
}
