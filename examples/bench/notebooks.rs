//! (p) Notebooks (docs/notebooks.md): `execute_cells` of a 100-cell notebook through kernel-mcp (an
//! MCP client over stdio: `open_notebook`, then `execute_cells` of every cell, which answers
//! once the last cell's outputs are in the file) next to nbclient executing the same notebook
//! on the same kernelspec (`bench/nbclient_ref.py`: `NotebookClient.async_execute`'s steps,
//! then one `nbformat.write`, as `jupyter execute --inplace`). Each repetition starts from a
//! fresh copy of the notebook and a new kernel on both sides, the side going first
//! alternating. Kernel start is measured apart from the run on both sides (kernel-mcp:
//! `open_notebook` until the session is ready; nbclient: `start_kernel` until
//! `wait_for_ready`), so the run's ratio compares executing and writing only. The goal
//! (issue 43): kernel-mcp's run ≤ 0.9× nbclient's.
//!
//! Then `read_cells` of a 1 000-cell notebook that has outputs: a page of 50 cells (at a
//! different place each time) and the default page (no range: as many cells as fit its size
//! bound), p50 and p99. `--nb-reps` sets the repetitions (5), `--no-notebooks` skips the row,
//! `--only-notebooks` runs it alone.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_side::{Client, call, check_tool, close, poll_ready, spawn_with, structured};
use crate::nb_corpus;
use crate::stats::{median, ms, percentile, summary};
use crate::table::{Row, Unit};
use crate::{Opts, Res};

/// Cells in the notebook run, and in the notebook read.
const RUN_CELLS: usize = 100;
const READ_CELLS: usize = 1000;
/// Cells in a typical page.
const PAGE: i64 = 50;

/// One repetition: both sides' kernel start and run, ms.
pub struct Rep {
    pub ours_start: f64,
    pub ours_run: f64,
    pub nbclient_start: f64,
    pub nbclient_run: f64,
    /// nbclient's one write of the notebook (part of its run).
    pub nbclient_write: f64,
    pub nbclient_first: bool,
}

pub struct Figures {
    pub reps: Vec<Rep>,
    pub code_cells: usize,
    /// `read_cells` of 50 cells, ms.
    pub page_ms: Vec<f64>,
    /// `read_cells` with no range (the default page), ms; its cells and its text's bytes.
    pub default_ms: Vec<f64>,
    pub default_cells: usize,
    pub default_bytes: usize,
    pub versions: Value,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        let col = |f: fn(&Rep) -> f64| self.reps.iter().map(f).collect::<Vec<_>>();
        json!({
            "cells": RUN_CELLS,
            "code_cells": self.code_cells,
            "kernel_mcp_start_ms": col(|r| r.ours_start),
            "kernel_mcp_run_ms": col(|r| r.ours_run),
            "nbclient_start_ms": col(|r| r.nbclient_start),
            "nbclient_run_ms": col(|r| r.nbclient_run),
            "nbclient_write_ms": col(|r| r.nbclient_write),
            "read_cells_page_ms": summary(&self.page_ms),
            "read_cells_default_ms": summary(&self.default_ms),
            "read_cells_default_cells": self.default_cells,
            "read_cells_default_bytes": self.default_bytes,
            "nbclient": self.versions,
        })
    }
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Figures> {
    let dir = tempfile::tempdir()?;
    let (client, pid) = spawn_with(bin, &["serve", "--tools", "all"], &[]).await?;
    let outcome = async {
        let mut reps = Vec::new();
        let mut versions = Value::Null;
        let mut code_cells = 0;
        for rep in 0..o.nb_reps {
            let nbclient_first = rep % 2 == 1;
            let ours_nb = dir.path().join(format!("run-{rep}-kernel-mcp.ipynb"));
            let theirs_nb = dir.path().join(format!("run-{rep}-nbclient.ipynb"));
            let text = serde_json::to_vec_pretty(&nb_corpus::to_run(RUN_CELLS, &o.kernel))?;
            std::fs::write(&ours_nb, &text)?;
            std::fs::write(&theirs_nb, &text)?;
            let mut theirs = Value::Null;
            let mut ours = (0.0, 0.0);
            for side in [nbclient_first, !nbclient_first] {
                if side {
                    theirs = nbclient(&theirs_nb, &o.kernel).await?;
                } else {
                    ours = kernel_mcp_run(&client, &ours_nb, &format!("nb-{rep}")).await?;
                }
            }
            for (p, who) in [(&ours_nb, "kernel-mcp"), (&theirs_nb, "nbclient")] {
                let nb: Value = serde_json::from_slice(&std::fs::read(p)?)?;
                code_cells = nb_corpus::check_run(&nb).map_err(|e| format!("{who}'s run: {e}"))?;
            }
            let r = Rep {
                ours_start: ours.0,
                ours_run: ours.1,
                nbclient_start: theirs["start_ms"].as_f64().unwrap_or(f64::NAN),
                nbclient_run: theirs["execute_ms"].as_f64().unwrap_or(f64::NAN),
                nbclient_write: theirs["write_ms"].as_f64().unwrap_or(f64::NAN),
                nbclient_first,
            };
            eprintln!(
                "bench: notebook run {rep}: kernel-mcp start {:.0} ms, run {:.0} ms | nbclient start {:.0} ms, run {:.0} ms (write {:.1} ms) = {:.3}x{}",
                r.ours_start,
                r.ours_run,
                r.nbclient_start,
                r.nbclient_run,
                r.nbclient_write,
                r.ours_run / r.nbclient_run,
                if nbclient_first { " (nbclient first)" } else { "" }
            );
            versions = theirs["versions"].clone();
            reps.push(r);
        }
        let read = read_pages(&client, dir.path(), o).await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Figures {
            reps,
            code_cells,
            page_ms: read.0,
            default_ms: read.1,
            default_cells: read.2,
            default_bytes: read.3,
            versions,
        })
    }
    .await;
    close(client, pid).await;
    outcome
}

/// kernel-mcp: `open_notebook` until its session is ready, then `execute_cells` of every
/// cell until it answers done; ms of each. The notebook is closed and its session destroyed.
async fn kernel_mcp_run(client: &Client, nb: &Path, session: &str) -> Res<(f64, f64)> {
    let path = nb.display().to_string();
    let t0 = Instant::now();
    let r = call(
        client,
        "open_notebook",
        json!({"path": path, "session_id": session}),
    )
    .await?;
    check_tool(&r, "open_notebook")?;
    poll_ready(client, session, Duration::from_millis(2)).await?;
    let start = ms(t0);
    let t0 = Instant::now();
    let r = call(
        client,
        "execute_cells",
        json!({"path": path, "wait_s": 600}),
    )
    .await?;
    let run = ms(t0);
    check_tool(&r, "execute_cells")?;
    if structured(&r)["status"] != "done" {
        return Err(format!("execute_cells did not finish: {}", structured(&r)).into());
    }
    let r = call(client, "close_notebook", json!({"path": path})).await?;
    check_tool(&r, "close_notebook")?;
    let r = call(client, "destroy_session", json!({"session_id": session})).await?;
    check_tool(&r, "destroy_session")?;
    Ok((start, run))
}

/// nbclient on `nb` (bench/nbclient_ref.py), with the kernel options kernel-mcp adds.
async fn nbclient(nb: &Path, kernel: &str) -> Res<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/nbclient_ref.py");
    let mut args = vec![
        script.display().to_string(),
        nb.display().to_string(),
        "--kernel".into(),
        kernel.into(),
    ];
    for a in crate::raw::kernel_mcp_extra_args(kernel)? {
        args.push(format!("--kernel-arg={a}"));
    }
    crate::run_json_child(&crate::reference_python(), &args, "nbclient reference").await
}

/// `read_cells` of a 1 000-cell notebook with outputs: `o.n` pages of 50 cells (after
/// `o.warmup`), then `o.n` default pages; their times (ms), the default page's cells and
/// bytes.
async fn read_pages(
    client: &Client,
    dir: &Path,
    o: &Opts,
) -> Res<(Vec<f64>, Vec<f64>, usize, usize)> {
    let nb = dir.join("read-1000.ipynb");
    let doc = nb_corpus::run_already(READ_CELLS, &o.kernel);
    std::fs::write(&nb, serde_json::to_vec_pretty(&doc)?)?;
    let path = nb.display().to_string();
    let r = call(
        client,
        "open_notebook",
        json!({"path": path, "session_id": "nb-read"}),
    )
    .await?;
    check_tool(&r, "open_notebook")?;
    let (mut page_ms, mut default_ms) = (Vec::new(), Vec::new());
    let (mut cells, mut bytes) = (0, 0);
    for i in 0..o.warmup + o.n {
        let start = (i as i64 * 7 * PAGE) % (READ_CELLS as i64 - PAGE);
        let t0 = Instant::now();
        let r = call(
            client,
            "read_cells",
            json!({"path": path, "start": start, "end": start + PAGE}),
        )
        .await?;
        let took = ms(t0);
        check_tool(&r, "read_cells (50 cells)")?;
        let got = structured(&r)["cells"].as_array().map_or(0, Vec::len);
        if got != PAGE as usize {
            return Err(format!("read_cells of {PAGE} cells answered {got}").into());
        }
        if i >= o.warmup {
            page_ms.push(took);
        }
    }
    for i in 0..o.warmup + o.n {
        let t0 = Instant::now();
        let r = call(client, "read_cells", json!({"path": path})).await?;
        let took = ms(t0);
        check_tool(&r, "read_cells (default page)")?;
        cells = structured(&r)["cells"].as_array().map_or(0, Vec::len);
        bytes = crate::mcp_side::first_text(&r).len();
        if i >= o.warmup {
            default_ms.push(took);
        }
    }
    eprintln!(
        "bench: read_cells of a {READ_CELLS}-cell notebook x{}: done",
        o.n
    );
    let _ = call(client, "close_notebook", json!({"path": path})).await;
    let _ = call(client, "destroy_session", json!({"session_id": "nb-read"})).await;
    Ok((page_ms, default_ms, cells, bytes))
}

/// The rows: run and start medians (nbclient in the jupyter_client column), read_cells p50
/// and p99.
pub fn rows(f: &Figures) -> Vec<Row> {
    let col = |g: fn(&Rep) -> f64| f.reps.iter().map(g).collect::<Vec<_>>();
    let n = f.reps.len();
    let row = |name: String, ours: Option<f64>, jc: Option<f64>| Row {
        name,
        unit: Unit::Ms,
        ours,
        raw: None,
        jc,
    };
    let mut rows = vec![
        row(
            format!(
                "notebook: execute_cells of {RUN_CELLS} cells ({} code) to the file, median of {n} | nbclient",
                f.code_cells
            ),
            median(&col(|r| r.ours_run)),
            median(&col(|r| r.nbclient_run)),
        ),
        row(
            format!("notebook: kernel start (open_notebook until ready), median of {n} | nbclient"),
            median(&col(|r| r.ours_start)),
            median(&col(|r| r.nbclient_start)),
        ),
        row(
            format!("notebook: start + run, median of {n} | nbclient"),
            median(&col(|r| r.ours_start + r.ours_run)),
            median(&col(|r| r.nbclient_start + r.nbclient_run)),
        ),
    ];
    for (what, v) in [
        (format!("{PAGE} cells"), &f.page_ms),
        (
            format!("the default page ({} cells)", f.default_cells),
            &f.default_ms,
        ),
    ] {
        for (p, x) in [("p50", median(v)), ("p99", percentile(v, 99))] {
            let name = format!(
                "notebook: read_cells of a {READ_CELLS}-cell notebook, {what}, {p} (n={})",
                v.len()
            );
            rows.push(row(name, x, None));
        }
    }
    rows
}

/// `--only-notebooks`: row (p) alone, each repetition then the rows, with the load average
/// before and after (and `--json PATH`).
pub async fn alone(bin: &Path, o: &Opts) -> Res<()> {
    let before = crate::loadavg();
    let f = measure(bin, o).await?;
    println!();
    for (i, r) in f.reps.iter().enumerate() {
        println!(
            "run {i}: kernel-mcp {:.1} ms | nbclient {:.1} ms = {:.3}x (start {:.0} | {:.0} ms){}",
            r.ours_run,
            r.nbclient_run,
            r.ours_run / r.nbclient_run,
            r.ours_start,
            r.nbclient_start,
            if r.nbclient_first {
                ", nbclient first"
            } else {
                ""
            }
        );
    }
    let ratios: Vec<f64> = f.reps.iter().map(|r| r.ours_run / r.nbclient_run).collect();
    let rows = rows(&f);
    for r in &rows {
        let ours = r.ours.unwrap_or(f64::NAN);
        match r.jc {
            Some(jc) => println!("{}: {ours:.2} ms | {jc:.2} ms = {:.3}x", r.name, ours / jc),
            None => println!("{}: {ours:.3} ms", r.name),
        }
    }
    println!(
        "median of the runs' ratios: {:.3}x; default page {} bytes of text; nbclient {}; load average (1/5/15 min) before {before}, after {}",
        median(&ratios).unwrap_or(f64::NAN),
        f.default_bytes,
        f.versions["nbclient"].as_str().unwrap_or("?"),
        crate::loadavg()
    );
    if let Some(path) = &o.json {
        let doc = json!({
            "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
            "notebooks": f.raw_json(),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(())
}
