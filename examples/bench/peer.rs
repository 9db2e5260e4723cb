//! (l) The MCP peer: jupyter-mcp-kernel (pinned in the Makefile's `make peer`, PyPI), the best
//! MCP server with its own kernel we know of: FastMCP over stdio, a TCP daemon on 127.0.0.1
//! holding one ipykernel, a new TCP connection per call. Both servers are driven by the same
//! rmcp client, in this one process:
//!   - start: spawn → initialized → the first `1+1` answered (the peer starts its daemon and
//!     kernel on the first call; kernel-mcp on `create_session`), one fresh server each;
//!   - `execute 1+1` (the peer's `execute_code`), in blocks of 20 alternating between the two
//!     servers so both see the same machine load.
//!
//! Skipped, with a note, when the peer is not installed (`KERNEL_MCP_BENCH_PEER`, default
//! `target/peer-venv/bin/jupyter-mcp`). The peer's daemon outlives its MCP server (it is
//! detached and listens on a fixed port, 9999), so at the end the daemon is asked to shut
//! down through the peer's `shutdown_kernel` tool, and killed by the pid in its lock file if
//! it is still there after 10 s.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolResult;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::mcp_side::{Client, call, close, create, execute_1p1, first_text, spawn_with};
use crate::stats::ms;
use crate::{Opts, Res};

const BLOCK: usize = 20;

pub struct Figures {
    /// spawn → the first `1+1` answered, ms (one each).
    pub ours_start_ms: f64,
    pub peer_start_ms: f64,
    /// `execute 1+1`, ms, alternating blocks.
    pub ours_ms: Vec<f64>,
    pub peer_ms: Vec<f64>,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        json!({
            "peer": "jupyter-mcp-kernel",
            "ours_start_ms": self.ours_start_ms,
            "peer_start_ms": self.peer_start_ms,
            "ours_execute_ms": crate::stats::summary(&self.ours_ms),
            "peer_execute_ms": crate::stats::summary(&self.peer_ms),
        })
    }
}

fn peer_binary() -> PathBuf {
    std::env::var_os("KERNEL_MCP_BENCH_PEER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peer-venv/bin/jupyter-mcp")
        })
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Option<Figures>> {
    let peer_bin = peer_binary();
    if !peer_bin.is_file() {
        eprintln!(
            "bench: no peer rows ({} is not installed: run `make peer`)",
            peer_bin.display()
        );
        return Ok(None);
    }
    let lock = daemon_lock_file(&peer_bin);
    if let Some(pid) = lock.as_deref().and_then(daemon_pid) {
        return Err(format!(
            "the peer's daemon (pid {pid}, lock file {}) is already running: stop it first",
            lock.as_deref().unwrap_or(Path::new("?")).display()
        )
        .into());
    }

    let t0 = Instant::now();
    let (ours, ours_pid) = spawn_with(bin, &[], &[]).await?;
    create(&ours, "bench-peer", &o.kernel).await?;
    execute_1p1(&ours, "bench-peer").await?;
    let ours_start_ms = ms(t0);

    let outcome = async {
        let t0 = Instant::now();
        let cmd = tokio::process::Command::new(&peer_bin);
        // Its prints to stdout go into the MCP stream; rmcp skips lines that are not JSON-RPC.
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()?;
        let peer = ().serve(transport).await?;
        let r = peer_execute(&peer).await;
        let peer_start_ms = ms(t0);
        let timed = match r {
            Ok(()) => alternate(&ours, &peer, o).await,
            Err(e) => Err(e),
        };
        let _ = call(&peer, "shutdown_kernel", json!({})).await;
        let _ = peer.cancel().await;
        timed.map(|(ours_ms, peer_ms)| (peer_start_ms, ours_ms, peer_ms))
    }
    .await;
    if let Some(lock) = &lock {
        stop_daemon(lock).await;
    }
    close(ours, ours_pid).await;
    let (peer_start_ms, ours_ms, peer_ms) = outcome?;
    eprintln!("bench: peer (jupyter-mcp-kernel) x{}: done", o.n);
    Ok(Some(Figures {
        ours_start_ms,
        peer_start_ms,
        ours_ms,
        peer_ms,
    }))
}

/// `o.warmup` untimed calls each, then `o.n` timed ones each in alternating blocks.
async fn alternate(ours: &Client, peer: &Client, o: &Opts) -> Res<(Vec<f64>, Vec<f64>)> {
    for _ in 0..o.warmup {
        execute_1p1(ours, "bench-peer").await?;
        peer_execute(peer).await?;
    }
    let (mut a, mut b) = (Vec::with_capacity(o.n), Vec::with_capacity(o.n));
    while a.len() < o.n {
        let k = BLOCK.min(o.n - a.len());
        for _ in 0..k {
            let t0 = Instant::now();
            execute_1p1(ours, "bench-peer").await?;
            a.push(ms(t0));
        }
        for _ in 0..k {
            let t0 = Instant::now();
            peer_execute(peer).await?;
            b.push(ms(t0));
        }
    }
    Ok((a, b))
}

/// The peer's `execute_code` of `1+1`; its result is the text "2".
async fn peer_execute(peer: &Client) -> Res<()> {
    let r: CallToolResult = call(peer, "execute_code", json!({"code": "1+1"})).await?;
    let text = first_text(&r);
    if r.is_error == Some(true) || text.trim() != "2" {
        return Err(format!("the peer's execute_code 1+1 answered {text:?}").into());
    }
    Ok(())
}

/// The daemon's lock file (JSON with its pid and port), next to the peer's modules in the
/// venv's site-packages.
fn daemon_lock_file(peer_bin: &Path) -> Option<PathBuf> {
    let lib = peer_bin.parent()?.parent()?.join("lib");
    std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|d| d.path().join("site-packages/.kernel_daemon.lock"))
        .find(|p| p.parent().is_some_and(Path::is_dir))
}

/// The pid in the lock file, if that process is alive.
fn daemon_pid(lock: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(lock).ok()?;
    let pid = serde_json::from_str::<Value>(&text).ok()?["pid"].as_i64()? as i32;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// Wait up to 10 s for the daemon (asked to shut down) to go, then kill its children (the
/// kernel) and the daemon itself, and remove the lock file.
async fn stop_daemon(lock: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(pid) = daemon_pid(lock) {
        if Instant::now() >= deadline {
            eprintln!("bench: the peer's daemon (pid {pid}) did not stop; killing it");
            let _ = std::process::Command::new("pkill")
                .args(["-KILL", "-P", &pid.to_string()])
                .status();
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let _ = std::fs::remove_file(lock);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
