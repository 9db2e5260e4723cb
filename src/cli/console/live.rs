//! The live view: cells that other clients (the agent) run in the console's session appear
//! on the console while it is open, with their source and output, marked as theirs.
//!
//! Mechanism (documented for users in the README, "Watch and steer the agent's kernel"): the
//! console polls, with ordinary tool calls, every [`POLL`]. `get_session` says which run is
//! current (`current_run_id`) and how long the history is (`history_count`).
//! - A current run that is not one of the console's own is followed with `get_execution`
//!   (wait 0), so its output shows as it arrives, under a line naming the run.
//! - When `history_count` changes, `get_history(latest_n)` gives the newly finished entries;
//!   each one that is not the console's own is shown with its source (and, when it was not
//!   followed live, its output), so a cell that ran between two polls is not missed.
//!
//! Polling needs nothing from the service beyond the tools every client has, works through
//! the relay and over HTTP alike, and costs one small call per poll; its price is up to one
//! poll of delay. A run the console submits is known as its own only once `execute` returns,
//! so while a submission is in flight the view skips its polls ([`Shared::submitting`]).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::render::{self, Kind, Screen};
use crate::cli::client::Client;
use crate::cli::follow::{Follower, is_final};

/// How often the live view asks the service.
pub const POLL: Duration = Duration::from_millis(300);
/// Run ids remembered as shown (or as the console's own).
const REMEMBERED: usize = 1024;
/// Newly finished entries fetched in one poll at most.
const LATEST: usize = 20;

/// What the prompt loop and the live view share.
#[derive(Default)]
pub struct Shared {
    /// Runs this console submitted, and foreign runs already shown.
    known: Mutex<Known>,
    /// True while an `execute` of ours is in flight (its run id is not known yet).
    pub submitting: AtomicBool,
    /// The execution count the next prompt shows.
    pub next_count: AtomicI64,
}

#[derive(Default)]
struct Known {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Shared {
    /// Remember `run_id` (ours, or shown); false when it was known already.
    pub fn remember(&self, run_id: &str) -> bool {
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if !k.set.insert(run_id.to_string()) {
            return false;
        }
        k.order.push_back(run_id.to_string());
        while k.order.len() > REMEMBERED {
            if let Some(old) = k.order.pop_front() {
                k.set.remove(&old);
            }
        }
        true
    }

    fn knows(&self, run_id: &str) -> bool {
        let k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        k.set.contains(run_id)
    }

    /// A cell with this execution count ran: the next prompt shows the one after it.
    pub fn saw_count(&self, n: Option<i64>) {
        if let Some(n) = n {
            self.next_count.fetch_max(n + 1, Ordering::Relaxed);
        }
    }
}

/// A foreign run being followed live.
struct Watched {
    follower: Follower,
}

/// Watch `session` until the task is aborted (or the session is gone).
pub async fn watch(client: Arc<Client>, session: String, shared: Arc<Shared>, screen: Arc<Screen>) {
    let mut history_count: Option<u64> = None;
    let mut watched: Option<Watched> = None;
    let mut streamed: HashSet<String> = HashSet::new();
    loop {
        tokio::time::sleep(POLL).await;
        if shared.submitting.load(Ordering::SeqCst) {
            continue;
        }
        let info = match client
            .call(
                "get_session",
                json!({"session_id": session}),
                Duration::ZERO,
            )
            .await
        {
            Ok(a) => a.value,
            Err(e) if e.code().is_some() => {
                screen.print(Kind::Note, &format!("[live view stopped: {e}]\n"));
                return;
            }
            Err(_) => continue,
        };
        if shared.submitting.load(Ordering::SeqCst) {
            continue;
        }
        // A foreign run in progress: follow it.
        if watched.is_none()
            && let Some(run) = info["current_run_id"].as_str()
            && !shared.knows(run)
        {
            screen.print(
                Kind::Theirs,
                &format!("── another client is running {run} ──\n"),
            );
            streamed.insert(run.to_string());
            watched = Some(Watched {
                follower: Follower::new(run),
            });
        }
        if let Some(w) = watched.as_mut() {
            match w.follower.poll(&client, Duration::ZERO).await {
                Ok(p) => {
                    screen.print(Kind::Stdout, &p.stdout);
                    screen.print(Kind::Stderr, &p.stderr);
                    if is_final(p.status()) {
                        render::ending(&screen, &client, &p.result, true).await;
                        watched = None;
                    }
                }
                Err(_) => watched = None,
            }
        }
        // Newly finished entries: show the foreign ones.
        let count = info["history_count"].as_u64().unwrap_or(0);
        let Some(before) = history_count.replace(count) else {
            continue; // the first poll only sets the mark
        };
        if count == before {
            continue;
        }
        let n = if count > before {
            ((count - before) as usize).min(LATEST)
        } else {
            1
        };
        let Ok(h) = client
            .call(
                "get_history",
                json!({"session_id": session, "latest_n": n}),
                Duration::ZERO,
            )
            .await
        else {
            continue;
        };
        for e in h.value["entries"].as_array().into_iter().flatten() {
            let run = e["run_id"].as_str().unwrap_or_default();
            shared.saw_count(e["execution_count"].as_i64());
            if run.is_empty() || !shared.remember(run) {
                continue;
            }
            let was_streamed = streamed.remove(run);
            show_entry(&screen, &client, e, was_streamed).await;
        }
    }
}

/// Show a foreign history entry: its source, and its output unless it was followed live.
async fn show_entry(screen: &Screen, client: &Client, e: &Value, was_streamed: bool) {
    let n = e["execution_count"]
        .as_i64()
        .map(|n| n.to_string())
        .unwrap_or_default();
    let status = e["status"].as_str().unwrap_or("?");
    let code = e["code"].as_str().unwrap_or("");
    let head = format!("[another client] In [{n}]: ({status})\n");
    screen.print(Kind::Theirs, &head);
    screen.print(Kind::Theirs, &render::source_block(code));
    if was_streamed {
        return;
    }
    // The whole record of the run when the service still has it, else the history's copy.
    let run = e["run_id"].as_str().unwrap_or_default();
    let record = client
        .call("get_execution", json!({"run_id": run}), Duration::ZERO)
        .await
        .map(|a| a.value)
        .unwrap_or_else(|_| e.clone());
    screen.print(
        Kind::Stdout,
        &render::with_newline(record["stdout"].as_str().unwrap_or("")),
    );
    screen.print(
        Kind::Stderr,
        &render::with_newline(record["stderr"].as_str().unwrap_or("")),
    );
    render::ending(screen, client, &record, true).await;
}
