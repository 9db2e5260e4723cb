//! Soak: many sessions under a mixed workload for minutes, watching the server for growth,
//! cross-talk and leftover processes (`make soak`; not part of `make test`).
//!
//! One kernel-mcp (MCP over stdio) and one rmcp client. `SOAK_SESSIONS` workers (default
//! 32), each with a session of its own, loop for `SOAK_SECS` (default 600) picking actions:
//! tagged executes (stdout, stderr and result each carry the worker's tag and a counter, and
//! the run must show that tag and no other), floods, interrupts, timeouts, `input()`,
//! restarts, destroy/create, and SIGKILL of the kernel. A sampler prints the server's RSS,
//! open fds, threads and the number of live kernel processes every `SOAK_SAMPLE_SECS`
//! (default 15) and the trend at the end. The server's log (`SOAK_LOG` filter, default
//! `kernel_mcp=info`) goes to `SOAK_SERVER_LOG` (default `target/soak-server.log`); a run
//! still going 150 s after it was sent is reported as a hang with its session's state.
//! `SOAK_HOLD_SECS` (default 0) keeps the server alive that long once every session is
//! destroyed, with its pid printed, so what it still holds can be inspected (gdb, /proc).
//!
//! It passes (exit 0) when no run showed another run's output, every action ended as its
//! kind must, the server's RSS, fds and threads in the last third of the run stay within
//! bounds of the middle third (nothing grows without bound), and no kernel process is left
//! once the sessions are destroyed and the server has exited.
//!
//! ```text
//! cargo build --release --bins --examples
//! VIRTUAL_ENV=$PWD/.venv SOAK_SECS=60 target/release/examples/soak
//! ```

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;
type Client = RunningService<RoleClient, ()>;

/// A run still going this long (s) after it was sent is a hang.
const HANG_SECS: u64 = 150;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `target/<profile>/examples/soak` → `target/<profile>/kernel-mcp`, or `KERNEL_MCP_BIN`.
fn server_binary() -> Res<PathBuf> {
    if let Some(p) = std::env::var_os("KERNEL_MCP_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot locate the target directory")?;
    Ok(dir.join("kernel-mcp"))
}

/// One sample of the server process.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at_s: u64,
    rss_kib: u64,
    fds: u64,
    threads: u64,
    kernels: u64,
}

fn status_field(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Every process whose ancestry reaches `root` (from /proc's ppid links).
fn descendants(root: u32) -> Vec<u32> {
    let mut parent = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let ppid = status_field(pid, "PPid:");
            parent.insert(pid, ppid as u32);
        }
    }
    parent
        .keys()
        .copied()
        .filter(|&p| {
            let mut cur = p;
            for _ in 0..64 {
                match parent.get(&cur) {
                    Some(&pp) if pp == root => return true,
                    Some(&pp) if pp > 1 => cur = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

fn is_kernel(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            // The kernel itself, not the `kernel-mcp supervise` process above it.
            let c = String::from_utf8_lossy(&c);
            c.contains("ipykernel") && !c.contains("supervise")
        })
        .unwrap_or(false)
}

fn sample(server: u32, start: Instant) -> Sample {
    let fds = std::fs::read_dir(format!("/proc/{server}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    Sample {
        at_s: start.elapsed().as_secs(),
        rss_kib: status_field(server, "VmRSS:"),
        fds,
        threads: status_field(server, "Threads:"),
        kernels: descendants(server)
            .into_iter()
            .filter(|&p| is_kernel(p))
            .count() as u64,
    }
}

async fn call(client: &Client, tool: &str, args: Value) -> Res<CallToolResult> {
    let Value::Object(args) = args else {
        return Err("arguments must be an object".into());
    };
    let r = tokio::time::timeout(
        Duration::from_secs(180),
        client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)),
    )
    .await
    .map_err(|_| format!("{tool}: no answer in 180 s"))??;
    Ok(r)
}

fn sc(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// Counts per action kind, and failures with their reasons.
#[derive(Default)]
struct Tally {
    done: BTreeMap<&'static str, u64>,
    failures: Vec<String>,
    cross_talk: u64,
}

/// A small deterministic PRNG (xorshift64*), one per worker.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The first tag-looking token `T<worker>x<n>` in `text` that is not `tag`.
fn foreign_tag(text: &str, tag: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.starts_with("SOAKw") && w.contains('n'))
        .find(|w| *w != tag)
        .map(str::to_string)
}

async fn worker(
    client: Arc<Client>,
    id: u64,
    deadline: Instant,
    tally: Arc<Mutex<Tally>>,
    counter: Arc<AtomicU64>,
) {
    let session = format!("soak-{id}");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (id + 1).wrapping_mul(0x1000_0000_01b3));
    let create = |client: Arc<Client>, s: String| async move {
        call(&client, "create_session", json!({"session_id": s})).await
    };
    if let Err(e) = create(client.clone(), session.clone()).await {
        tally
            .lock()
            .await
            .failures
            .push(format!("{session}: create: {e}"));
        return;
    }
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        counter.fetch_add(1, Ordering::Relaxed);
        let tag = format!("SOAKw{id}n{n}");
        let roll = rng.next() % 100;
        let (kind, outcome): (&'static str, Res<()>) = match roll {
            0..=59 => ("tagged", tagged(&client, &session, &tag).await),
            60..=66 => ("flood", flood(&client, &session, &tag).await),
            67..=72 => ("interrupt", interrupt(&client, &session).await),
            73..=78 => ("timeout", timeout(&client, &session).await),
            79..=86 => ("input", input(&client, &session, &tag).await),
            87..=91 => ("restart", restart(&client, &session).await),
            92..=95 => ("recreate", recreate(&client, &session).await),
            _ => ("kill", kill_kernel(&client, &session).await),
        };
        let mut t = tally.lock().await;
        *t.done.entry(kind).or_default() += 1;
        if let Err(e) = outcome {
            let e = e.to_string();
            if e.starts_with("cross-talk") {
                t.cross_talk += 1;
            }
            t.failures.push(format!("{session} {kind} #{n}: {e}"));
        }
    }
    let _ = call(&client, "destroy_session", json!({"session_id": session})).await;
}

/// Run `code` in `session`, following a still-running run to its end.
async fn run(client: &Client, session: &str, code: &str, extra: Value) -> Res<Value> {
    let mut args = json!({"session_id": session, "code": code});
    if let (Value::Object(a), Value::Object(e)) = (&mut args, extra) {
        a.extend(e);
    }
    let mut v = sc(&call(client, "execute", args).await?);
    follow(client, session, &mut v).await?;
    Ok(v)
}

/// Follow a queued or running run to its end; one still going after [`HANG_SECS`] is a hang,
/// reported with the session's state.
async fn follow(client: &Client, session: &str, v: &mut Value) -> Res<()> {
    let start = Instant::now();
    while matches!(v["status"].as_str(), Some("running" | "queued")) {
        if start.elapsed() > Duration::from_secs(HANG_SECS) {
            let info = sc(&call(client, "get_session", json!({"session_id": session})).await?);
            return Err(format!(
                "hang: run still {} after {HANG_SECS} s: {v}\nsession: {info}",
                v["status"]
            )
            .into());
        }
        let run_id = v["run_id"].clone();
        *v = sc(&call(
            client,
            "get_execution",
            json!({"run_id": run_id, "wait_s": 30}),
        )
        .await?);
    }
    Ok(())
}

/// After a kernel kill the next run may report the death or the reset; retry once.
async fn run_settled(client: &Client, session: &str, code: &str) -> Res<Value> {
    let v = run(client, session, code, json!({})).await?;
    if v["status"] == "kernel_died" {
        return run(client, session, code, json!({})).await;
    }
    Ok(v)
}

async fn tagged(client: &Client, session: &str, tag: &str) -> Res<()> {
    let code = format!("import sys\nprint('{tag}')\nprint('{tag}', file=sys.stderr)\n'{tag}'");
    let v = run_settled(client, session, &code).await?;
    for part in ["stdout", "stderr", "result"] {
        let text = v[part].as_str().unwrap_or("");
        if let Some(other) = foreign_tag(text, tag) {
            return Err(format!("cross-talk: {part} of {tag} shows {other}: {v}").into());
        }
    }
    if v["status"] != "ok"
        || lines(&v["stdout"]) != [tag]
        || lines(&v["stderr"]) != [tag]
        || v["result"] != format!("'{tag}'")
    {
        return Err(format!("unexpected result: {v}").into());
    }
    Ok(())
}

/// The non-empty lines of a stream, without IPython's own warning that its history database
/// is locked (every kernel of a soak shares one `~/.ipython`; the kernel prints it, and it is
/// not another run's output).
fn lines(v: &Value) -> Vec<&str> {
    const IPYTHON_HISTORY_LOCKED: &str = "The history saving thread hit an unexpected error (OperationalError('database is locked')).History will not be written to the database.";
    v.as_str()
        .unwrap_or("")
        .split('\n')
        .flat_map(|l| l.split(IPYTHON_HISTORY_LOCKED))
        .filter(|l| !l.is_empty())
        .collect()
}

async fn flood(client: &Client, session: &str, tag: &str) -> Res<()> {
    let code = format!("for k in range(40000): print('{tag}', k)");
    let v = run_settled(client, session, &code).await?;
    if let Some(other) = foreign_tag(v["stdout"].as_str().unwrap_or(""), tag) {
        return Err(format!("cross-talk: flood {tag} shows {other}").into());
    }
    let total = v["truncated"]["stdout"]["total_bytes"].as_u64();
    if v["status"] != "ok" || total.is_none_or(|t| t < 400_000) {
        return Err(format!(
            "flood not ok or not bounded: status {} truncated {}",
            v["status"], v["truncated"]
        )
        .into());
    }
    Ok(())
}

async fn interrupt(client: &Client, session: &str) -> Res<()> {
    let v = sc(&call(
        client,
        "execute",
        json!({"session_id": session, "code": "import time\ntime.sleep(20)", "wait_s": 0.5}),
    )
    .await?);
    if v["status"] != "running" {
        return Ok(()); // e.g. kernel_died after a kill: nothing to interrupt
    }
    call(client, "interrupt_session", json!({"session_id": session})).await?;
    let mut end = sc(&call(
        client,
        "get_execution",
        json!({"run_id": v["run_id"], "wait_s": 30}),
    )
    .await?);
    follow(client, session, &mut end).await?;
    match end["status"].as_str() {
        Some("interrupted" | "kernel_died") => Ok(()),
        other => Err(format!("after interrupt: {other:?}").into()),
    }
}

async fn timeout(client: &Client, session: &str) -> Res<()> {
    let v = run(
        client,
        session,
        "import time\ntime.sleep(20)",
        json!({"timeout_s": 0.5}),
    )
    .await?;
    match v["status"].as_str() {
        Some("timeout" | "kernel_died") => Ok(()),
        other => Err(format!("timeout run ended {other:?}").into()),
    }
}

async fn input(client: &Client, session: &str, tag: &str) -> Res<()> {
    let v = sc(&call(
        client,
        "execute",
        json!({"session_id": session, "code": "x = input('answer? ')\nprint('got', x)"}),
    )
    .await?);
    if v["status"] != "awaiting_input" {
        return match v["status"].as_str() {
            Some("kernel_died") => Ok(()),
            other => Err(format!("input run: {other:?}").into()),
        };
    }
    let mut end = sc(&call(
        client,
        "send_input",
        json!({"run_id": v["run_id"], "value": tag}),
    )
    .await?);
    follow(client, session, &mut end).await?;
    if end["status"] != "ok" || end["stdout"] != format!("got {tag}\n") {
        return Err(format!("input answered {tag}, run shows {end}").into());
    }
    Ok(())
}

async fn restart(client: &Client, session: &str) -> Res<()> {
    let r = call(client, "restart_session", json!({"session_id": session})).await?;
    if r.is_error == Some(true) {
        return Err(format!("restart: {}", sc(&r)).into());
    }
    Ok(())
}

async fn recreate(client: &Client, session: &str) -> Res<()> {
    call(client, "destroy_session", json!({"session_id": session})).await?;
    let r = call(client, "create_session", json!({"session_id": session})).await?;
    if r.is_error == Some(true) {
        return Err(format!("create after destroy: {}", sc(&r)).into());
    }
    Ok(())
}

async fn kill_kernel(client: &Client, session: &str) -> Res<()> {
    let s = sc(&call(client, "get_session", json!({"session_id": session})).await?);
    if let Some(pid) = s["pid"].as_i64() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let v = run_settled(client, session, "1+1").await?;
    if v["status"] != "ok" {
        return Err(format!("after a kernel kill the next run ended {v}").into());
    }
    Ok(())
}

fn mean(xs: &[Sample], f: fn(&Sample) -> u64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().map(f).sum::<u64>() as f64 / xs.len() as f64
}

#[tokio::main]
async fn main() {
    match soak().await {
        Ok(true) => println!("soak PASSED"),
        Ok(false) => {
            println!("soak FAILED");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("soak FAILED: {e}");
            std::process::exit(1);
        }
    }
}

async fn soak() -> Res<bool> {
    let sessions = env_u64("SOAK_SESSIONS", 32);
    let secs = env_u64("SOAK_SECS", 600);
    let every = env_u64("SOAK_SAMPLE_SECS", 15);
    let state = tempfile::tempdir()?;
    let mut cmd = tokio::process::Command::new(server_binary()?);
    cmd.env("XDG_STATE_HOME", state.path().join("state"))
        .env("XDG_CONFIG_HOME", state.path().join("config"))
        .env(
            "KERNEL_MCP_LOG",
            std::env::var("SOAK_LOG").unwrap_or("kernel_mcp=info".into()),
        )
        .current_dir(state.path());
    let log_path = std::env::var("SOAK_SERVER_LOG").unwrap_or("target/soak-server.log".into());
    let log = std::fs::File::create(&log_path)?;
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::from(log))
        .spawn()?;
    let server = transport.id().ok_or("no server pid")?;
    let client = Arc::new(().serve(transport).await?);
    println!("soak: {sessions} sessions for {secs} s, server pid {server}, its log in {log_path}");

    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let counter = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(vec![sample(server, start)]));
    let sampler = {
        let (samples, stop, counter) = (samples.clone(), stop.clone(), counter.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_secs(every)).await;
                let s = sample(server, start);
                println!(
                    "t={:>4}s rss={:>7} KiB fds={:>4} threads={:>3} kernels={:>3} actions={}",
                    s.at_s,
                    s.rss_kib,
                    s.fds,
                    s.threads,
                    s.kernels,
                    counter.load(Ordering::Relaxed)
                );
                samples.lock().await.push(s);
            }
        })
    };
    let workers: Vec<_> = (0..sessions)
        .map(|i| {
            tokio::spawn(worker(
                client.clone(),
                i,
                deadline,
                tally.clone(),
                counter.clone(),
            ))
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let after_destroy = sample(server, start);
    let tree = descendants(server);
    let hold = env_u64("SOAK_HOLD_SECS", 0);
    if hold > 0 {
        println!("soak: every session destroyed; holding server pid {server} for {hold} s");
        tokio::time::sleep(Duration::from_secs(hold)).await;
        println!(
            "soak: after the hold rss={} KiB",
            sample(server, start).rss_kib
        );
    }

    // Close the client (stdin): the server shuts down and exits.
    if let Ok(client) = Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
    let gone = Instant::now();
    while Path::new(&format!("/proc/{server}")).exists() && gone.elapsed() < Duration::from_secs(30)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left: Vec<u32> = tree
        .into_iter()
        .filter(|p| Path::new(&format!("/proc/{p}")).exists())
        .collect();

    let samples = samples.lock().await.clone();
    let t = tally.lock().await;
    let third = samples.len() / 3;
    let (middle, last) = (&samples[third..2 * third], &samples[2 * third..]);
    let (rss_mid, rss_end) = (mean(middle, |s| s.rss_kib), mean(last, |s| s.rss_kib));
    let (fds_mid, fds_end) = (mean(middle, |s| s.fds), mean(last, |s| s.fds));
    let (thr_mid, thr_end) = (mean(middle, |s| s.threads), mean(last, |s| s.threads));
    println!(
        "\nactions: {:?} (total {})",
        t.done,
        counter.load(Ordering::Relaxed)
    );
    println!(
        "rss KiB: start {} / middle third mean {:.0} / last third mean {:.0} / end {}",
        samples[0].rss_kib,
        rss_mid,
        rss_end,
        samples.last().map_or(0, |s| s.rss_kib)
    );
    println!(
        "fds: start {} / middle {fds_mid:.0} / last {fds_end:.0} / after destroy {}",
        samples[0].fds, after_destroy.fds
    );
    println!(
        "threads: start {} / middle {thr_mid:.0} / last {thr_end:.0}",
        samples[0].threads
    );
    println!(
        "kernels after destroy: {}; processes left after exit: {:?}",
        after_destroy.kernels, left
    );
    let mut ok = true;
    let mut fail = |why: String| {
        println!("FAIL: {why}");
        ok = false;
    };
    if t.cross_talk > 0 {
        fail(format!("{} runs showed another run's output", t.cross_talk));
    }
    for f in t.failures.iter().take(20) {
        println!("  failure: {f}");
    }
    if !t.failures.is_empty() {
        fail(format!(
            "{} actions did not end as they must",
            t.failures.len()
        ));
    }
    // Growth bounds: the last third may exceed the middle third by 25 % plus slack.
    if samples.len() >= 6 {
        if rss_end > rss_mid * 1.25 + 32.0 * 1024.0 {
            fail(format!("RSS grew: {rss_mid:.0} → {rss_end:.0} KiB"));
        }
        if fds_end > fds_mid * 1.25 + 16.0 {
            fail(format!("fds grew: {fds_mid:.0} → {fds_end:.0}"));
        }
        if thr_end > thr_mid * 1.25 + 4.0 {
            fail(format!("threads grew: {thr_mid:.0} → {thr_end:.0}"));
        }
    }
    if after_destroy.kernels > 0 {
        fail(format!(
            "{} kernels alive after every session was destroyed",
            after_destroy.kernels
        ));
    }
    if !left.is_empty() {
        fail(format!("processes left after the server exited: {left:?}"));
    }
    Ok(ok)
}
