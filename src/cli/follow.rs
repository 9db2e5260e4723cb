//! Following one run from a command for people: `get_execution` with a short `wait_s`, over
//! and over, until the run reaches a final status, handing over each time the stdout and
//! stderr text that is new since the last poll. A run longer than the service's `wait_s` is
//! thus followed to its end, and its output shows as it arrives.
//!
//! New text comes from the run's result while its streams are whole (`truncated` is null for
//! them); once a stream outgrows the per-response cap it is paged with
//! `get_execution(run_id, stream, offset)`, so nothing is skipped. Offsets are bytes of the
//! UTF-8 text, as the tool counts them (docs/tools.md, get_execution).

use std::time::Duration;

use serde_json::{Value, json};

use super::client::{Answer, CliError, Client};

/// The most one page asks for (the tool's own cap is 1 MiB).
const PAGE_BYTES: usize = 1024 * 1024;
/// Pages read for one stream in one poll at most (the rest comes on the next poll).
const PAGES_PER_POLL: usize = 8;

/// True for a status a run can no longer leave.
pub fn is_final(status: &str) -> bool {
    !matches!(status, "queued" | "running" | "awaiting_input" | "")
}

/// The exit status of a finished run (docs/cli.md): 0 `ok`, 1 `error`, 3 for a run that was
/// stopped or never ran (`timeout`, `interrupted`, `cancelled`, `kernel_died`, `aborted`).
pub fn exit_status(status: &str) -> u8 {
    match status {
        "ok" => 0,
        "error" => 1,
        _ => 3,
    }
}

/// What one poll brought.
pub struct Poll {
    /// The run's ExecutionResult as the last `get_execution` returned it.
    pub result: Value,
    /// stdout text not handed over before.
    pub stdout: String,
    /// stderr text not handed over before.
    pub stderr: String,
}

impl Poll {
    /// The run's status.
    pub fn status(&self) -> &str {
        self.result["status"].as_str().unwrap_or("")
    }
}

/// How far a run's streams have been handed over.
#[derive(Debug, Clone)]
pub struct Follower {
    pub run_id: String,
    stdout: usize,
    stderr: usize,
}

impl Follower {
    /// Follow `run_id` from the start of its output.
    pub fn new(run_id: impl Into<String>) -> Follower {
        Follower {
            run_id: run_id.into(),
            stdout: 0,
            stderr: 0,
        }
    }

    /// Wait up to `wait` for the run to settle, then return its result and the new text.
    pub async fn poll(&mut self, client: &Client, wait: Duration) -> Result<Poll, CliError> {
        let a = client
            .call(
                "get_execution",
                json!({"run_id": self.run_id, "wait_s": wait.as_secs_f64()}),
                wait,
            )
            .await?;
        self.take(client, a).await
    }

    /// The new text of `a` (an ExecutionResult this follower has not seen yet).
    pub async fn take(&mut self, client: &Client, a: Answer) -> Result<Poll, CliError> {
        let result = a.value;
        let mut stdout_at = self.stdout;
        let stdout = new_text(client, &self.run_id, &result, "stdout", &mut stdout_at).await?;
        self.stdout = stdout_at;
        let mut stderr_at = self.stderr;
        let stderr = new_text(client, &self.run_id, &result, "stderr", &mut stderr_at).await?;
        self.stderr = stderr_at;
        Ok(Poll {
            result,
            stdout,
            stderr,
        })
    }
}

/// The text of `stream` past byte `at`, from the result when it holds the whole stream,
/// else paged; `at` moves past what is returned.
async fn new_text(
    client: &Client,
    run_id: &str,
    result: &Value,
    stream: &str,
    at: &mut usize,
) -> Result<String, CliError> {
    let shown = result[stream].as_str().unwrap_or("");
    let truncated = &result["truncated"][stream];
    let Some(total) = truncated["total_bytes"].as_u64().map(|t| t as usize) else {
        // The whole stream is in the result.
        let new = shown.get(*at..).unwrap_or("").to_string();
        *at = (*at).max(shown.len());
        return Ok(new);
    };
    let mut out = String::new();
    for _ in 0..PAGES_PER_POLL {
        if *at >= total {
            break;
        }
        let page = client
            .call(
                "get_execution",
                json!({"run_id": run_id, "stream": stream, "offset": *at, "limit": PAGE_BYTES}),
                Duration::ZERO,
            )
            .await?;
        let text = page.value["text"].as_str().unwrap_or("");
        let next = page.value["next_offset"].as_u64().unwrap_or(0) as usize;
        if text.is_empty() || next <= *at {
            break;
        }
        out.push_str(text);
        *at = next;
    }
    Ok(out)
}

/// The parts of a finished run a person reads after its streams: the result text, the
/// displays' texts (images are named, with their size) and the error with its traceback.
pub struct Ending {
    /// `Out` value and display texts, for stdout.
    pub stdout: String,
    /// Error and traceback, notices, for stderr.
    pub stderr: String,
}

/// Render what follows the streams of a finished run.
pub fn ending(result: &Value) -> Ending {
    let mut stdout = String::new();
    for o in result["outputs"].as_array().into_iter().flatten() {
        if o["kind"] == "execute_result" && o["image"].is_null() {
            continue; // the same as `result`
        }
        if let Some(img) = o.get("image").filter(|i| !i.is_null()) {
            stdout.push_str(&format!(
                "[{} image, {}]\n",
                img["mime"].as_str().unwrap_or("image"),
                human_bytes(img["bytes"].as_u64().unwrap_or(0))
            ));
        } else if let Some(t) = o["text"].as_str() {
            line(&mut stdout, t);
        }
    }
    if let Some(r) = result["result"].as_str() {
        line(&mut stdout, r);
    }
    let mut stderr = String::new();
    if let Some(e) = result.get("error").filter(|e| !e.is_null()) {
        let tb = traceback(e);
        if tb.is_empty() {
            line(
                &mut stderr,
                &format!(
                    "{}: {}",
                    e["ename"].as_str().unwrap_or("Error"),
                    e["evalue"].as_str().unwrap_or("")
                ),
            );
        } else {
            for t in tb {
                line(&mut stderr, t);
            }
        }
    }
    for n in result["notices"].as_array().into_iter().flatten() {
        if let Some(n) = n.as_str() {
            line(&mut stderr, &format!("note: {n}"));
        }
    }
    Ending { stdout, stderr }
}

/// Append `t` to `out` as whole lines.
/// The traceback lines of an `error` object (none when it has no traceback).
pub fn traceback(e: &Value) -> Vec<&str> {
    e["traceback"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn line(out: &mut String, t: &str) {
    out.push_str(t);
    if !t.ends_with('\n') {
        out.push('\n');
    }
}

/// `1234567` → `1.2 MB`.
pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} kB", n as f64 / 1e3),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopped_runs_exit_3_and_only_ok_exits_0() {
        assert_eq!(exit_status("ok"), 0);
        assert_eq!(exit_status("error"), 1);
        for s in [
            "timeout",
            "interrupted",
            "cancelled",
            "kernel_died",
            "aborted",
        ] {
            assert_eq!(exit_status(s), 3, "{s}");
            assert!(is_final(s));
        }
        assert!(!is_final("running") && !is_final("queued") && !is_final("awaiting_input"));
    }

    #[test]
    fn the_ending_puts_the_result_on_stdout_and_the_traceback_on_stderr() {
        let r = json!({
            "result": "42",
            "outputs": [{"kind": "display_data", "image": {"mime": "image/png", "bytes": 2048}}],
            "error": {"ename": "ZeroDivisionError", "evalue": "division by zero",
                      "traceback": ["Traceback…", "ZeroDivisionError: division by zero"]},
            "notices": [],
        });
        let e = ending(&r);
        assert_eq!(e.stdout, "[image/png image, 2.0 kB]\n42\n");
        assert!(
            e.stderr.ends_with("ZeroDivisionError: division by zero\n"),
            "{}",
            e.stderr
        );
    }
}
