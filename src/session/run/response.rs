//! What one response shows of a run: every part bounded (docs/semantics.md), the rest pageable.
//!
//! Each stream, the `result` and the traceback show at most [`Bounds::part_bytes`] (head and
//! tail, with the omitted byte count in `truncated`); the error value and the input prompt
//! are bounded the same way; display outputs are bounded by bytes, not by count: each text to
//! `DISPLAY_TEXT_BYTES`, and all of them to [`Bounds::display_bytes`] (beyond it the first and
//! the last ones are shown, each keeping its `index`). So one response stays near 1 MiB of
//! text however large the output, and [`page_part`] pages the full text.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::Run;
use crate::session::text::{StreamPage, clean_text, head_tail, page};
use crate::session::types::{ErrorInfo, ExecutionResult, Prompt, StreamTruncation};

/// How much of a run one response shows.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Bytes per stream, result, traceback, error value and prompt (head + tail).
    pub part_bytes: usize,
    /// Bytes of display outputs shown, in all: each output's text and MIME type names plus
    /// [`OUTPUT_OVERHEAD`] (images count only that: they have their own budget, in
    /// `mcp/render.rs`).
    pub display_bytes: usize,
}

/// What one shown output costs beyond its text: its JSON fields.
pub const OUTPUT_OVERHEAD: usize = 64;

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            part_bytes: 20_000,
            display_bytes: 256 * 1024,
        }
    }
}

/// The parts of a run that can be paged, by the name `get_execution` takes (its `stream`).
/// (The variants have no doc comments: documented variants would turn the parameter's
/// `enum` into a longer `oneOf`.)
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Part {
    Stdout,
    Stderr,
    Result,
    Traceback,
}

impl Run {
    /// The full text of a part that is not a stream: the result's cleaned text, or the
    /// traceback's lines joined with newlines. (Streams may be spooled: see [`page_part`].)
    fn part_text(&self, part: Part) -> std::borrow::Cow<'_, str> {
        match part {
            Part::Stdout | Part::Stderr => "".into(),
            Part::Result => match &self.output.result {
                Some(r) => clean_text(r),
                None => "".into(),
            },
            Part::Traceback => match &self.output.error {
                Some(e) => e.traceback.join("\n").into(),
                None => "".into(),
            },
        }
    }

    /// The record as the contract's [`ExecutionResult`], every part bounded by `b`.
    pub fn snapshot(&mut self, b: &Bounds) -> ExecutionResult {
        let mut truncated = BTreeMap::new();
        let mut note = |name: &str, total_bytes: usize, omitted: Option<usize>| {
            if let Some(omitted_bytes) = omitted {
                truncated.insert(
                    name.to_string(),
                    StreamTruncation {
                        total_bytes,
                        omitted_bytes,
                        artifact: None,
                    },
                );
            }
        };
        let mut stream = |stderr: bool, note: &mut dyn FnMut(&str, usize, Option<usize>)| {
            let s = self.output.stream(stderr);
            let (shown, omitted) = s.head_tail(b.part_bytes);
            note(if stderr { "stderr" } else { "stdout" }, s.len(), omitted);
            shown
        };
        let stdout = stream(false, &mut note);
        let stderr = stream(true, &mut note);
        let mut bounded = |name: &str, text: &str| {
            let (shown, omitted) = head_tail(text, b.part_bytes);
            note(name, text.len(), omitted);
            shown
        };
        let result = self
            .output
            .result
            .is_some()
            .then(|| bounded("result", &self.part_text(Part::Result)));
        let error = self.output.error.as_ref().map(|e| ErrorInfo {
            ename: head_tail(&e.ename, 200).0,
            evalue: head_tail(&e.evalue, b.part_bytes).0,
            traceback: Vec::new(),
        });
        let error = error.map(|mut e| {
            let joined = self.part_text(Part::Traceback).into_owned();
            e.traceback = bounded("traceback", &joined)
                .split('\n')
                .map(String::from)
                .collect();
            e
        });
        let mut notices = self.notices.clone();
        let outputs = self.shown_outputs(b, &mut notices);
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
            run_id: self.id.to_string(),
            session_id: self.session_id.clone(),
            generation: self.generation,
            state_reset: self.state_reset,
            status: self.status(),
            execution_count: self.output.execution_count,
            stdout,
            stderr,
            result,
            outputs,
            error,
            prompt: self.input.as_ref().map(|(_, p)| Prompt {
                text: head_tail(&p.text, b.part_bytes).0,
                password: p.password,
            }),
            truncated: (!truncated.is_empty()).then_some(truncated),
            late_output: self.output.late_output,
            queued_ms,
            elapsed_ms,
            notices,
            queued_date: Some(self.queued_date),
            finished_date: self.finished_date,
        }
    }

    /// The display outputs, texts bounded, each with its index; when they cost more than
    /// [`Bounds::display_bytes`], the first and the last ones within half of it each.
    fn shown_outputs(
        &self,
        b: &Bounds,
        notices: &mut Vec<String>,
    ) -> Vec<crate::session::types::OutputItem> {
        let all: Vec<crate::session::types::OutputItem> = self
            .output
            .outputs()
            .into_iter()
            .enumerate()
            .map(|(index, o)| {
                let mut o = o.clone();
                o.index = index;
                if let Some(t) = &o.text {
                    o.text = Some(crate::session::display::bounded(t));
                }
                o
            })
            .collect();
        let cost = |o: &crate::session::types::OutputItem| {
            OUTPUT_OVERHEAD
                + o.text.as_ref().map_or(0, String::len)
                + o.mime_types.iter().map(String::len).sum::<usize>()
        };
        let total: usize = all.iter().map(cost).sum();
        if total <= b.display_bytes {
            return all;
        }
        let half = b.display_bytes / 2;
        let fits = |it: &mut dyn Iterator<Item = &crate::session::types::OutputItem>| {
            let mut used = 0;
            it.take_while(|o| {
                used += cost(o);
                used <= half
            })
            .count()
        };
        let head = fits(&mut all.iter());
        let tail = fits(&mut all.iter().rev()).min(all.len() - head);
        let omitted = all.len() - head - tail;
        notices.push(format!(
            "{omitted} of this run's {} display outputs (indices {head} to {}) are not shown: the displays come to {total} bytes, over the {} shown in one response. \
             The notebook export (export_history) keeps them all.",
            all.len(),
            head + omitted - 1,
            b.display_bytes
        ));
        let mut shown = all;
        shown.drain(head..head + omitted);
        shown
    }
}

/// A page of one part of `run`: bytes `[offset, offset + limit)` of its full text (a
/// stream's read from its spool file when it spilled).
pub fn page_part(run: &mut Run, part: Part, offset: usize, limit: usize) -> StreamPage {
    match part {
        Part::Stdout => run.output.stream(false).page(offset, limit),
        Part::Stderr => run.output.stream(true).page(offset, limit),
        _ => page(&run.part_text(part), offset, limit),
    }
}
