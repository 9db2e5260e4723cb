//! The bench table: one row per figure, kernel-mcp next to the raw client and jupyter_client,
//! with the ratios kernel-mcp / raw and kernel-mcp / jupyter_client.

use serde_json::{Value, json};

use crate::Opts;
use crate::fork::ForkFigures;
use crate::gateway::Figures;
use crate::mcp_side::Ours;
use crate::stats::{median, percentile};

#[derive(Clone, Copy)]
pub enum Unit {
    Ms,
    /// Input in ms, printed in µs (for figures well under a millisecond).
    MsAsUs,
    /// Input in KiB, printed in MiB.
    Kib,
    PerS,
    Bytes,
}

pub struct Row {
    pub name: String,
    pub unit: Unit,
    pub ours: Option<f64>,
    pub raw: Option<f64>,
    pub jc: Option<f64>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

impl Row {
    fn new(
        name: impl Into<String>,
        unit: Unit,
        ours: Option<f64>,
        raw: Option<f64>,
        jc: Option<f64>,
    ) -> Row {
        Row {
            name: name.into(),
            unit,
            ours,
            raw,
            jc,
        }
    }

    pub fn to_json(&self) -> Value {
        let unit = match self.unit {
            Unit::Ms | Unit::MsAsUs => "ms",
            Unit::Kib => "KiB",
            Unit::PerS => "1/s",
            Unit::Bytes => "bytes",
        };
        json!({
            "metric": self.name, "unit": unit,
            "kernel_mcp": self.ours, "raw": self.raw, "jupyter_client": self.jc,
            "ratio_raw": ratio(self.ours, self.raw), "ratio_jupyter_client": ratio(self.ours, self.jc),
        })
    }

    fn cell(&self, v: Option<f64>) -> String {
        let Some(x) = v.filter(|x| x.is_finite()) else {
            return "-".into();
        };
        match self.unit {
            Unit::Ms => format!("{x:.2} ms"),
            Unit::MsAsUs => format!("{:.1} µs", x * 1000.0),
            Unit::Kib => format!("{:.1} MiB", x / 1024.0),
            Unit::PerS => format!("{x:.0}/s"),
            Unit::Bytes => format!("{x:.0} B"),
        }
    }
}

fn at(v: &Value, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64()
}

pub fn rows(o: &Opts, m: &Ours, raw: &Value, jc: &Value, gw: Option<&Figures>) -> Vec<Row> {
    let both = |path: &[&str]| (at(raw, path), at(jc, path));
    let kib = |v: Option<u64>| v.map(|x| x as f64);
    let mut rows = Vec::new();
    let (r, j) = both(&["execute_ms", "median"]);
    rows.push(Row::new(
        format!("execute 1+1, p50 (n={})", o.n),
        Unit::Ms,
        median(&m.exec_ms),
        r,
        j,
    ));
    let (r, j) = both(&["execute_ms", "p95"]);
    rows.push(Row::new(
        format!("execute 1+1, p95 (n={})", o.n),
        Unit::Ms,
        percentile(&m.exec_ms, 95),
        r,
        j,
    ));
    if !m.turns.ours.is_empty() {
        // The raw column here is the raw client in the same alternating blocks.
        rows.push(Row::new(
            format!(
                "execute 1+1 taking turns with raw ({} blocks each), p50 (n={})",
                crate::turns::ROUNDS,
                m.turns.ours.len()
            ),
            Unit::Ms,
            median(&m.turns.ours),
            median(&m.turns.raw),
            None,
        ));
        rows.push(Row::new(
            format!(
                "the same with a line client (JSON lines, no MCP library), p50 (n={})",
                m.turns.line.len()
            ),
            Unit::Ms,
            median(&m.turns.line),
            median(&m.turns.raw),
            None,
        ));
    }
    rows.push(Row::new(
        format!("tools/call with no kernel (list_sessions), p50 (n={})", o.n),
        Unit::Ms,
        median(&m.floor_ms),
        None,
        None,
    ));
    if !m.relay_exec_ms.is_empty() {
        // Ratios here are relay / direct stdio (in the raw column) — the relay goal is ≤ 1.05×.
        rows.push(Row::new(
            "execute 1+1 via serve --shared relay, p50 | direct stdio p50",
            Unit::Ms,
            median(&m.relay_exec_ms),
            median(&m.exec_ms),
            None,
        ));
    }
    if !m.sandbox.exec_boxed.is_empty() {
        // Ratios are sandboxed / unsandboxed (in the raw column), same server, interleaved:
        // the goal is ≤ 1.05×.
        rows.push(Row::new(
            format!(
                "create_session sandbox=workspace, p50 (n={}) | sandbox=none p50",
                m.sandbox.create_boxed.len()
            ),
            Unit::Ms,
            median(&m.sandbox.create_boxed),
            median(&m.sandbox.create_plain),
            None,
        ));
        rows.push(Row::new(
            format!(
                "execute 1+1 sandbox=workspace, p50 (n={}) | sandbox=none p50",
                m.sandbox.exec_boxed.len()
            ),
            Unit::Ms,
            median(&m.sandbox.exec_boxed),
            median(&m.sandbox.exec_plain),
            None,
        ));
    }
    let (r, j) = both(&["start_ms", "median"]);
    rows.push(Row::new(
        format!("cold start, p50 (n={}): create_session | raw start->ready | start_kernel+wait_for_ready", o.starts),
        Unit::Ms,
        median(&m.create_ms),
        r,
        j,
    ));
    rows.push(Row::new(
        format!(
            "create_session from the warm pool, p50 (n={}) | raw start->ready",
            m.pool_create_ms.len()
        ),
        Unit::Ms,
        median(&m.pool_create_ms),
        r,
        None,
    ));
    rows.push(Row::new(
        format!(
            "create_session from the pool with its own cwd and env, p50 (n={}) | raw start->ready",
            m.pool_adapted_ms.len()
        ),
        Unit::Ms,
        median(&m.pool_adapted_ms),
        r,
        None,
    ));
    rows.push(Row::new(
        format!(
            "shutdown, p50 (n={}): destroy_session | - | shutdown_kernel",
            m.destroy_ms.len()
        ),
        Unit::Ms,
        median(&m.destroy_ms),
        None,
        at(jc, &["shutdown_ms", "median"]),
    ));
    rows.push(Row::new(
        format!(
            "server spawn -> MCP initialized, p50 (n={})",
            m.spawn_ms.len()
        ),
        Unit::Ms,
        median(&m.spawn_ms),
        None,
        None,
    ));
    rows.push(Row::new(
        "client process RSS, no kernel",
        Unit::Kib,
        kib(m.rss_idle),
        None,
        at(jc, &["client_rss_idle_kib"]),
    ));
    let (r, j) = both(&["client_rss_kib"]);
    rows.push(Row::new(
        "client process RSS, one kernel",
        Unit::Kib,
        kib(m.rss_one_session),
        r,
        j,
    ));
    let (r, j) = both(&["kernel_rss_kib"]);
    rows.push(Row::new(
        format!("kernel process RSS ({}), idle", o.kernel),
        Unit::Kib,
        kib(m.kernel_rss),
        r,
        j,
    ));
    let (r, j) = both(&["flood", "ms"]);
    rows.push(Row::new(
        "50 MB as 50 000 printed lines: execute until done",
        Unit::Ms,
        m.flood_ms,
        r,
        j,
    ));
    let (r, j) = both(&["flood", "client_peak_rss_kib"]);
    rows.push(Row::new(
        "50 MB flood: client peak RSS (VmHWM)",
        Unit::Kib,
        kib(m.flood_peak_rss),
        r,
        j,
    ));
    if m.floods_peak_rss.is_some() {
        rows.push(Row::new(
            format!(
                "{} x 50 MB floods at once: client peak RSS (raw drops the text)",
                o.sessions
            ),
            Unit::Kib,
            kib(m.floods_peak_rss),
            at(raw, &["concurrent", "floods", "client_peak_rss_kib"]),
            None,
        ));
        rows.push(Row::new(
            format!("{} x 50 MB floods at once: until all done", o.sessions),
            Unit::Ms,
            m.floods_ms,
            at(raw, &["concurrent", "floods", "ms"]),
            None,
        ));
    }
    if let Some(c) = &m.concurrent {
        let label = format!("{}x{} concurrent", o.sessions, o.per);
        for (what, key, unit) in [
            ("p50", "p50_ms", Unit::Ms),
            ("p99", "p99_ms", Unit::Ms),
            ("executes/s", "per_s", Unit::PerS),
            ("client CPU per execute", "cpu_ms_per_execute", Unit::Ms),
        ] {
            let (r, j) = both(&["concurrent", key]);
            rows.push(Row::new(
                format!("{label}: {what}"),
                unit,
                at(c, &[key]),
                r,
                j,
            ));
        }
    }
    for (label, tools, bytes, _cap) in &m.tools_list {
        rows.push(Row::new(
            format!("tools/list ({label}, {tools} tools)"),
            Unit::Bytes,
            Some(*bytes as f64),
            None,
            None,
        ));
    }
    rows.push(Row::new(
        "text of a 1+1 execute result",
        Unit::Bytes,
        m.trivial_text_bytes.map(|b| b as f64),
        None,
        None,
    ));
    if let Some(g) = gw {
        // kernel-mcp on a gateway kernel; the websockets client on the same gateway goes in the
        // jupyter_client column (its ratio is /jc).
        let r = &g.reference;
        for (what, key, ours) in [
            ("p50", "median", median(&g.exec_ms)),
            ("p95", "p95", percentile(&g.exec_ms, 95)),
        ] {
            rows.push(Row::new(
                format!(
                    "Kernel Gateway: execute 1+1, {what} (n={}) | websockets client",
                    o.n
                ),
                Unit::Ms,
                ours,
                None,
                at(r, &["execute_ms", key]),
            ));
        }
        rows.push(Row::new(
            format!(
                "Kernel Gateway: cold start, p50 (n={}): create_session | POST + ws + kernel_info",
                g.create_ms.len()
            ),
            Unit::Ms,
            median(&g.create_ms),
            None,
            at(r, &["start_ms", "median"]),
        ));
    }
    rows
}

/// (j) The broker rows: a cell's `mcp.call` in the kernel-mcp column, the direct rmcp call in
/// the raw column.
pub fn broker_rows(o: &Opts, b: &crate::broker::Figures) -> Vec<Row> {
    [
        ("p50", median(&b.cell_ms), median(&b.direct_ms)),
        (
            "p95",
            percentile(&b.cell_ms, 95),
            percentile(&b.direct_ms, 95),
        ),
    ]
    .into_iter()
    .map(|(what, cell, direct)| {
        Row::new(
            format!(
                "broker: mcp.call echo from a cell, {what} (n={}) | rmcp client direct",
                o.n
            ),
            Unit::Ms,
            cell,
            direct,
            None,
        )
    })
    .collect()
}

/// (m): checking a JWT access token (cached keys) next to the static token.
pub fn oauth_rows(a: &crate::oauth::Figures) -> Vec<Row> {
    [
        ("p50", median(&a.jwt_ms), median(&a.static_ms)),
        ("p99", percentile(&a.jwt_ms, 99), percentile(&a.static_ms, 99)),
    ]
    .into_iter()
    .map(|(what, jwt, fixed)| {
        Row::new(
            format!(
                "OAuth: check of a JWT access token (RS256, cached JWKS), {what} (n={}) | the static token",
                a.jwt_ms.len()
            ),
            Unit::MsAsUs,
            jwt,
            fixed,
            None,
        )
    })
    .collect()
}

/// (n): executes of many principals at once through OAuth, p50 and p99, and the throughput
/// (no reference: the raw column is empty).
pub fn oauth_load_rows(l: &crate::oauth_load::Figures) -> Vec<Row> {
    let what = format!(
        "{} principals × {} sessions × {} executes at once, OAuth, stateless HTTP",
        l.principals, l.sessions, l.per
    );
    let mut rows: Vec<Row> = [
        ("p50", median(&l.execute_ms)),
        ("p99", percentile(&l.execute_ms, 99)),
    ]
    .into_iter()
    .map(|(q, ms)| Row::new(format!("{what}: execute {q}"), Unit::Ms, ms, None, None))
    .collect();
    rows.push(Row::new(
        format!("{what}: executes/s (kernel starts included)"),
        Unit::PerS,
        Some(l.execute_ms.len() as f64 / l.wall_s),
        None,
        None,
    ));
    rows
}

/// (o): `execute 1+1` with telemetry export on, next to export off (the raw column).
pub fn otel_rows(t: &crate::otel::Figures) -> Vec<Row> {
    [
        ("p50", median(&t.on_ms), median(&t.off_ms)),
        ("p95", percentile(&t.on_ms, 95), percentile(&t.off_ms, 95)),
    ]
    .into_iter()
    .map(|(what, on, off)| {
        Row::new(
            format!(
                "telemetry: execute 1+1 with OTLP export on, {what} (n={}) | export off",
                t.on_ms.len()
            ),
            Unit::Ms,
            on,
            off,
            None,
        )
    })
    .collect()
}

/// (k): fork_session next to create_session + the history again (in the raw column: the
/// ratio is fork / rebuild), and the memory of the source and of a fresh fork.
pub fn fork_rows(f: &ForkFigures) -> Vec<Row> {
    vec![
        Row::new(
            format!(
                "fork_session of a ~500 MB session, p50 (n={}) | create_session + its history again",
                f.fork_ms.len()
            ),
            Unit::Ms,
            median(&f.fork_ms),
            median(&f.rebuild_ms),
            None,
        ),
        Row::new(
            "memory_mib of a fresh fork | of its source (resident; shared pages count in both)",
            Unit::Kib,
            f.fork_mib.map(|m| (m * 1024) as f64),
            f.source_mib.map(|m| (m * 1024) as f64),
            None,
        ),
    ]
}

/// (l): kernel-mcp next to the MCP peer jupyter-mcp-kernel (in the raw column: the ratio is
/// kernel-mcp / peer; the goal for `execute 1+1` is ≤ 0.5×).
pub fn peer_rows(p: &crate::peer::Figures) -> Vec<Row> {
    const PEER: &str = "jupyter-mcp-kernel 1.0.1";
    let start = Row::new(
        format!("peer: spawn -> first 1+1 answered (n=1) | {PEER}"),
        Unit::Ms,
        Some(p.ours_start_ms),
        Some(p.peer_start_ms),
        None,
    );
    let executes = [
        ("p50", median(&p.ours_ms), median(&p.peer_ms)),
        (
            "p95",
            percentile(&p.ours_ms, 95),
            percentile(&p.peer_ms, 95),
        ),
    ]
    .into_iter()
    .map(|(what, ours, peer)| {
        Row::new(
            format!(
                "peer: execute 1+1, {what} (n={}, alternating) | {PEER}",
                p.ours_ms.len()
            ),
            Unit::Ms,
            ours,
            peer,
            None,
        )
    });
    std::iter::once(start).chain(executes).collect()
}

pub fn print(o: &Opts, rows: &[Row], m: &Ours, raw: &Value, jc: &Value, gw: Option<&Figures>) {
    println!();
    println!(
        "kernel-mcp vs raw (zeromq + wire/) vs jupyter_client {} (python {}, ipykernel {}), kernel '{}' from {}",
        jc["versions"]["jupyter_client"].as_str().unwrap_or("?"),
        jc["versions"]["python"].as_str().unwrap_or("?"),
        jc["versions"]["ipykernel"].as_str().unwrap_or("?"),
        o.kernel,
        jc["kernel_resource_dir"].as_str().unwrap_or("?"),
    );
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(40);
    let fr = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}x"));
    println!(
        "{:<w$}  {:>12}  {:>12}  {:>14}  {:>7}  {:>7}",
        "metric", "kernel-mcp", "raw", "jupyter_client", "/raw", "/jc"
    );
    println!(
        "{}",
        "-".repeat(w + 2 + 12 + 2 + 12 + 2 + 14 + 2 + 7 + 2 + 7)
    );
    for r in rows {
        println!(
            "{:<w$}  {:>12}  {:>12}  {:>14}  {:>7}  {:>7}",
            r.name,
            r.cell(r.ours),
            r.cell(r.raw),
            r.cell(r.jc),
            fr(ratio(r.ours, r.raw)),
            fr(ratio(r.ours, r.jc)),
        );
    }
    if let Some(b) = m.flood_response_bytes {
        println!(
            "50 MB flood: kernel-mcp's MCP response was {:.1} KiB (head + tail; the rest pageable); \
             raw received {} bytes, jupyter_client {} bytes",
            b as f64 / 1024.0,
            raw["flood"]["bytes_received"],
            jc["flood"]["bytes_received"]
        );
    }
    for (label, _, bytes, cap) in &m.tools_list {
        if bytes >= cap {
            println!("tools/list ({label}): {bytes} bytes is OVER THE CAP {cap}");
        }
    }
    println!(
        "\n/raw = kernel-mcp / raw client, /jc = kernel-mcp / jupyter_client (below 1: kernel-mcp is\n\
         faster or smaller). kernel-mcp times are MCP tools/call round trips over stdio (client-side\n\
         wall clock); the references are direct ZeroMQ round trips. Done = execute_reply plus iopub\n\
         idle on every side. \"client\" is the kernel-mcp server process, the raw client process or\n\
         the Python driver. Concurrent: one MCP connection, one task per session | one task per\n\
         kernel | one thread per kernel. The relay row compares relay (kernel-mcp) to direct (raw column),\n\
         the fork rows a fork to rebuilding the state (raw column), both kernel-mcp. The turns rows\n\
         alternate blocks of kernel-mcp (rmcp client, then a line client: JSON lines and no MCP\n\
         library, the MCP counterpart of the raw client) and raw executes, all kernels up, so load\n\
         changes fall on every side alike; their raw column is the raw client in those blocks."
    );
    if let Some(g) = gw {
        println!(
            "Kernel Gateway rows: {} on 127.0.0.1; kernel-mcp speaks the v1 binary websocket framing, the\n\
             Python client (websockets {}) the JSON framing; both wait for execute_reply and idle.",
            g.versions,
            g.reference["versions"]["websockets"]
                .as_str()
                .unwrap_or("?")
        );
    }
}
