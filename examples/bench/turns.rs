//! `execute 1+1` with kernel-mcp and the raw client taking turns: the kernels are started
//! first, then [`ROUNDS`] rounds each run a block of back-to-back executes through kernel-mcp
//! with the rmcp client (MCP over stdio), the same through kernel-mcp with the
//! [`LineClient`] (a second server), and then the same number through the raw client (in this
//! process; only its timing is used). Blocks alternate, so a change in the machine's load
//! while the bench runs falls on every side alike; the sequential rows (kernel-mcp's phase,
//! then the reference's child process) cannot promise that.

use std::path::Path;
use std::time::Instant;

use crate::line_client::LineClient;
use crate::mcp_side::{close, create, execute_1p1, spawn_with};
use crate::raw::RawKernel;
use crate::stats::ms;
use crate::{Opts, Res};

/// Blocks per side.
pub const ROUNDS: usize = 10;

/// Each side's execute times (ms), `n` of them, measured in alternating blocks.
#[derive(Default)]
pub struct Turns {
    /// kernel-mcp, rmcp client.
    pub ours: Vec<f64>,
    /// kernel-mcp, line client.
    pub line: Vec<f64>,
    /// The raw client.
    pub raw: Vec<f64>,
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<Turns> {
    let (client, pid) = spawn_with(bin, &[], &[]).await?;
    let mut line = match LineClient::spawn(bin).await {
        Ok(l) => l,
        Err(e) => {
            close(client, pid).await;
            return Err(e);
        }
    };
    let turns = async {
        create(&client, "turns", &o.kernel).await?;
        line.create("turns", &o.kernel).await?;
        let mut raw = RawKernel::start(&o.kernel).await?;
        let mut sink = Vec::new();
        for _ in 0..o.warmup {
            execute_1p1(&client, "turns").await?;
            line.execute_1p1("turns").await?;
            raw.execute("1+1", &mut sink).await?;
        }
        let per = o.n.div_ceil(ROUNDS).max(1);
        let mut t = Turns::default();
        for _ in 0..ROUNDS {
            for _ in 0..per {
                let t0 = Instant::now();
                execute_1p1(&client, "turns").await?;
                t.ours.push(ms(t0));
            }
            for _ in 0..per {
                let t0 = Instant::now();
                line.execute_1p1("turns").await?;
                t.line.push(ms(t0));
            }
            for _ in 0..per {
                let t0 = Instant::now();
                let st = raw.execute("1+1", &mut sink).await?;
                t.raw.push(ms(t0));
                if st != "ok" {
                    return Err(format!("raw execute 1+1: status {st}").into());
                }
                sink.clear();
            }
        }
        raw.stop().await;
        Res::Ok(t)
    }
    .await;
    close(client, pid).await;
    line.close().await;
    let t = turns?;
    eprintln!(
        "bench: execute 1+1 taking turns with the raw client x{}: done",
        t.ours.len()
    );
    Ok(t)
}
