//! (o) Telemetry: `execute 1+1` with OpenTelemetry export on (OTLP/HTTP protobuf to a local
//! sink that answers every POST with 200, exporting every second) next to the same server
//! with export off (the raw column), in the same run, the calls alternating between the two
//! servers so that drift in the machine's load falls on both. The goal (docs/performance.md):
//! the p50 within 3 %. Skipped, with a note, when the server was built without the `otel`
//! feature.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

use crate::mcp_side::{call, check_tool, close, create, spawn_with, structured};
use crate::stats::ms;
use crate::{Opts, Res};

pub struct Figures {
    /// One `execute 1+1` with export on, ms.
    pub on_ms: Vec<f64>,
    /// The same with export off, ms.
    pub off_ms: Vec<f64>,
    /// OTLP requests the sink received.
    pub exports: u64,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        json!({
            "export_on_ms": crate::stats::summary(&self.on_ms),
            "export_off_ms": crate::stats::summary(&self.off_ms),
            "otlp_requests": self.exports,
        })
    }
}

/// A collector that takes every POST and answers 200 (an empty protobuf response).
async fn sink() -> Res<(u16, Arc<AtomicU64>)> {
    let count = Arc::new(AtomicU64::new(0));
    let seen = count.clone();
    let app = axum::Router::new().fallback(move || {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::Relaxed);
            (
                [("content-type", "application/x-protobuf")],
                Vec::<u8>::new(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((port, count))
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Option<Figures>> {
    let doctor = tokio::process::Command::new(bin)
        .arg("doctor")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .await?;
    if !String::from_utf8_lossy(&doctor.stdout).contains("telemetry: on") {
        eprintln!("bench: no telemetry rows (the server was built without the `otel` feature)");
        return Ok(None);
    }
    let (port, exports) = sink().await?;
    let endpoint = format!("http://127.0.0.1:{port}");
    let on_env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_ref()),
        ("OTEL_BSP_SCHEDULE_DELAY", "1000".as_ref()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1000".as_ref()),
    ];
    let (on, on_pid) = spawn_with(bin, &[], &on_env).await?;
    let (off, off_pid) = spawn_with(bin, &[], &[]).await?;
    let outcome: Res<(Vec<f64>, Vec<f64>)> = async {
        for c in [&on, &off] {
            create(c, "bench-otel", &o.kernel).await?;
        }
        let (mut on_ms, mut off_ms) = (Vec::new(), Vec::new());
        for i in 0..o.warmup + o.n {
            for (c, out) in [(&on, &mut on_ms), (&off, &mut off_ms)] {
                let t0 = Instant::now();
                let r = call(
                    c,
                    "execute",
                    json!({"session_id": "bench-otel", "code": "1+1"}),
                )
                .await?;
                let took = ms(t0);
                check_tool(&r, "execute (telemetry)")?;
                if structured(&r)["status"] != "ok" {
                    return Err(format!("execute 1+1 did not end ok: {}", structured(&r)).into());
                }
                if i >= o.warmup {
                    out.push(took);
                }
            }
        }
        Ok((on_ms, off_ms))
    }
    .await;
    close(on, on_pid).await;
    close(off, off_pid).await;
    let (on_ms, off_ms) = outcome?;
    eprintln!("bench: execute 1+1 with export on and off x{}: done", o.n);
    Ok(Some(Figures {
        on_ms,
        off_ms,
        exports: exports.load(Ordering::Relaxed),
    }))
}

/// `--only-otel`: row (o) alone, printed as `on | off | ratio` lines (and written with
/// `--json PATH`), with the load average before and after.
pub async fn alone(bin: &Path, o: &Opts) -> Res<()> {
    let before = crate::loadavg();
    let Some(t) = measure(bin, o).await? else {
        return Ok(());
    };
    let rows = crate::table::otel_rows(&t);
    println!();
    for r in &rows {
        let (on, off) = (r.ours.unwrap_or(f64::NAN), r.raw.unwrap_or(f64::NAN));
        println!("{}: {on:.3} ms | {off:.3} ms = {:.3}x", r.name, on / off);
    }
    println!(
        "OTLP requests received: {}; load average (1/5/15 min) before {before}, after {}",
        t.exports,
        crate::loadavg()
    );
    if let Some(path) = &o.json {
        let doc = json!({
            "rows": rows.iter().map(crate::table::Row::to_json).collect::<Vec<_>>(),
            "telemetry": t.raw_json(),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(())
}
