//! What a run collected from the kernel, as one ordered model: every output in the kernel's
//! order ([`Slot`]: stream stretches coalesced as nbformat does, `display_data`,
//! `execute_result`, `error`) with full MIME bundles, stored up to [`MAX_STORED_BYTES`] and
//! applied the way a notebook shows them (`clear_output(wait)`, `update_display_data` by
//! `display_id`). The agent's view (`response.rs`: streams joined per name, the result, the
//! shown displays) and the history entry the notebook export writes (`Run::history_entry`)
//! are both renderings of it. Spec: "IOPub" in
//! <https://jupyter-client.readthedocs.io/en/latest/messaging.html#messages-on-the-iopub-pub-sub-channel>.
//!
//! Output that arrives after the run finished is still applied here and counted in
//! `late_output` (docs/semantics.md).

use serde_json::Value;

use super::spool::{self, SPILL_ALL_BYTES, SPILL_BYTES, SPILL_SHARE_BYTES, SpoolFile};
use super::stream::{self, StreamStore};
use crate::session::display::{error_info, output_item, plain_text, stored_bytes};
use crate::session::quirks::Quirks;
use crate::session::types::{ErrorInfo, OutputItem};
use crate::wire::Message;

pub use crate::config::MAX_STORED_BYTES;

/// Bytes counted against [`MAX_STORED_BYTES`] for each new slot (its bookkeeping), so a
/// flood of alternating one-byte writes to stdout and stderr stays bounded too.
const SLOT_COST: usize = 32;

/// One output of a run, in the kernel's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Bytes `[start, end)` of one stream's raw text: consecutive chunks of the same stream
    /// are one slot, as nbclient coalesces them into one `stream` output.
    Stream {
        stderr: bool,
        start: usize,
        end: usize,
    },
    /// A `display_data` or `execute_result`: index into [`RunOutput::displays`].
    Display(usize),
    /// Where the run's `error` came.
    Error,
}

/// A display output of the run and whether the agent's `outputs` show it (a text-only
/// `execute_result` is the run's `result` instead, as is IRkernel's value display).
#[derive(Debug, Clone)]
pub struct Display {
    pub item: OutputItem,
    pub shown: bool,
}

/// Everything a run's messages carried, in order.
#[derive(Debug, Default)]
pub struct RunOutput {
    /// Names the run's spool files (its run id).
    label: String,
    /// Where its streams spill; `None`: they stay in memory.
    spool: Option<&'static spool::SpoolDir>,
    stdout: StreamStore,
    stderr: StreamStore,
    /// The outputs in the kernel's order.
    slots: Vec<Slot>,
    /// Every display output, in order (the slots point here).
    displays: Vec<Display>,
    /// text/plain of the execute_result (or IRkernel's text display).
    pub result: Option<String>,
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
    /// Counts messages that changed the outputs (a live view redraws when it moves).
    changes: u64,
}

impl RunOutput {
    /// An empty output whose spool files (if it spills) are named after `label`.
    pub fn new(label: &str) -> RunOutput {
        Self::with_spool(label, spool::dir())
    }

    /// [`Self::new`] spilling to `spool` (`None`: never).
    pub fn with_spool(label: &str, spool: Option<&'static spool::SpoolDir>) -> RunOutput {
        RunOutput {
            label: label.to_string(),
            spool,
            ..RunOutput::default()
        }
    }

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
        if matches!(
            msg.msg_type(),
            "stream" | "execute_result" | "display_data" | "clear_output" | "error"
        ) {
            self.changes += 1;
        }
        match msg.msg_type() {
            "stream" => {
                let stderr = c["name"] == "stderr";
                match &msg.raw_text {
                    // A flood's text, unescaped a piece at a time where it is stored: the
                    // message is the only whole copy (see `wire::stream`).
                    Some(raw) => {
                        self.take_pending_clear();
                        self.spill_if_due(stderr, raw.max_len());
                        raw.for_each_piece(|piece| self.append_stream(stderr, piece, finished));
                    }
                    None => {
                        let text = c["text"].as_str().unwrap_or_default();
                        self.append_stream(stderr, text, finished);
                    }
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
                self.set_error(e);
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

    /// Append `text` to stream `stdout` (or `stderr`): what fits under the cap, cut at a
    /// character boundary, joined to the last slot when that is the same stream.
    pub fn append_stream(&mut self, stderr: bool, text: &str, finished: bool) {
        let mut kept = self.admit(text.len(), finished);
        while !text.is_char_boundary(kept) {
            kept -= 1;
        }
        let text = &text[..kept];
        if text.is_empty() {
            return;
        }
        self.take_pending_clear();
        self.spill_if_due(stderr, text.len());
        let buf = if stderr {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        let start = buf.raw_len();
        if let Err(e) = buf.append(text) {
            self.write_failed(e);
        }
        let end = start + text.len();
        match self.slots.last_mut() {
            Some(Slot::Stream {
                stderr: s, end: e, ..
            }) if *s == stderr && *e == start => *e = end,
            _ => {
                self.stored_bytes += SLOT_COST;
                self.slots.push(Slot::Stream { stderr, start, end });
            }
        }
    }

    /// Before `n` more bytes of one stream: if the run would then hold more than
    /// [`SPILL_BYTES`] of stream text in memory, or all runs together more than
    /// [`SPILL_ALL_BYTES`] and this stream more than [`SPILL_SHARE_BYTES`], move that stream to a spool file (see [`spool`]). Without a
    /// spool directory the text stays in memory.
    fn spill_if_due(&mut self, stderr: bool, n: usize) {
        let (this, other) = if stderr {
            (&mut self.stderr, &self.stdout)
        } else {
            (&mut self.stdout, &self.stderr)
        };
        let mine = this.mem_bytes() + n;
        let crowded = mine > SPILL_SHARE_BYTES && stream::in_memory() + n > SPILL_ALL_BYTES;
        if this.is_spilled() || (mine + other.mem_bytes() <= SPILL_BYTES && !crowded) {
            return;
        }
        let Some(dir) = self.spool else {
            return;
        };
        let name = format!(
            "{}.{}",
            if self.label.is_empty() {
                uuid::Uuid::new_v4().simple().to_string()
            } else {
                self.label.clone()
            },
            if stderr { "stderr" } else { "stdout" }
        );
        let spilled = SpoolFile::create(dir, &name).and_then(|f| this.spill(f));
        if let Err(e) = spilled {
            tracing::warn!(file = %name, "output stays in memory, the spool file failed: {e}");
        }
    }

    /// A spool write failed: what could not be written is gone; say so once.
    fn write_failed(&mut self, e: std::io::Error) {
        tracing::warn!(run = %self.label, "spooled output lost: {e}");
        if !self.dropped {
            self.dropped = true;
            self.dropped_notice = Some(format!(
                "Output could not be written to its spool file ({e}); the text shown and pageable ends where the write failed."
            ));
        }
    }

    /// The run finished: spool files close their descriptors (late output reopens them).
    pub fn seal(&mut self) {
        self.stdout.seal();
        self.stderr.seal();
    }

    fn set_error(&mut self, e: ErrorInfo) {
        self.error = Some(e);
        if !self.slots.contains(&Slot::Error) {
            self.slots.push(Slot::Error);
        }
    }

    fn apply_display(&mut self, msg: &Message, quirks: &Quirks, finished: bool) {
        let c = &msg.content;
        let item = output_item(msg.msg_type(), c);
        let size = stored_bytes(&item) + SLOT_COST;
        if self.admit(size, finished) < size {
            return;
        }
        self.take_pending_clear();
        let mut shown = true;
        if msg.msg_type() == "display_data" && quirks.display_is_result && item.image.is_none() {
            // IRkernel's way of returning a value.
            if let Some(text) = plain_text(&item) {
                self.result = Some(match self.result.take() {
                    Some(prev) => format!("{prev}\n{text}"),
                    None => text,
                });
                shown = false;
            }
        } else if msg.msg_type() == "execute_result" {
            if let Some(n) = c["execution_count"].as_i64() {
                self.execution_count = Some(n);
            }
            self.result = item.text.clone();
            shown = item.image.is_some() || item.mime_types.iter().any(|m| m != "text/plain");
        }
        if item.display_id.is_some() {
            // A display with an id already shown updates the earlier ones too, as nbclient
            // does, and is then shown itself.
            self.update_display_item(&item);
        }
        self.slots.push(Slot::Display(self.displays.len()));
        self.displays.push(Display { item, shown });
    }

    /// Apply an `update_display_data`: replace the data of the outputs that carry its
    /// `display_id` (each keeps its kind). Returns true when one did.
    pub fn update_display(&mut self, content: &Value) -> bool {
        let item = output_item("display_data", content);
        let updated = item.display_id.is_some() && self.update_display_item(&item);
        self.changes += u64::from(updated);
        updated
    }

    fn update_display_item(&mut self, item: &OutputItem) -> bool {
        let mut any = false;
        for d in self
            .displays
            .iter_mut()
            .filter(|d| d.item.display_id.is_some() && d.item.display_id == item.display_id)
        {
            d.item = OutputItem {
                kind: std::mem::take(&mut d.item.kind),
                ..item.clone()
            };
            any = true;
        }
        any
    }

    fn take_pending_clear(&mut self) {
        if std::mem::take(&mut self.pending_clear) {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.stdout.clear();
        self.stderr.clear();
        self.displays.clear();
        self.slots.retain(|s| *s == Slot::Error);
    }

    /// Apply the `execute_reply` content: its execution_count and, for status `error`, the
    /// error when no `error` message came. That error is the agent's (`error`, status), not an
    /// output: it takes no slot, so the notebook export holds only what came on iopub (as
    /// nbclient's does: ipykernel's `UsageError` for an unknown magic is a stderr line).
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
        if let Some(line) = self.stdout.find_line(prefix) {
            self.error = Some(ErrorInfo {
                ename: prefix.trim_end_matches([':', ' ']).to_string(),
                evalue: line[prefix.len()..].trim().to_string(),
                traceback: vec![line.to_string()],
            });
        }
    }

    /// One stream (`stdout` / `stderr`): its cleaned text, bounded or paged.
    pub fn stream(&mut self, stderr: bool) -> &mut StreamStore {
        if stderr {
            &mut self.stderr
        } else {
            &mut self.stdout
        }
    }

    /// The raw text of a [`Slot::Stream`]'s bytes, while its stream is in memory (`None`
    /// once it spilled).
    pub fn stream_slice(&self, stderr: bool, start: usize, end: usize) -> Option<&str> {
        let buf = if stderr { &self.stderr } else { &self.stdout };
        buf.raw_slice(start, end)
    }

    /// True when the stream went to a spool file.
    pub fn is_spilled(&self, stderr: bool) -> bool {
        if stderr {
            self.stderr.is_spilled()
        } else {
            self.stdout.is_spilled()
        }
    }

    /// The outputs in the kernel's order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Every display output, shown or not, in order.
    pub fn displays(&self) -> &[Display] {
        &self.displays
    }

    /// The display outputs the agent's `outputs` show, in order.
    pub fn outputs(&self) -> Vec<&OutputItem> {
        self.displays
            .iter()
            .filter(|d| d.shown)
            .map(|d| &d.item)
            .collect()
    }

    /// Bytes stored for this run (streams, texts and images).
    pub fn stored_bytes(&self) -> usize {
        self.stored_bytes
    }

    /// Counts the messages that changed the outputs so far (streams, displays, updates,
    /// clears, the error): unchanged, the outputs are as they were.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether output beyond the per-run cap was dropped.
    pub fn dropped(&self) -> bool {
        self.dropped
    }

    /// The last non-empty line of output (for progress messages).
    pub fn last_line(&mut self) -> Option<String> {
        self.stdout.last_line().or_else(|| self.stderr.last_line())
    }
}

#[cfg(test)]
mod tests;
