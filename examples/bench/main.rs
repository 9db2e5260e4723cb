//! `make bench`: kernel-mcp over MCP stdio next to two references driving the same kernelspec
//! in the same run: a raw Rust client (`zeromq` + the crate's `wire/` only, see `raw.rs`) and
//! jupyter_client (bench/jupyter_client_ref.py).
//!
//! Measures, one side after the other (no competition for CPU between sides):
//!   (a) `execute 1+1` round trips (median, p95 over N);
//!   (b) kernel-mcp spawn → MCP initialized;
//!   (c) cold `create_session` vs start → ready, and `destroy_session` vs `shutdown_kernel`;
//!       `create_session` from the warm pool, as launched and with its own cwd and env;
//!   (d) RSS of the client process (kernel-mcp, the raw client, the Python driver), the kernel's;
//!   (e) 50 MB printed as 50 000 lines: time until done and the client's peak RSS;
//!   (f) `--sessions` sessions × `--per` executes at once: p50, p99, executes/s and the
//!       client's (kernel-mcp server's) CPU time per execute; then each of those sessions
//!       prints 50 MB at once: the client's peak RSS (the raw client counts the text and
//!       drops it; kernel-mcp keeps every byte, spooled) (`--no-floods` skips it);
//!   (g) through the service relay (`serve --shared`) vs direct stdio;
//!   (h) tools/list bytes (default, all, minimal, code) and a trivial result's text bytes;
//!   (i) on a Jupyter Kernel Gateway started for the run: cold start and `execute 1+1`,
//!       kernel-mcp (`--gateway`) next to a plain Python websockets client (gateway.rs);
//!   (j) the broker: `mcp.call` of server-everything's `echo` from a cell, next to the same
//!       call from an rmcp client straight to the server (broker.rs);
//!   (k) `fork_session` of a session holding ~500 MB next to `create_session` plus its history
//!       run again (fork.rs; `--no-fork` skips it);
//!   (l) the MCP peer jupyter-mcp-kernel (`make peer`), driven by the same rmcp client: start to
//!       the first result and `execute 1+1`, alternating with kernel-mcp (peer.rs; `--no-peer`);
//!   (m) OAuth: checking a JWT access token with the issuer's keys cached, next to the static
//!       token (oauth.rs; `--no-oauth`);
//!   (n) OAuth under load: 8 principals × 4 sessions × 200 executes at once over stateless
//!       HTTP, checked for cross-talk (oauth_load.rs; `--load-principals`, `--load-sessions`,
//!       `--load-per`; `--no-load`).
//!   (o) telemetry: `execute 1+1` with OpenTelemetry export on next to export off, the calls
//!       alternating between the two servers (otel.rs; `--no-otel`; `--only-otel` runs this
//!       row alone).
//!   (p) notebooks: `execute_cells` of a 100-cell notebook next to nbclient running the same
//!       notebook on the same kernelspec, repetitions alternating which goes first, kernel
//!       start apart; `read_cells` pages of a 1 000-cell notebook (notebooks.rs; `--nb-reps`,
//!       `--no-notebooks`; `--only-notebooks` runs this row alone).
//! Then prints one table with ratios to the raw client and to jupyter_client, and with
//! `--json PATH` writes every row and the raw figures of each side.
//!
//! ```text
//! cargo build --release --bins --examples
//! VIRTUAL_ENV=$PWD/.venv cargo run --release --example bench [-- --n 200 --starts 3 --json target/bench.json]
//! ```
//! Environment: `KERNEL_MCP_BIN` (server binary; default: next to this example's
//! executable), `KERNEL_MCP_BENCH_PYTHON` (interpreter for the reference script; default
//! `$VIRTUAL_ENV/bin/python`, else `./.venv/bin/python`), `KERNEL_MCP_BENCH_KERNEL`
//! (kernelspec name, default python3), `KERNEL_MCP_BENCH_PEER` (the peer's `jupyter-mcp`;
//! default `target/peer-venv/bin/jupyter-mcp`).

mod broker;
mod fork;
mod gateway;
mod line_client;
mod mcp_side;
mod nb_corpus;
mod notebooks;
mod oauth;
mod oauth_load;
mod otel;
mod peer;
mod raw;
mod stats;
mod table;
mod turns;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use serde_json::Value;

pub type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// The same code as FLOOD_CODE in bench/jupyter_client_ref.py.
pub const FLOOD_CODE: &str = "for _ in range(50_000):\n    print('x' * 999)";

pub struct Opts {
    pub n: usize,
    pub warmup: usize,
    pub starts: usize,
    pub spawns: usize,
    pub kernel: String,
    /// Concurrent row: sessions (0 = skip) × executes per session.
    pub sessions: usize,
    pub per: usize,
    pub json: Option<PathBuf>,
    /// Run as the raw reference child (prints JSON).
    pub raw_reference: bool,
    /// Skip the relay row.
    pub no_relay: bool,
    /// Skip the Kernel Gateway rows.
    pub no_gateway: bool,
    /// Skip the concurrent floods (every concurrent session printing 50 MB at once).
    pub no_floods: bool,
    /// Skip the broker rows.
    pub no_broker: bool,
    /// Skip the fork_session rows.
    pub no_fork: bool,
    /// Skip the MCP peer's rows.
    pub no_peer: bool,
    /// Skip the OAuth rows.
    pub no_oauth: bool,
    /// The OAuth load row: principals × sessions each × executes per session.
    pub load_principals: usize,
    pub load_sessions: usize,
    pub load_per: usize,
    /// Skip the OAuth load row.
    pub no_load: bool,
    /// Skip the telemetry rows.
    pub no_otel: bool,
    /// Run the telemetry rows only.
    pub only_otel: bool,
    /// Notebook row: repetitions of the 100-cell run on each side.
    pub nb_reps: usize,
    /// Skip the notebook rows.
    pub no_notebooks: bool,
    /// Run the notebook rows only.
    pub only_notebooks: bool,
}

// Two workers whatever TOKIO_WORKER_THREADS says: that variable is for the server under test
// (its sessions runtime reads it), not for the clients measuring it.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
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
        sessions: 16,
        per: 100,
        json: None,
        raw_reference: false,
        no_relay: false,
        no_gateway: false,
        no_floods: false,
        no_broker: false,
        no_fork: false,
        no_peer: false,
        no_oauth: false,
        load_principals: 8,
        load_sessions: 4,
        load_per: 200,
        no_load: false,
        no_otel: false,
        only_otel: false,
        nb_reps: 5,
        no_notebooks: false,
        only_notebooks: false,
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
            "--sessions" => o.sessions = val()?.parse()?,
            "--per" => o.per = val()?.parse()?,
            "--json" => o.json = Some(val()?.into()),
            "--raw-reference" => o.raw_reference = true,
            "--no-relay" => o.no_relay = true,
            "--no-gateway" => o.no_gateway = true,
            "--no-floods" => o.no_floods = true,
            "--no-broker" => o.no_broker = true,
            "--no-fork" => o.no_fork = true,
            "--no-peer" => o.no_peer = true,
            "--no-oauth" => o.no_oauth = true,
            "--load-principals" => o.load_principals = val()?.parse()?,
            "--load-sessions" => o.load_sessions = val()?.parse()?,
            "--load-per" => o.load_per = val()?.parse()?,
            "--no-load" => o.no_load = true,
            "--no-otel" => o.no_otel = true,
            "--only-otel" => o.only_otel = true,
            "--nb-reps" => o.nb_reps = val()?.parse()?,
            "--no-notebooks" => o.no_notebooks = true,
            "--only-notebooks" => o.only_notebooks = true,
            _ => {
                return Err(format!(
                    "unknown argument {a:?} (known: --n --warmup --starts --spawns --kernel \
                     --sessions --per --json --raw-reference --no-relay --no-gateway --no-broker \
                     --no-floods --no-fork --no-peer --no-oauth --load-principals \
                     --load-sessions --load-per --no-load --no-otel --only-otel --nb-reps \
                     --no-notebooks --only-notebooks)"
                )
                .into());
            }
        }
    }
    o.n = o.n.max(1);
    o.starts = o.starts.max(1);
    o.spawns = o.spawns.max(1);
    o.per = o.per.max(1);
    o.nb_reps = o.nb_reps.max(1);
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

pub(crate) fn reference_python() -> PathBuf {
    if let Some(p) = std::env::var_os("KERNEL_MCP_BENCH_PYTHON") {
        return PathBuf::from(p);
    }
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        return Path::new(&v).join("bin/python");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
}

/// The virtualenv the server's kernels come from: `$VIRTUAL_ENV`, else `./.venv`.
pub(crate) fn venv_dir() -> PathBuf {
    std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"))
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn run() -> Res<()> {
    let o = parse_opts()?;
    if o.raw_reference {
        return raw::main(&o).await;
    }
    let bin = server_binary()?;
    eprintln!("bench: server {}", bin.display());
    if o.only_otel {
        return otel::alone(&bin, &o).await;
    }
    if o.only_notebooks {
        return notebooks::alone(&bin, &o).await;
    }
    let total = Instant::now();
    let load_before = loadavg();

    let mut ours = mcp_side::measure(&bin, &o).await?;
    ours.turns = turns::measure(&bin, &o).await?;
    let forks = if o.no_fork {
        None
    } else {
        Some(fork::measure(&bin, &o).await?)
    };
    eprintln!("bench: kernel-mcp side done; running the raw reference client");
    let raw = run_json_child(
        &std::env::current_exe()?,
        &reference_args(&o, "--raw-reference"),
        "raw reference",
    )
    .await?;
    eprintln!("bench: raw side done; running the jupyter_client reference");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/jupyter_client_ref.py");
    let mut args = vec![script.display().to_string()];
    args.extend(reference_args(&o, ""));
    for a in raw::kernel_mcp_extra_args(&o.kernel)? {
        args.push(format!("--kernel-arg={a}"));
    }
    let jc = run_json_child(&reference_python(), &args, "jupyter_client reference").await?;
    let gw = if o.no_gateway {
        None
    } else {
        eprintln!("bench: starting a Kernel Gateway for the remote rows");
        gateway::measure(&bin, &o).await?
    };
    let br = if o.no_broker {
        None
    } else {
        broker::measure(&bin, &o).await?
    };
    let pr = if o.no_peer {
        None
    } else {
        peer::measure(&bin, &o).await?
    };
    let oa = if o.no_oauth {
        None
    } else {
        oauth::measure(&o).await?
    };
    let ol = if o.no_load {
        None
    } else {
        oauth_load::measure(&bin, &o).await?
    };
    let ot = if o.no_otel {
        None
    } else {
        otel::measure(&bin, &o).await?
    };
    let nb = if o.no_notebooks {
        None
    } else {
        Some(notebooks::measure(&bin, &o).await?)
    };
    let elapsed = total.elapsed();

    let mut rows = table::rows(&o, &ours, &raw, &jc, gw.as_ref());
    if let Some(b) = &br {
        rows.extend(table::broker_rows(&o, b));
    }
    if let Some(f) = &forks {
        rows.extend(table::fork_rows(f));
    }
    if let Some(p) = &pr {
        rows.extend(table::peer_rows(p));
    }
    if let Some(a) = &oa {
        rows.extend(table::oauth_rows(a));
    }
    if let Some(l) = &ol {
        rows.extend(table::oauth_load_rows(l));
    }
    if let Some(t) = &ot {
        rows.extend(table::otel_rows(t));
    }
    if let Some(n) = &nb {
        rows.extend(notebooks::rows(n));
    }
    table::print(&o, &rows, &ours, &raw, &jc, gw.as_ref());
    let load_after = loadavg();
    println!(
        "\nload average (1/5/15 min) before {load_before}, after {load_after}; total bench time {:.1} s",
        elapsed.as_secs_f64()
    );
    if let Some(path) = &o.json {
        let doc = serde_json::json!({
            "rows": rows.iter().map(table::Row::to_json).collect::<Vec<_>>(),
            "kernel": o.kernel,
            "load_before": load_before,
            "load_after": load_after,
            "kernel_mcp": ours.raw_json(),
            "raw": raw,
            "jupyter_client": jc,
            "kernel_gateway": gw.as_ref().map(gateway::Figures::raw_json),
            "broker": br.as_ref().map(broker::Figures::raw_json),
            "fork": forks.as_ref().map(fork::ForkFigures::raw_json),
            "peer": pr.as_ref().map(peer::Figures::raw_json),
            "oauth": oa.as_ref().map(oauth::Figures::raw_json),
            "oauth_load": ol.as_ref().map(oauth_load::Figures::raw_json),
            "telemetry": ot.as_ref().map(otel::Figures::raw_json),
            "notebooks": nb.as_ref().map(notebooks::Figures::raw_json),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok(())
}

/// The shared arguments of both references (`flag` first when not empty).
fn reference_args(o: &Opts, flag: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if !flag.is_empty() {
        v.push(flag.into());
    }
    if o.no_floods {
        v.push("--no-floods".into());
    }
    for (k, val) in [
        ("--n", o.n.to_string()),
        ("--warmup", o.warmup.to_string()),
        ("--starts", o.starts.to_string()),
        ("--kernel", o.kernel.clone()),
        ("--sessions", o.sessions.to_string()),
        ("--per", o.per.to_string()),
    ] {
        v.push(k.into());
        v.push(val);
    }
    v
}

/// Run a reference process and parse the JSON object it prints on stdout.
pub(crate) async fn run_json_child(program: &Path, args: &[String], what: &str) -> Res<Value> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e} (run `make .venv`)", program.display()))?;
    if !out.status.success() {
        return Err(format!("{what} ({}) failed: {}", program.display(), out.status).into());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{what} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
        .into()
    })
}
