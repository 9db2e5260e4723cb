//! One run: an `execute_request` and everything the kernel sent back for it, correlated by
//! `parent_header.msg_id` (DESIGN §2 "Done"; spec "Request-Reply" and "IOPub").
//!
//! Output is stored in full up to [`MAX_STORED_BYTES`] per run; responses show a bounded
//! head + tail per stream ([`Run::to_result`]). Output that arrives after the run finished is
//! still applied to this run and counted in `late_output`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::display::{error_info, history_output, output_item, plain_text, stored_bytes};
use super::history::{ENTRY_STREAM_BYTES, HistoryEntry};
use super::output::{clean_text, head_tail};
use super::quirks::Quirks;
use super::types::{ErrorInfo, ExecutionResult, OutputItem, Prompt, RunStatus, StreamTruncation};
use crate::wire::Message;

/// Output kept per run; beyond it output is dropped with a notice.
pub const MAX_STORED_BYTES: usize = 64 * 1024 * 1024;

/// Everything known about one run.
pub struct Run {
    pub run_id: String,
    pub session_id: String,
    pub code: String,
    pub store_history: bool,
    /// Generation of the kernel it ran in (or will run in).
    pub generation: u64,
    pub state_reset: bool,
    pub status: RunStatus,
    /// `msg_id` of its execute_request, once sent.
    pub msg_id: Option<String>,
    pub execution_count: Option<i64>,
    stdout: String,
    stderr: String,
    /// Cleaned text of each stream, keyed by the raw length it was computed from
    /// (`None` text: the raw text needed no cleaning).
    stdout_clean: Option<(usize, Option<String>)>,
    stderr_clean: Option<(usize, Option<String>)>,
    result: Option<String>,
    outputs: Vec<OutputItem>,
    /// `clear_output(wait=True)` seen: clear just before the next output.
    pending_clear: bool,
    pub error: Option<ErrorInfo>,
    pub prompt: Option<Prompt>,
    /// The input_request waiting for an answer.
    pub input_request: Option<Message>,
    /// Answers for `input()` given with the call, used in order.
    pub stdin_answers: std::collections::VecDeque<String>,
    pub notices: Vec<String>,
    pub reply: Option<Value>,
    /// When the reply arrived (the iopub grace counts from here).
    pub reply_at: Option<Instant>,
    pub idle: bool,
    pub late_output: usize,
    stored_bytes: usize,
    dropped_notice: bool,
    pub queued_at: Instant,
    pub started_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    /// Run-time limit; `None` = none.
    pub timeout: Option<Duration>,
    /// Set when we interrupted it (deadline, cancel or interrupt_session).
    pub interrupted_at: Option<Instant>,
    /// When the interrupt was last sent (it is repeated until the run stops or the grace ends).
    pub last_interrupt_at: Option<Instant>,
    pub timed_out: bool,
    /// How the kernel it runs in bends the protocol.
    pub quirks: Quirks,
    /// An is_complete_request in flight before executing: its msg_id and when it was sent.
    pub completeness_check: Option<(String, Instant)>,
    /// When the kernel's terminal was last probed for a blocked read, and how many probes in a
    /// row found one.
    pub last_terminal_probe: Option<Instant>,
    pub terminal_reads: u8,
    /// The run was interrupted because it waited for input the kernel cannot forward.
    pub stdin_refused: bool,
    /// Changes whenever the status changes; waiters watch it.
    pub phase: watch::Sender<RunStatus>,
}

impl Run {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        run_id: String,
        session_id: String,
        code: String,
        store_history: bool,
        timeout: Option<Duration>,
        stdin_answers: Vec<String>,
    ) -> Run {
        let (phase, _) = watch::channel(RunStatus::Queued);
        Run {
            run_id,
            session_id,
            code,
            store_history,
            generation: 0,
            state_reset: false,
            status: RunStatus::Queued,
            msg_id: None,
            execution_count: None,
            stdout: String::new(),
            stderr: String::new(),
            stdout_clean: None,
            stderr_clean: None,
            result: None,
            outputs: Vec::new(),
            pending_clear: false,
            error: None,
            prompt: None,
            input_request: None,
            stdin_answers: stdin_answers.into(),
            notices: Vec::new(),
            reply: None,
            reply_at: None,
            idle: false,
            late_output: 0,
            stored_bytes: 0,
            dropped_notice: false,
            queued_at: Instant::now(),
            started_at: None,
            finished_at: None,
            timeout,
            interrupted_at: None,
            last_interrupt_at: None,
            timed_out: false,
            quirks: Quirks::default(),
            completeness_check: None,
            last_terminal_probe: None,
            terminal_reads: 0,
            stdin_refused: false,
            phase,
        }
    }

    /// Change status and wake waiters.
    pub fn set_status(&mut self, status: RunStatus) {
        self.status = status;
        if status.is_final() && self.finished_at.is_none() {
            self.finished_at = Some(Instant::now());
        }
        self.phase.send_replace(status);
    }

    /// A receiver that sees every status change.
    pub fn watch(&self) -> watch::Receiver<RunStatus> {
        self.phase.subscribe()
    }

    /// Count `n` bytes against the per-run cap; false when they must be dropped.
    fn admit(&mut self, n: usize) -> bool {
        self.admit_up_to(n) == n
    }

    /// Count up to `n` bytes against the per-run cap; returns how many may be kept (the rest
    /// is dropped, with a notice the first time).
    fn admit_up_to(&mut self, n: usize) -> usize {
        if self.status.is_final() {
            self.late_output += n;
        }
        let room = MAX_STORED_BYTES.saturating_sub(self.stored_bytes);
        let kept = n.min(room);
        if kept < n && !self.dropped_notice {
            self.dropped_notice = true;
            self.notices.push(format!(
                "Output beyond {} MiB was dropped for this run: the text shown and pageable ends there, not at the real end of the output.",
                MAX_STORED_BYTES / (1024 * 1024)
            ));
        }
        self.stored_bytes += kept;
        kept
    }

    /// Apply one iopub message whose parent is this run's request.
    pub fn apply_iopub(&mut self, msg: &Message) {
        let c = &msg.content;
        match msg.msg_type() {
            "stream" => {
                let text = c["text"].as_str().unwrap_or_default();
                // Keep what fits under the cap, cut at a character boundary.
                let mut kept = self.admit_up_to(text.len());
                while !text.is_char_boundary(kept) {
                    kept -= 1;
                }
                let text = &text[..kept];
                if text.is_empty() {
                    return;
                }
                self.take_pending_clear();
                if c["name"] == "stderr" {
                    self.stderr.push_str(text);
                } else {
                    self.stdout.push_str(text);
                }
            }
            "execute_result" | "display_data" => {
                let item = output_item(msg.msg_type(), c);
                let size = stored_bytes(&item);
                if !self.admit(size) {
                    return;
                }
                self.take_pending_clear();
                if msg.msg_type() == "display_data"
                    && self.quirks.display_is_result
                    && item.image.is_none()
                {
                    // IRkernel's way of returning a value.
                    if let Some(text) = plain_text(&item) {
                        self.result = Some(match self.result.take() {
                            Some(prev) => format!("{prev}\n{text}"),
                            None => text,
                        });
                    }
                    return;
                }
                if msg.msg_type() == "execute_result" {
                    if let Some(n) = c["execution_count"].as_i64() {
                        self.execution_count = Some(n);
                    }
                    if item.image.is_none() && item.mime_types.iter().all(|m| m == "text/plain") {
                        self.result = item.text;
                        return;
                    }
                    self.result = item.text.clone();
                }
                self.outputs.push(item);
            }
            "clear_output" => {
                if c["wait"].as_bool().unwrap_or(false) {
                    self.pending_clear = true;
                } else {
                    self.clear();
                }
            }
            "error" => {
                self.take_pending_clear();
                let mut e = error_info(c);
                e.ename = self.quirks.ename(e.ename);
                self.error = Some(e);
            }
            "execute_input" => {
                if let Some(n) = c["execution_count"].as_i64() {
                    self.execution_count.get_or_insert(n);
                }
            }
            "status" if c["execution_state"] == "idle" => {
                self.idle = true;
            }
            _ => {}
        }
    }

    /// Apply an `update_display_data`: replace the outputs that carry its `display_id`.
    pub fn update_display(&mut self, content: &Value) {
        let item = output_item("display_data", content);
        let Some(id) = &item.display_id else {
            return;
        };
        for o in self
            .outputs
            .iter_mut()
            .filter(|o| o.display_id.as_ref() == Some(id))
        {
            *o = item.clone();
        }
    }

    fn take_pending_clear(&mut self) {
        if std::mem::take(&mut self.pending_clear) {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.stdout.clear();
        self.stderr.clear();
        self.outputs.clear();
    }

    /// Apply the `execute_reply`.
    pub fn apply_reply(&mut self, content: &Value) {
        if let Some(n) = content["execution_count"].as_i64() {
            self.execution_count = Some(n);
        }
        if content["status"] == "error" && self.error.is_none() {
            let mut e = error_info(content);
            e.ename = self.quirks.ename(e.ename);
            self.error = Some(e);
        }
        self.reply = Some(content.clone());
        self.reply_at = Some(Instant::now());
    }

    /// The final status implied by the reply (and by what we did to the run).
    pub fn status_from_reply(&mut self) -> RunStatus {
        let status = self
            .reply
            .as_ref()
            .and_then(|r| r["status"].as_str())
            .unwrap_or("ok")
            .to_string();
        if self.stdin_refused {
            return RunStatus::Error;
        }
        // Did the deadline or interrupt cut the run short, or did it finish first?
        let cut_short = status != "ok" || self.error.is_some() || self.quirks.interrupt_replies_ok;
        if self.timed_out && cut_short {
            return RunStatus::Timeout;
        }
        if self.interrupted_at.is_some() && cut_short {
            return RunStatus::Interrupted;
        }
        if self.timed_out || self.interrupted_at.is_some() {
            self.notices.push(
                "The code finished before the interrupt took effect; its result is complete."
                    .into(),
            );
        }
        if status == "ok" && self.error.is_none() {
            self.detect_error_line();
        }
        match status.as_str() {
            "ok" if self.error.is_some() => RunStatus::Error,
            "ok" => RunStatus::Ok,
            "error" => RunStatus::Error,
            _ => RunStatus::Aborted,
        }
    }

    /// Kernels that report errors as output lines (see [`Quirks::error_line_prefix`]): the
    /// first such stdout line becomes the run's error.
    fn detect_error_line(&mut self) {
        let Some(prefix) = self.quirks.error_line_prefix else {
            return;
        };
        let text = cached_clean(&self.stdout, &mut self.stdout_clean);
        if let Some(line) = text.lines().find(|l| l.starts_with(prefix)) {
            self.error = Some(ErrorInfo {
                ename: prefix.trim_end_matches([':', ' ']).to_string(),
                evalue: line[prefix.len()..].trim().to_string(),
                traceback: vec![line.to_string()],
            });
        }
    }

    /// True when the reply says `aborted`/`abort` (kernels send no idle for those).
    pub fn reply_aborted(&self) -> bool {
        self.reply
            .as_ref()
            .and_then(|r| r["status"].as_str())
            .is_some_and(|s| s != "ok" && s != "error")
    }

    /// The full cleaned text of one stream (`stdout` / `stderr`), cached until it grows.
    pub fn stream_text(&mut self, stream: &str) -> &str {
        if stream == "stderr" {
            cached_clean(&self.stderr, &mut self.stderr_clean)
        } else {
            cached_clean(&self.stdout, &mut self.stdout_clean)
        }
    }

    /// Bytes stored for this run (streams, texts and images).
    pub fn stored_bytes(&self) -> usize {
        self.stored_bytes
    }

    /// The last non-empty line of output (for progress messages), or the status.
    pub fn last_line(&self) -> String {
        let tail = |s: &str| {
            let mut start = s.len().saturating_sub(4096);
            while !s.is_char_boundary(start) {
                start += 1;
            }
            clean_text(&s[start..])
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.chars().take(200).collect::<String>())
        };
        tail(&self.stdout)
            .or_else(|| tail(&self.stderr))
            .unwrap_or_else(|| self.status.as_str().to_string())
    }

    /// The run as a history entry (streams bounded to [`ENTRY_STREAM_BYTES`] each).
    pub fn history_entry(&mut self) -> HistoryEntry {
        let bounded = |t: &str| head_tail(t, ENTRY_STREAM_BYTES).0;
        let stdout = bounded(cached_clean(&self.stdout, &mut self.stdout_clean));
        let stderr = bounded(cached_clean(&self.stderr, &mut self.stderr_clean));
        let outputs = self.outputs.iter().map(history_output).collect();
        HistoryEntry {
            run_id: self.run_id.clone(),
            code: self.code.clone(),
            status: self.status,
            execution_count: self.execution_count,
            generation: self.generation,
            stdout,
            stderr,
            result: self.result.as_deref().map(|r| clean_text(r).into_owned()),
            error: self.error.clone(),
            outputs,
            finished_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }

    /// The record as the contract's [`ExecutionResult`], each stream bounded to `stream_limit` bytes.
    pub fn to_result(&mut self, stream_limit: usize) -> ExecutionResult {
        let mut truncated = BTreeMap::new();
        let mut shown = |name: &str, text: &str| {
            let (text_shown, omitted) = head_tail(text, stream_limit);
            if let Some(omitted) = omitted {
                truncated.insert(
                    name.to_string(),
                    StreamTruncation {
                        total_bytes: text.len(),
                        omitted_bytes: omitted,
                    },
                );
            }
            text_shown
        };
        let stdout = shown("stdout", cached_clean(&self.stdout, &mut self.stdout_clean));
        let stderr = shown("stderr", cached_clean(&self.stderr, &mut self.stderr_clean));
        let now = Instant::now();
        let started = self.started_at.unwrap_or(now);
        let queued_ms = started.duration_since(self.queued_at).as_millis() as u64;
        let elapsed_ms = self
            .started_at
            .map(|s| {
                self.finished_at
                    .unwrap_or(now)
                    .duration_since(s)
                    .as_millis() as u64
            })
            .unwrap_or(0);
        ExecutionResult {
            run_id: self.run_id.clone(),
            session_id: self.session_id.clone(),
            generation: self.generation,
            state_reset: self.state_reset,
            status: self.status,
            execution_count: self.execution_count,
            stdout,
            stderr,
            result: self.result.as_deref().map(|r| clean_text(r).into_owned()),
            outputs: self.outputs.clone(),
            error: self.error.clone(),
            prompt: self.prompt.clone(),
            truncated: (!truncated.is_empty()).then_some(truncated),
            late_output: self.late_output,
            queued_ms,
            elapsed_ms,
            notices: self.notices.clone(),
        }
    }
}

/// `raw` cleaned, recomputed only when `raw` has grown since the cached copy.
fn cached_clean<'a>(raw: &'a str, cache: &'a mut Option<(usize, Option<String>)>) -> &'a str {
    if cache.as_ref().map(|c| c.0) != Some(raw.len()) {
        let cleaned = match clean_text(raw) {
            std::borrow::Cow::Borrowed(_) => None,
            std::borrow::Cow::Owned(s) => Some(s),
        };
        *cache = Some((raw.len(), cleaned));
    }
    match cache {
        Some((_, Some(text))) => text,
        _ => raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_display_update_replaces_the_output_with_that_display_id() {
        let mut run = Run::new(
            "r".into(),
            "s".into(),
            String::new(),
            true,
            None,
            Vec::new(),
        );
        let show = |text: &str| {
            let mut m = Message::new(
                "display_data",
                json!({"data": {"text/plain": text}, "transient": {"display_id": "d1"}}),
                "s",
            );
            m.parent_header = None;
            m
        };
        run.apply_iopub(&show("v1"));
        run.update_display(
            &json!({"data": {"text/plain": "v2"}, "transient": {"display_id": "d1"}}),
        );
        run.update_display(
            &json!({"data": {"text/plain": "other"}, "transient": {"display_id": "d2"}}),
        );
        assert_eq!(run.outputs.len(), 1);
        assert_eq!(run.outputs[0].text.as_deref(), Some("v2"));
    }

    #[test]
    fn a_run_that_finishes_before_its_interrupt_lands_is_ok_unless_the_kernel_cannot_tell() {
        let finished = |quirks: Quirks| {
            let mut run = Run::new(
                "r".into(),
                "s".into(),
                String::new(),
                true,
                None,
                Vec::new(),
            );
            run.quirks = quirks;
            run.interrupted_at = Some(Instant::now());
            run.apply_reply(&json!({"status": "ok", "execution_count": 1}));
            run.status_from_reply()
        };
        assert_eq!(finished(Quirks::default()), RunStatus::Ok);
        let octave = Quirks {
            interrupt_replies_ok: true,
            ..Default::default()
        };
        assert_eq!(finished(octave), RunStatus::Interrupted);
    }
}
