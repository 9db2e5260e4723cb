//! What a run collected from the kernel: its streams, result, displays, error and execution
//! count, stored in full up to [`MAX_STORED_BYTES`] and applied the way a notebook shows them
//! (`clear_output(wait)`, `update_display_data` by `display_id`). Spec: "IOPub" in
//! <https://jupyter-client.readthedocs.io/en/latest/messaging.html#messages-on-the-iopub-pub-sub-channel>.
//!
//! Output that arrives after the run finished is still applied here and counted in
//! `late_output` (docs/semantics.md).

use serde_json::Value;

use crate::session::display::{error_info, output_item, plain_text, stored_bytes};
use crate::session::output::clean_text;
use crate::session::quirks::Quirks;
use crate::session::types::{ErrorInfo, OutputItem};
use crate::wire::Message;

/// Output kept per run (bytes); beyond it output is dropped with a notice.
pub const MAX_STORED_BYTES: usize = 64 * 1024 * 1024;

/// Everything a run's messages carried, as the agent will see it.
#[derive(Debug, Default)]
pub struct RunOutput {
    stdout: String,
    stderr: String,
    /// Cleaned text of each stream, keyed by the raw length it was computed from
    /// (`None` text: the raw text needed no cleaning).
    stdout_clean: Option<(usize, Option<String>)>,
    stderr_clean: Option<(usize, Option<String>)>,
    /// text/plain of the execute_result (or IRkernel's text display).
    pub result: Option<String>,
    pub outputs: Vec<OutputItem>,
    /// `clear_output(wait=True)` seen: clear just before the next output.
    pending_clear: bool,
    pub error: Option<ErrorInfo>,
    pub execution_count: Option<i64>,
    /// Bytes that arrived after the run finished.
    pub late_output: usize,
    stored_bytes: usize,
    /// The "output dropped" notice, once the cap was hit (taken by the run).
    pub dropped_notice: Option<String>,
    dropped: bool,
}

impl RunOutput {
    /// Count up to `n` bytes against the per-run cap; returns how many may be kept.
    fn admit(&mut self, n: usize, finished: bool) -> usize {
        if finished {
            self.late_output += n;
        }
        let room = MAX_STORED_BYTES.saturating_sub(self.stored_bytes);
        let kept = n.min(room);
        if kept < n && !self.dropped {
            self.dropped = true;
            self.dropped_notice = Some(format!(
                "Output beyond {} MiB was dropped for this run: the text shown and pageable ends there, not at the real end of the output.",
                MAX_STORED_BYTES / (1024 * 1024)
            ));
        }
        self.stored_bytes += kept;
        kept
    }

    /// Apply one iopub message whose parent is this run's request.
    /// Returns true for `status: idle`.
    pub fn apply_iopub(&mut self, msg: &Message, quirks: &Quirks, finished: bool) -> bool {
        let c = &msg.content;
        match msg.msg_type() {
            "stream" => {
                let text = c["text"].as_str().unwrap_or_default();
                // Keep what fits under the cap, cut at a character boundary.
                let mut kept = self.admit(text.len(), finished);
                while !text.is_char_boundary(kept) {
                    kept -= 1;
                }
                let text = &text[..kept];
                if text.is_empty() {
                    return false;
                }
                self.take_pending_clear();
                if c["name"] == "stderr" {
                    self.stderr.push_str(text);
                } else {
                    self.stdout.push_str(text);
                }
            }
            "execute_result" | "display_data" => self.apply_display(msg, quirks, finished),
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
                e.ename = quirks.ename(e.ename);
                self.error = Some(e);
            }
            "execute_input" => {
                if let Some(n) = c["execution_count"].as_i64() {
                    self.execution_count.get_or_insert(n);
                }
            }
            "status" => return c["execution_state"] == "idle",
            _ => {}
        }
        false
    }

    fn apply_display(&mut self, msg: &Message, quirks: &Quirks, finished: bool) {
        let c = &msg.content;
        let item = output_item(msg.msg_type(), c);
        let size = stored_bytes(&item);
        if self.admit(size, finished) < size {
            return;
        }
        self.take_pending_clear();
        if msg.msg_type() == "display_data" && quirks.display_is_result && item.image.is_none() {
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
        if let Some(id) = &item.display_id {
            // A display with an id already shown updates the earlier ones too, as nbclient
            // does, and is then shown itself.
            for o in self
                .outputs
                .iter_mut()
                .filter(|o| o.display_id.as_ref() == Some(id))
            {
                *o = item.clone();
            }
        }
        self.outputs.push(item);
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

    /// Apply the `execute_reply` content: its execution_count and, for status `error`, the
    /// error when no `error` message came.
    pub fn apply_reply(&mut self, content: &Value, quirks: &Quirks) {
        if let Some(n) = content["execution_count"].as_i64() {
            self.execution_count = Some(n);
        }
        if content["status"] == "error" && self.error.is_none() {
            let mut e = error_info(content);
            e.ename = quirks.ename(e.ename);
            self.error = Some(e);
        }
    }

    /// Kernels that report errors as output lines (see [`Quirks::error_line_prefix`]): the
    /// first such stdout line becomes the run's error.
    pub fn detect_error_line(&mut self, quirks: &Quirks) {
        let Some(prefix) = quirks.error_line_prefix else {
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

    /// The full cleaned text of one stream (`stdout` / `stderr`), cached until it grows.
    pub fn stream_text(&mut self, stderr: bool) -> &str {
        if stderr {
            cached_clean(&self.stderr, &mut self.stderr_clean)
        } else {
            cached_clean(&self.stdout, &mut self.stdout_clean)
        }
    }

    /// Bytes stored for this run (streams, texts and images).
    pub fn stored_bytes(&self) -> usize {
        self.stored_bytes
    }

    /// The last non-empty line of output (for progress messages).
    pub fn last_line(&self) -> Option<String> {
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
        tail(&self.stdout).or_else(|| tail(&self.stderr))
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

    fn display(text: &str, id: &str) -> Message {
        let mut m = Message::new(
            "display_data",
            json!({"data": {"text/plain": text}, "transient": {"display_id": id}}),
            "s",
        );
        m.parent_header = None;
        m
    }

    #[test]
    fn a_display_update_replaces_the_output_with_that_display_id() {
        let mut out = RunOutput::default();
        out.apply_iopub(&display("v1", "d1"), &Quirks::default(), false);
        out.update_display(
            &json!({"data": {"text/plain": "v2"}, "transient": {"display_id": "d1"}}),
        );
        out.update_display(
            &json!({"data": {"text/plain": "other"}, "transient": {"display_id": "d2"}}),
        );
        assert_eq!(out.outputs.len(), 1);
        assert_eq!(out.outputs[0].text.as_deref(), Some("v2"));
    }

    #[test]
    fn a_second_display_with_the_same_id_in_one_run_updates_the_first_and_is_shown() {
        let mut out = RunOutput::default();
        let q = Quirks::default();
        out.apply_iopub(&display("v1", "d1"), &q, false);
        out.apply_iopub(&display("other", "d2"), &q, false);
        out.apply_iopub(&display("v2", "d1"), &q, false);
        let texts: Vec<_> = out.outputs.iter().map(|o| o.text.clone()).collect();
        let v2 = Some("v2".to_string());
        assert_eq!(texts, [v2.clone(), Some("other".to_string()), v2]);
    }

    #[test]
    fn output_past_the_cap_is_dropped_with_one_notice_and_late_bytes_are_counted() {
        let mut out = RunOutput::default();
        let q = Quirks::default();
        let chunk = "x".repeat(1024 * 1024);
        let stream = Message::new("stream", json!({"name": "stdout", "text": chunk}), "s");
        for _ in 0..MAX_STORED_BYTES / chunk.len() + 2 {
            out.apply_iopub(&stream, &q, false);
        }
        assert_eq!(out.stored_bytes(), MAX_STORED_BYTES);
        assert!(out.dropped_notice.is_some());
        assert_eq!(out.late_output, 0);
        out.apply_iopub(&stream, &q, true);
        assert_eq!(out.late_output, chunk.len());
    }
}
