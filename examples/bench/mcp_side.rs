//! The kernel-mcp side of the bench: the real binary over MCP stdio (rmcp client), and the
//! same through the service relay (`serve --shared`, a private service in a temp dir).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::stats::{
    concurrent_summary, cpu_ms, median, ms, percentile, proc_status_kib, vmrss_kib,
};
use crate::{FLOOD_CODE, Opts, Res};

pub type Client = RunningService<RoleClient, ()>;

#[derive(Default)]
pub struct Ours {
    pub spawn_ms: Vec<f64>,
    pub rss_idle: Option<u64>,
    pub create_ms: Vec<f64>,
    pub destroy_ms: Vec<f64>,
    pub exec_ms: Vec<f64>,
    /// tools/call `list_sessions` (no kernel on the path): the MCP round trip's floor.
    pub floor_ms: Vec<f64>,
    /// execute 1+1 in blocks alternating with the raw client's (see `turns.rs`).
    pub turns: crate::turns::Turns,
    pub rss_one_session: Option<u64>,
    pub kernel_rss: Option<u64>,
    pub flood_ms: Option<f64>,
    pub flood_response_bytes: Option<usize>,
    pub flood_peak_rss: Option<u64>,
    /// The text content of a `1+1` result, in bytes.
    pub trivial_text_bytes: Option<usize>,
    pub concurrent: Option<Value>,
    /// create_session served from the warm pool (`serve --pool KERNEL=1`), each after the
    /// pool refilled.
    pub pool_create_ms: Vec<f64>,
    /// The same, for a session with its own cwd and env (the pooled kernel is adapted).
    pub pool_adapted_ms: Vec<f64>,
    /// `o.sessions` sessions each printing 50 MB at once: the server's peak RSS (KiB) and
    /// the time until the last was done.
    pub floods_peak_rss: Option<u64>,
    pub floods_ms: Option<f64>,
    /// execute 1+1 through `serve --shared` (same n).
    pub relay_exec_ms: Vec<f64>,
    /// (label, tools, bytes, cap)
    pub tools_list: Vec<(&'static str, usize, usize, usize)>,
    /// create_session and execute 1+1 under `sandbox: workspace`, and the same unsandboxed,
    /// interleaved in one server (empty where the host cannot sandbox).
    pub sandbox: SandboxFigures,
}

/// The sandbox rows' figures (ms).
#[derive(Default)]
pub struct SandboxFigures {
    pub create_boxed: Vec<f64>,
    pub create_plain: Vec<f64>,
    pub exec_boxed: Vec<f64>,
    pub exec_plain: Vec<f64>,
}

impl Ours {
    pub fn raw_json(&self) -> Value {
        json!({
            "spawn_ms": crate::stats::summary(&self.spawn_ms),
            "create_ms": crate::stats::summary(&self.create_ms),
            "destroy_ms": crate::stats::summary(&self.destroy_ms),
            "execute_ms": crate::stats::summary(&self.exec_ms),
            "floor_ms": crate::stats::summary(&self.floor_ms),
            "turns_execute_ms": crate::stats::summary(&self.turns.ours),
            "turns_raw_execute_ms": crate::stats::summary(&self.turns.raw),
            "turns_line_execute_ms": crate::stats::summary(&self.turns.line),
            "relay_execute_ms": crate::stats::summary(&self.relay_exec_ms),
            "pool_create_ms": crate::stats::summary(&self.pool_create_ms),
            "pool_adapted_create_ms": crate::stats::summary(&self.pool_adapted_ms),
            "floods": {"ms": self.floods_ms, "server_peak_rss_kib": self.floods_peak_rss},
            "rss_idle_kib": self.rss_idle,
            "rss_one_session_kib": self.rss_one_session,
            "kernel_rss_kib": self.kernel_rss,
            "flood": {"ms": self.flood_ms, "response_bytes": self.flood_response_bytes,
                      "server_peak_rss_kib": self.flood_peak_rss},
            "trivial_text_bytes": self.trivial_text_bytes,
            "sandbox": {
                "create_workspace_ms": crate::stats::summary(&self.sandbox.create_boxed),
                "create_none_ms": crate::stats::summary(&self.sandbox.create_plain),
                "execute_workspace_ms": crate::stats::summary(&self.sandbox.exec_boxed),
                "execute_none_ms": crate::stats::summary(&self.sandbox.exec_plain),
            },
            "concurrent": self.concurrent,
            "tools_list": self.tools_list.iter().map(|(l, t, b, c)| json!({"toolset": l, "tools": t, "bytes": b, "cap": c})).collect::<Vec<_>>(),
        })
    }
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Ours> {
    let mut m = Ours::default();
    // (b) spawn -> initialized, over fresh server processes.
    for _ in 0..o.spawns {
        let t0 = Instant::now();
        let (client, _pid) = spawn_with(bin, &[], &[]).await?;
        m.spawn_ms.push(ms(t0));
        let _ = client.cancel().await;
    }
    eprintln!("bench: spawn -> initialized x{}: done", o.spawns);

    let (client, pid) = spawn_with(bin, &[], &[]).await?;
    let pid = pid.ok_or("could not get the kernel-mcp child's pid")?;
    call(&client, "list_kernels", json!({})).await?;
    call(&client, "list_sessions", json!({})).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    m.rss_idle = vmrss_kib(pid);
    let r = sessions(&client, pid, o, &mut m).await;
    let r = match r {
        Ok(()) if o.sessions > 0 => concurrent(&client, pid, o, &mut m).await,
        other => other,
    };
    close(client, Some(pid)).await;
    r?;
    (m.pool_create_ms, m.pool_adapted_ms) = pooled_creates(bin, o).await?;
    if !o.no_relay {
        m.relay_exec_ms = relay(bin, o).await?;
    }
    m.tools_list = tools_list_sizes(bin).await?;
    m.sandbox = sandboxed(bin, o).await?;
    Ok(m)
}

/// (h) create_session and execute 1+1 with `sandbox: workspace` next to the same without,
/// alternating in one server so both see the same machine load. Empty when the host cannot
/// sandbox (`SANDBOX_UNAVAILABLE`).
async fn sandboxed(bin: &Path, o: &Opts) -> Res<SandboxFigures> {
    let mut f = SandboxFigures::default();
    let dir = tempfile::tempdir()?;
    let (client, pid) = spawn_with(bin, &[], &[]).await?;
    for i in 0..o.starts {
        for (policy, out) in [
            ("none", &mut f.create_plain),
            ("workspace", &mut f.create_boxed),
        ] {
            let id = format!("{policy}-{i}");
            let t0 = Instant::now();
            let r = call(
                &client,
                "create_session",
                json!({"session_id": id, "kernel": o.kernel, "cwd": dir.path(), "sandbox": policy}),
            )
            .await?;
            if r.is_error == Some(true) {
                eprintln!("bench: no sandbox rows: {}", first_text(&r));
                close(client, pid).await;
                return Ok(SandboxFigures::default());
            }
            wait_until_ready(&client, &id, &r).await?;
            out.push(ms(t0));
            if i + 1 < o.starts {
                destroy(&client, &id).await?;
            }
        }
    }
    let last = o.starts - 1;
    let (plain, boxed) = (format!("none-{last}"), format!("workspace-{last}"));
    for _ in 0..o.warmup {
        execute_1p1(&client, &plain).await?;
        execute_1p1(&client, &boxed).await?;
    }
    for _ in 0..o.n {
        for (id, out) in [(&plain, &mut f.exec_plain), (&boxed, &mut f.exec_boxed)] {
            let t0 = Instant::now();
            execute_1p1(&client, id).await?;
            out.push(ms(t0));
        }
    }
    destroy(&client, &plain).await?;
    destroy(&client, &boxed).await?;
    close(client, pid).await;
    eprintln!(
        "bench: sandboxed create_session x{} and execute x{}: done",
        o.starts, o.n
    );
    Ok(f)
}

pub(crate) fn first_text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap_or_default()
}

async fn sessions(client: &Client, server_pid: u32, o: &Opts, m: &mut Ours) -> Res<()> {
    // (c) cold create_session; the last session stays up for (a).
    let mut kernel_pid = None;
    let session = format!("bench-{}", o.starts - 1);
    for i in 0..o.starts {
        let id = format!("bench-{i}");
        let t0 = Instant::now();
        let r = create(client, &id, &o.kernel).await?;
        m.create_ms.push(ms(t0));
        kernel_pid = structured(&r)["pid"].as_u64();
        if i + 1 < o.starts {
            let t0 = Instant::now();
            destroy(client, &id).await?;
            m.destroy_ms.push(ms(t0));
        }
    }
    eprintln!("bench: create_session x{}: done", o.starts);

    // (a) execute 1+1.
    for _ in 0..o.warmup {
        execute_1p1(client, &session).await?;
    }
    for _ in 0..o.n {
        let t0 = Instant::now();
        let r = execute_1p1(client, &session).await?;
        m.exec_ms.push(ms(t0));
        m.trivial_text_bytes = Some(text_bytes(&r));
    }
    eprintln!("bench: execute 1+1 x{}: done", o.n);
    for _ in 0..o.n {
        let t0 = Instant::now();
        call(client, "list_sessions", json!({})).await?;
        m.floor_ms.push(ms(t0));
    }

    // (d) RSS with one session.
    tokio::time::sleep(Duration::from_millis(200)).await;
    m.rss_one_session = vmrss_kib(server_pid);
    m.kernel_rss = kernel_pid.and_then(|p| vmrss_kib(p as u32));

    // (e) 50 MB of output.
    let t0 = Instant::now();
    let r = call(
        client,
        "execute",
        json!({"session_id": session, "code": FLOOD_CODE, "wait_s": 300}),
    )
    .await?;
    m.flood_ms = Some(ms(t0));
    check_tool(&r, "execute (flood)")?;
    m.flood_response_bytes = serde_json::to_vec(&r).map(|v| v.len()).ok();
    m.flood_peak_rss = proc_status_kib(server_pid, "VmHWM:");
    eprintln!("bench: 50 MB flood: done");

    let t0 = Instant::now();
    destroy(client, &session).await?;
    m.destroy_ms.push(ms(t0));
    Ok(())
}

/// (f) `o.sessions` sessions, each doing `o.per` executes from its own task, all at once;
/// then (e') the same sessions each print 50 MB at once.
async fn concurrent(client: &Client, server_pid: u32, o: &Opts, m: &mut Ours) -> Res<()> {
    let ids: Vec<String> = (0..o.sessions).map(|i| format!("conc-{i}")).collect();
    for id in &ids {
        create(client, id, &o.kernel).await?;
    }
    let cpu0 = cpu_ms(server_pid);
    let t0 = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let peer = client.peer().clone();
            let id = id.clone();
            let per = o.per;
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per);
                for _ in 0..per {
                    let t = Instant::now();
                    let args = json!({"session_id": id, "code": "1+1"});
                    let Value::Object(args) = args else { break };
                    let r = peer
                        .call_tool(CallToolRequestParams::new("execute").with_arguments(args))
                        .await;
                    match r {
                        Ok(r) if structured(&r)["status"] == "ok" => lat.push(ms(t)),
                        _ => break,
                    }
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await?);
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_ms(server_pid) - cpu0;
    eprintln!(
        "bench: {}x{} concurrent: done (p50 {:?}, p99 {:?})",
        o.sessions,
        o.per,
        median(&all),
        percentile(&all, 99)
    );
    m.concurrent = Some(concurrent_summary(&all, wall, cpu, o.sessions * o.per));
    if !o.no_floods {
        let t0 = Instant::now();
        let (peak, ok) = floods(client, server_pid, &ids).await?;
        m.floods_ms = Some(ms(t0));
        m.floods_peak_rss = peak;
        eprintln!(
            "bench: {} floods at once: done ({ok} ok, peak {:?} KiB)",
            ids.len(),
            peak
        );
    }
    for id in &ids {
        destroy(client, id).await?;
    }
    Ok(())
}

/// Each session of `ids` prints 50 MB, all at once; the server's peak RSS over that (the
/// peak is reset first through /proc/PID/clear_refs) and how many ended ok.
async fn floods(client: &Client, server_pid: u32, ids: &[String]) -> Res<(Option<u64>, usize)> {
    crate::stats::reset_peak_rss(server_pid);
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let peer = client.peer().clone();
            let args = json!({"session_id": id, "code": FLOOD_CODE, "wait_s": 600});
            tokio::spawn(async move {
                let Value::Object(args) = args else {
                    return false;
                };
                let r = peer
                    .call_tool(CallToolRequestParams::new("execute").with_arguments(args))
                    .await;
                matches!(r, Ok(r) if structured(&r)["status"] == "ok")
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        ok += usize::from(t.await?);
    }
    if ok < ids.len() {
        return Err(format!("{} of {} floods did not end ok", ids.len() - ok, ids.len()).into());
    }
    Ok((proc_status_kib(server_pid, "VmHWM:"), ok))
}

/// create_session from a warm pool of one kernel, `o.starts` times each: the pool's own
/// launch, and a session with its own cwd and env (the pooled kernel is adapted). Each waits
/// for the pool to be ready (server_info), times create_session, destroys.
async fn pooled_creates(bin: &Path, o: &Opts) -> Res<(Vec<f64>, Vec<f64>)> {
    let pool = format!("{}=1", o.kernel);
    let (client, pid) = spawn_with(bin, &["serve", "--pool", &pool], &[]).await?;
    let cwd = tempfile::tempdir()?;
    let (mut exact, mut adapted) = (Vec::new(), Vec::new());
    for i in 0..o.starts * 2 {
        wait_for_pool(&client, &o.kernel).await?;
        let id = format!("pooled-{i}");
        let mut args = json!({"session_id": id, "kernel": o.kernel});
        if i % 2 == 1 {
            args["cwd"] = json!(cwd.path());
            args["env"] = json!({"BENCH_VAR": "1", "BENCH_PATH": "/tmp"});
        }
        let t0 = Instant::now();
        let r = call(&client, "create_session", args).await?;
        check_tool(&r, "create_session")?;
        wait_until_ready(&client, &id, &r).await?;
        let took = ms(t0);
        if i % 2 == 1 {
            adapted.push(took);
        } else {
            exact.push(took);
        }
        destroy(&client, &id).await?;
    }
    close(client, pid).await;
    eprintln!(
        "bench: create_session from the pool x{} (and x{} with its own cwd and env): done",
        o.starts, o.starts
    );
    Ok((exact, adapted))
}

/// (g) execute 1+1 through `serve --shared` against a private service; the service is stopped
/// at the end (SIGTERM to the pid in its lock file).
async fn relay(bin: &Path, o: &Opts) -> Res<Vec<f64>> {
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("run/service.sock");
    let env = [
        ("KERNEL_MCP_SOCKET", sock.clone().into_os_string()),
        ("XDG_STATE_HOME", dir.path().join("state").into_os_string()),
        (
            "XDG_RUNTIME_DIR",
            dir.path().join("xdg-run").into_os_string(),
        ),
    ];
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let result = async {
        let (client, _) = spawn_with(bin, &["serve", "--shared"], &env).await?;
        let id = "bench-relay";
        create(&client, id, &o.kernel).await?;
        // The service refills its warm pool after the create: measure once that start is over.
        wait_for_pool(&client, &o.kernel).await?;
        for _ in 0..o.warmup {
            execute_1p1(&client, id).await?;
        }
        let mut lat = Vec::with_capacity(o.n);
        for _ in 0..o.n {
            let t0 = Instant::now();
            execute_1p1(&client, id).await?;
            lat.push(ms(t0));
        }
        destroy(&client, id).await?;
        let _ = client.cancel().await;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(lat)
    }
    .await;
    let mut lock = sock.into_os_string();
    lock.push(".lock");
    if let Some(pid) = std::fs::read_to_string(&lock)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
        for _ in 0..100 {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    eprintln!("bench: relay execute 1+1 x{}: done", o.n);
    result
}

/// Wait (up to 120 s) until the server's warm pool for `kernel` has a ready kernel.
async fn wait_for_pool(client: &Client, kernel: &str) -> Res<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = call(client, "server_info", json!({})).await?;
        if structured(&r)["pool"][kernel]["ready"].as_u64() >= Some(1) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the warm pool never got ready".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// End a server: close its stdin, then wait (up to 20 s) until the process, which shuts its
/// kernels down first, is gone, so the next figure does not share the CPU with that shutdown.
pub(crate) async fn close(client: Client, pid: Option<u32>) {
    let _ = client.cancel().await;
    let Some(pid) = pid else { return };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// (h) The size of `tools/list` (its JSON) for each toolset, with its cap (docs/tools.md).
async fn tools_list_sizes(bin: &Path) -> Res<Vec<(&'static str, usize, usize, usize)>> {
    let mut out = Vec::new();
    for (label, args, cap) in [
        ("default", &[][..], 16_000usize),
        ("--tools all", &["serve", "--tools", "all"][..], usize::MAX),
        (
            "--tools minimal",
            &["serve", "--tools", "minimal"][..],
            5_000,
        ),
        ("--tools code", &["serve", "--tools", "code"][..], 4_000),
    ] {
        let (client, _) = spawn_with(bin, args, &[]).await?;
        let tools = client.list_all_tools().await?;
        let bytes = serde_json::to_string(&json!({ "tools": tools }))?.len();
        let _ = client.cancel().await;
        out.push((label, tools.len(), bytes, cap));
    }
    Ok(out)
}

pub(crate) async fn spawn_with(
    bin: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Res<(Client, Option<u32>)> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // BENCH_SERVER_STDERR=1 lets the server's log through (with KERNEL_MCP_LOG, e.g.
    // `kernel_mcp::timing=trace`, to see where a row's time goes).
    let stderr = match std::env::var_os("BENCH_SERVER_STDERR") {
        Some(_) => Stdio::inherit(),
        None => Stdio::null(),
    };
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(stderr).spawn()?;
    let pid = transport.id();
    let client = ().serve(transport).await?;
    Ok((client, pid))
}

pub(crate) async fn create(client: &Client, id: &str, kernel: &str) -> Res<CallToolResult> {
    let r = call(
        client,
        "create_session",
        json!({"session_id": id, "kernel": kernel}),
    )
    .await?;
    check_tool(&r, "create_session")?;
    wait_until_ready(client, id, &r).await?;
    Ok(r)
}

async fn destroy(client: &Client, id: &str) -> Res<()> {
    let r = call(client, "destroy_session", json!({"session_id": id})).await?;
    check_tool(&r, "destroy_session")
}

/// create_session should return once the kernel is ready; if it answered `starting`,
/// poll list_sessions (the wait counts as start time).
pub(crate) async fn wait_until_ready(
    client: &Client,
    id: &str,
    created: &CallToolResult,
) -> Res<()> {
    if structured(created)["status"] != "starting" {
        return Ok(());
    }
    poll_ready(client, id, Duration::from_millis(5)).await
}

/// Poll list_sessions every `every` until session `id` is no longer starting (up to 60 s).
pub(crate) async fn poll_ready(client: &Client, id: &str, every: Duration) -> Res<()> {
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
        tokio::time::sleep(every).await;
    }
    Err(format!("session {id} still starting after 60 s").into())
}

pub(crate) async fn execute_1p1(client: &Client, session: &str) -> Res<CallToolResult> {
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
    Ok(r)
}

/// Bytes of the text content blocks of a result.
fn text_bytes(r: &CallToolResult) -> usize {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum()
}

pub(crate) async fn call(client: &Client, tool: &'static str, args: Value) -> Res<CallToolResult> {
    let Value::Object(args) = args else {
        unreachable!("tool arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .map_err(|e| format!("{tool}: {e}").into())
}

pub fn structured(r: &CallToolResult) -> &Value {
    static NULL: Value = Value::Null;
    r.structured_content.as_ref().unwrap_or(&NULL)
}

pub(crate) fn check_tool(r: &CallToolResult, what: &str) -> Res<()> {
    if r.is_error == Some(true) {
        let s = structured(r);
        return Err(format!("{what}: {} {}", s["error_code"], s["message"]).into());
    }
    Ok(())
}
