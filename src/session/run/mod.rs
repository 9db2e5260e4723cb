//! One run: an `execute_request` and everything the kernel sent back for it, correlated by
//! `parent_header.msg_id` (docs/semantics.md; spec "Request-Reply" and "IOPub").
//!
//! The run's life is its [`Phase`] (`phase.rs`); what it collected is its [`RunOutput`]
//! (`output.rs`); what a response shows of it, bounded, is built in `response.rs`.

pub mod output;
pub mod phase;
mod response;
pub mod spool;
pub mod stream;

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

pub use output::{RunOutput, Slot};
pub use phase::{Deadline, Executing, Interrupting, Phase, SentAhead, Timing};
pub use response::{Bounds, Part, page_part};

use super::display::history_output;
use super::history::{ENTRY_STREAM_BYTES, EntrySlot, HistoryEntry, HistoryOutput};
use super::ids::RunId;
use super::quirks::Quirks;
use super::text::{clean_text, head_tail};
use super::types::{ErrorInfo, Prompt, RunStatus};
use crate::wire::Message;

/// Everything known about one run.
pub struct Run {
    pub id: RunId,
    pub session_id: String,
    pub code: String,
    pub store_history: bool,
    /// Run-time limit; `None` = none.
    pub timeout: Option<Duration>,
    /// Longest wait before the code starts (`queue_timeout_s`); `None` = none.
    pub queue_timeout: Option<Duration>,
    /// The run it follows (see `ExecuteRequest::follows`).
    pub follows: Option<crate::session::Follows>,
    /// Since when, and behind whose cell, it has waited for another client of the kernel
    /// (see `actor/foreign.rs`).
    pub held: Option<(Instant, String)>,
    /// Answers for `input()` given with the call, used in order.
    pub stdin_answers: VecDeque<String>,
    /// Generation of the kernel it ran in (or will run in).
    pub generation: u64,
    pub state_reset: bool,
    /// How the kernel it runs in bends the protocol.
    pub quirks: Quirks,
    pub phase: Phase,
    status: RunStatus,
    /// Changes whenever the status changes; waiters watch it.
    status_tx: watch::Sender<RunStatus>,
    pub output: RunOutput,
    /// The input_request waiting for an answer, and its prompt.
    pub input: Option<(Message, Prompt)>,
    pub notices: Vec<String>,
    pub queued_at: Instant,
    pub started_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    /// Wall-clock dates of `queued_at` and `finished_at` (what a task reports; see
    /// `mcp/tasks.rs`).
    pub queued_date: chrono::DateTime<chrono::Utc>,
    pub finished_date: Option<chrono::DateTime<chrono::Utc>>,
    /// Its telemetry spans, told of its status changes (see [`Run::set_status`]).
    pub trace: crate::telemetry::RunTrace,
}

impl Run {
    pub fn new(
        id: RunId,
        session_id: String,
        code: String,
        store_history: bool,
        timeout: Option<Duration>,
        stdin_answers: Vec<String>,
    ) -> Run {
        let (status_tx, _) = watch::channel(RunStatus::Queued);
        let output = RunOutput::new(id.as_str());
        Run {
            id,
            session_id,
            code,
            store_history,
            timeout,
            queue_timeout: None,
            follows: None,
            held: None,
            stdin_answers: stdin_answers.into(),
            generation: 0,
            state_reset: false,
            quirks: Quirks::default(),
            phase: Phase::Queued,
            status: RunStatus::Queued,
            status_tx,
            output,
            input: None,
            notices: Vec::new(),
            queued_at: Instant::now(),
            started_at: None,
            finished_at: None,
            queued_date: chrono::Utc::now(),
            finished_date: None,
            trace: Default::default(),
        }
    }

    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// Change status and wake waiters. A final status also ends the phase.
    pub fn set_status(&mut self, status: RunStatus) {
        self.status = status;
        if status == RunStatus::Running {
            self.trace.executing(self.generation);
        }
        if status.is_final() {
            self.phase = Phase::Done;
            self.input = None;
            self.finished_at.get_or_insert_with(Instant::now);
            self.finished_date.get_or_insert_with(chrono::Utc::now);
            self.output.seal();
            self.trace.ended(crate::telemetry::RunEnd {
                status: status.as_str(),
                execution_count: self.output.execution_count,
                output_bytes: self.output.stored_bytes(),
                truncated: self.output.dropped(),
                output: self.output.result.as_deref().unwrap_or_default(),
            });
        }
        self.status_tx.send_replace(status);
    }

    /// A receiver that sees every status change.
    pub fn watch(&self) -> watch::Receiver<RunStatus> {
        self.status_tx.subscribe()
    }

    /// Apply one iopub message parented to this run.
    pub fn apply_iopub(&mut self, msg: &Message) {
        let finished = self.status.is_final();
        let idle = self.output.apply_iopub(msg, &self.quirks, finished);
        if let Some(n) = self.output.dropped_notice.take() {
            self.notices.push(n);
        }
        if let Some(e) = self.phase.executing_mut() {
            e.last_output = Some(Instant::now());
            if idle {
                e.idle = true;
                // The request is over: a repeated SIGINT now could only hit a later request.
                e.code_stopped = true;
                if e.reply.is_none() {
                    e.idle_before_reply = Some(Instant::now());
                }
            }
            if msg.msg_type() == "error" {
                e.code_stopped = true;
            }
        }
    }

    /// Apply the `execute_reply`.
    pub fn apply_reply(&mut self, content: serde_json::Value) {
        self.output.apply_reply(&content, &self.quirks);
        // `exit()` in IPython asks the frontend to end the kernel (a reply payload, see
        // https://jupyter-client.readthedocs.io/en/stable/messaging.html#payloads-deprecated);
        // the session keeps its kernel, so say so instead of staying silent.
        let asks_exit = content["payload"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["source"] == "ask_exit"));
        if asks_exit {
            self.notices.push(ASK_EXIT_NOTICE.into());
        }
        if let Some(e) = self.phase.executing_mut() {
            e.reply = Some((content, Instant::now()));
        }
    }

    /// The final status implied by the reply and by what we did to the run.
    pub fn final_status(&mut self) -> RunStatus {
        let Some(e) = self.phase.executing() else {
            return RunStatus::Ok;
        };
        let status = e.reply_status().unwrap_or("ok").to_string();
        let unmet = e.ahead.as_ref().and_then(|a| a.unmet.clone());
        let aborted = e.reply.is_some() && !matches!(status.as_str(), "ok" | "error");
        if let (Some(why), true) = (&unmet, aborted) {
            self.notices.push(format!("Not run: {why}"));
            return RunStatus::Cancelled;
        }
        if e.cancel_on_start {
            return RunStatus::Cancelled;
        }
        if let Some(why) = unmet {
            self.notices.push(format!(
                "This was not to run ({why}), but its request was already in the kernel's queue and the kernel ran it."
            ));
        }
        if e.stdin_refused {
            return RunStatus::Error;
        }
        if e.reply_dropped && e.reply.is_none() {
            let interrupted = e.interrupt.is_some();
            self.notices.push(if interrupted {
                "The interrupt reached the kernel outside the code, which then ended the request without a reply; any code that did not run was skipped. The kernel's state is kept.".into()
            } else {
                "The kernel ended this request without a reply (its log may say why); the output shown is all it sent.".into()
            });
            if e.timed_out {
                return RunStatus::Timeout;
            }
            if interrupted {
                return RunStatus::Interrupted;
            }
            self.output.error.get_or_insert_with(|| ErrorInfo {
                ename: "NoReply".into(),
                evalue: "the kernel ended the request without an execute_reply".into(),
                traceback: vec![
                    "The kernel's log may say why; run the code again to see whether it is repeatable."
                        .into(),
                ],
            });
            return RunStatus::Error;
        }
        // Did the deadline or interrupt cut the run short, or did it finish first?
        let cut_short =
            status != "ok" || self.output.error.is_some() || self.quirks.interrupt_replies_ok;
        let (timed_out, interrupted) = (e.timed_out, e.interrupt.is_some());
        if timed_out && cut_short {
            return RunStatus::Timeout;
        }
        if interrupted && cut_short {
            return RunStatus::Interrupted;
        }
        if timed_out || interrupted {
            self.notices.push(
                "The code finished before the interrupt took effect; its result is complete."
                    .into(),
            );
        }
        if status == "ok" && self.output.error.is_none() {
            self.output.detect_error_line(&self.quirks);
        }
        match status.as_str() {
            "ok" if self.output.error.is_some() => RunStatus::Error,
            "ok" => RunStatus::Ok,
            "error" => RunStatus::Error,
            _ => RunStatus::Aborted,
        }
    }

    /// The last non-empty line of output (for progress messages), or the status.
    pub fn last_line(&mut self) -> String {
        self.output
            .last_line()
            .unwrap_or_else(|| self.status.as_str().to_string())
    }

    /// The run as a history entry (streams bounded to [`ENTRY_STREAM_BYTES`] each).
    pub fn history_entry(&mut self) -> HistoryEntry {
        let bounded = |t: &str| head_tail(t, ENTRY_STREAM_BYTES).0;
        let stdout = self.output.stream(false).head_tail(ENTRY_STREAM_BYTES).0;
        let stderr = self.output.stream(true).head_tail(ENTRY_STREAM_BYTES).0;
        let o = &self.output;
        let order = entry_order(o, [&stdout, &stderr]);
        let outputs = o
            .displays()
            .iter()
            .map(|d| HistoryOutput {
                is_result: !d.shown,
                ..history_output(&d.item)
            })
            .collect();
        HistoryEntry {
            run_id: self.id.to_string(),
            code: self.code.clone(),
            status: self.status,
            execution_count: o.execution_count,
            generation: self.generation,
            stdout,
            stderr,
            result: o
                .result
                .as_deref()
                .map(|r| bounded(&clean_text(r)).to_string()),
            error: o.error.clone(),
            outputs,
            order: Some(order),
            finished_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            other_client: false,
        }
    }
}

/// Stream slots an entry keeps in order; a run with more keeps each stream whole, as one
/// slot where it first wrote, bounded like the entry's `stdout` / `stderr` (so a flood of
/// alternating writes stays one bounded entry). A stream that went to a spool file is kept
/// that way too.
const MAX_ENTRY_STREAM_SLOTS: usize = 1000;

/// The run's outputs in order as a history entry keeps them: each stream slot's text
/// cleaned, one stream's slots bounded (head + tail each) to about [`ENTRY_STREAM_BYTES`]
/// in all, shared in proportion to their sizes.
fn entry_order(o: &RunOutput, whole: [&str; 2]) -> Vec<EntrySlot> {
    let streams = o
        .slots()
        .iter()
        .filter(|s| matches!(s, Slot::Stream { .. }))
        .count();
    let mut totals = [0usize; 2];
    for s in o.slots() {
        if let Slot::Stream { stderr, start, end } = s {
            totals[usize::from(*stderr)] += end - start;
        }
    }
    let name = |stderr: bool| if stderr { "stderr" } else { "stdout" }.to_string();
    let mut order = Vec::with_capacity(o.slots().len());
    let mut seen = [false; 2];
    for s in o.slots() {
        match s {
            Slot::Stream { stderr, .. }
                if streams > MAX_ENTRY_STREAM_SLOTS || o.is_spilled(*stderr) =>
            {
                let i = usize::from(*stderr);
                if !std::mem::replace(&mut seen[i], true) {
                    order.push(EntrySlot::Stream {
                        name: name(*stderr),
                        text: whole[i].to_string(),
                    });
                }
            }
            Slot::Stream { stderr, start, end } => {
                let raw = o.stream_slice(*stderr, *start, *end).unwrap_or_default();
                let text = clean_text(raw);
                let total = totals[usize::from(*stderr)].max(1);
                let share = if total <= ENTRY_STREAM_BYTES {
                    usize::MAX
                } else {
                    (ENTRY_STREAM_BYTES as u128 * (end - start) as u128 / total as u128) as usize
                };
                order.push(EntrySlot::Stream {
                    name: name(*stderr),
                    text: head_tail(&text, share.max(256)).0,
                });
            }
            Slot::Display(index) => order.push(EntrySlot::Output { index: *index }),
            Slot::Error => order.push(EntrySlot::Error),
        }
    }
    order
}

/// The notice of a run whose code asked the kernel to exit.
pub const ASK_EXIT_NOTICE: &str = "The code asked the kernel to exit (exit() or quit()); the session keeps its kernel running, its state intact. destroy_session ends the session; restart_session gives it a fresh kernel.";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_asking_to_exit_gets_a_notice_that_the_kernel_stays() {
        let mut run = Run::new(RunId::new(), "s".into(), String::new(), true, None, vec![]);
        run.apply_reply(json!({"status": "ok", "execution_count": 1, "payload": [
            {"source": "ask_exit", "keepkernel": false}
        ]}));
        assert_eq!(run.notices, [ASK_EXIT_NOTICE]);
        let mut plain = Run::new(RunId::new(), "s".into(), String::new(), true, None, vec![]);
        plain.apply_reply(json!({"status": "ok", "execution_count": 1, "payload": []}));
        assert!(plain.notices.is_empty());
    }

    #[test]
    fn a_run_that_finishes_before_its_interrupt_lands_is_ok_unless_the_kernel_cannot_tell() {
        let finished = |quirks: Quirks| {
            let mut run = Run::new(RunId::new(), "s".into(), String::new(), true, None, vec![]);
            run.quirks = quirks;
            let mut e = Executing::new(Instant::now());
            e.interrupt = Some(Interrupting::new(Instant::now()));
            run.phase = Phase::Executing(e);
            run.apply_reply(json!({"status": "ok", "execution_count": 1}));
            run.final_status()
        };
        assert_eq!(finished(Quirks::default()), RunStatus::Ok);
        let octave = Quirks {
            interrupt_replies_ok: true,
            ..Default::default()
        };
        assert_eq!(finished(octave), RunStatus::Interrupted);
    }

    fn stream(name: &str, text: &str) -> Message {
        Message::new("stream", json!({"name": name, "text": text}), "s")
    }

    #[test]
    fn a_history_entry_keeps_the_order_with_each_stream_cleaned() {
        let mut run = Run::new(RunId::new(), "s".into(), String::new(), true, None, vec![]);
        run.apply_iopub(&stream("stderr", "a\n"));
        run.apply_iopub(&stream("stdout", "1\r2\n"));
        let result = json!({"data": {"text/plain": "3"}, "execution_count": 1});
        run.apply_iopub(&Message::new("execute_result", result, "s"));
        let entry = run.history_entry();
        let stream = |name: &str, text: &str| EntrySlot::Stream {
            name: name.into(),
            text: text.into(),
        };
        assert_eq!(
            entry.order,
            Some(vec![
                stream("stderr", "a\n"),
                stream("stdout", "2\n"),
                EntrySlot::Output { index: 0 }
            ])
        );
        assert!(entry.outputs[0].is_result);
        assert_eq!(entry.result.as_deref(), Some("3"));
    }

    #[test]
    fn a_flood_of_alternating_writes_is_kept_as_one_slot_per_stream() {
        let mut run = Run::new(RunId::new(), "s".into(), String::new(), true, None, vec![]);
        for _ in 0..MAX_ENTRY_STREAM_SLOTS {
            run.apply_iopub(&stream("stdout", "o"));
            run.apply_iopub(&stream("stderr", "e"));
        }
        let entry = run.history_entry();
        let order = entry.order.expect("an order");
        assert_eq!(order.len(), 2, "{order:?}");
        assert_eq!(
            order[0],
            EntrySlot::Stream {
                name: "stdout".into(),
                text: "o".repeat(MAX_ENTRY_STREAM_SLOTS)
            }
        );
    }
}
