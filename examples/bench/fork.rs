//! (j) `fork_session` of a session holding about 500 MB, next to what it saves: a new
//! `create_session` plus running the history that built the state again (its entries, one
//! `execute` each, as `rerun_history` would). Both in kernel-mcp, in the same run; the row's
//! ratio is fork / rebuild. Each fork is checked to hold the state (`len(data)`, not timed).

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::mcp_side::{Client, call, check_tool, close, spawn_with, structured};
use crate::stats::ms;
use crate::{Opts, Res};

/// The state: 15 million floats in a list, about 500 MB of Python objects.
pub const BUILD_CODE: &str = "data = [float(i) for i in range(15_000_000)]";
const ITEMS: &str = "15000000";

#[derive(Default)]
pub struct ForkFigures {
    pub fork_ms: Vec<f64>,
    pub rebuild_ms: Vec<f64>,
    /// The source session's kernel tree after the build (MiB, from get_session).
    pub source_mib: Option<u64>,
    /// A fresh fork's kernel tree (MiB): resident pages it shares with the source count.
    pub fork_mib: Option<u64>,
}

impl ForkFigures {
    pub fn raw_json(&self) -> Value {
        json!({
            "fork_ms": crate::stats::summary(&self.fork_ms),
            "rebuild_ms": crate::stats::summary(&self.rebuild_ms),
            "source_memory_mib": self.source_mib,
            "fork_memory_mib": self.fork_mib,
        })
    }
}

pub async fn measure(bin: &Path, o: &Opts) -> Res<ForkFigures> {
    let (client, pid) = spawn_with(bin, &[], &[]).await?;
    let result = forks(&client, o).await;
    close(client, pid).await;
    result
}

async fn forks(client: &Client, o: &Opts) -> Res<ForkFigures> {
    let mut f = ForkFigures::default();
    create(client, "big", &o.kernel).await?;
    run(client, "big", BUILD_CODE).await?;
    f.source_mib = memory_mib(client, "big").await?;
    let r = call(
        client,
        "get_history",
        json!({"session_id": "big", "start": 0, "end": 100}),
    )
    .await?;
    let history: Vec<String> = structured(&r)["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["code"].as_str().map(String::from))
        .collect();
    for i in 0..o.starts {
        let id = format!("fork-{i}");
        let t0 = Instant::now();
        let r = call(
            client,
            "fork_session",
            json!({"session_id": "big", "new_session_id": id}),
        )
        .await?;
        check_tool(&r, "fork_session")?;
        f.fork_ms.push(ms(t0));
        f.fork_mib = f.fork_mib.or(memory_mib(client, &id).await?);
        check_state(client, &id).await?;
        destroy(client, &id).await?;

        let id = format!("rebuild-{i}");
        let t0 = Instant::now();
        create(client, &id, &o.kernel).await?;
        for code in &history {
            run(client, &id, code).await?;
        }
        f.rebuild_ms.push(ms(t0));
        check_state(client, &id).await?;
        destroy(client, &id).await?;
    }
    destroy(client, "big").await?;
    eprintln!("bench: fork_session of ~500 MB x{}: done", o.starts);
    Ok(f)
}

async fn create(client: &Client, id: &str, kernel: &str) -> Res<()> {
    let r = call(
        client,
        "create_session",
        json!({"session_id": id, "kernel": kernel}),
    )
    .await?;
    check_tool(&r, "create_session")
}

async fn destroy(client: &Client, id: &str) -> Res<()> {
    let r = call(client, "destroy_session", json!({"session_id": id})).await?;
    check_tool(&r, "destroy_session")
}

async fn run(client: &Client, id: &str, code: &str) -> Res<()> {
    let r = call(
        client,
        "execute",
        json!({"session_id": id, "code": code, "wait_s": 600}),
    )
    .await?;
    check_tool(&r, "execute")?;
    let s = structured(&r);
    if s["status"] != "ok" {
        return Err(format!("execute in {id}: {} {}", s["status"], s["error"]).into());
    }
    Ok(())
}

async fn check_state(client: &Client, id: &str) -> Res<()> {
    let r = call(
        client,
        "execute",
        json!({"session_id": id, "code": "len(data)"}),
    )
    .await?;
    match structured(&r)["result"].as_str() {
        Some(ITEMS) => Ok(()),
        other => Err(format!("{id} does not hold the state: len(data) = {other:?}").into()),
    }
}

async fn memory_mib(client: &Client, id: &str) -> Res<Option<u64>> {
    let r = call(client, "get_session", json!({"session_id": id})).await?;
    Ok(structured(&r)["memory_mib"].as_u64())
}
