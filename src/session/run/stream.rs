//! One stream (stdout or stderr) of a run: its raw text in memory, or — once the run spilled
//! it (see [`super::spool`]) — its cleaned text in a spool file plus the raw start of the
//! line still being written. Everything a response or a page reads of a stream comes through
//! here, so callers need not know where the text is.
//!
//! In memory the raw text is kept and cleaned as a whole when read (cached until it grows),
//! as `clean_text` describes. Spilled, text is cleaned a line at a time as it arrives
//! ([`clean_lines`]: the same result as cleaning the whole text whenever it has more than a
//! thousand lines, which an 8 MiB output has unless its lines are kilobytes long), and only
//! the unfinished last line stays raw in memory, bounded by [`PENDING_MAX`]: a longer line
//! is cleaned in pieces at its last carriage return, or where it stands.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::spool::SpoolFile;
use crate::session::text::{StreamPage, clean_lines, clean_text, omitted_marker};

/// The unfinished last line a spilled stream keeps raw in memory, at most (bytes).
pub const PENDING_MAX: usize = 1024 * 1024;

/// Complete lines are cleaned and written in pieces of about this size.
const WRITE_PIECE: usize = 1024 * 1024;

/// Stream text held in memory by every run of the process (bytes; see [`in_memory`]).
static IN_MEMORY: AtomicUsize = AtomicUsize::new(0);

/// Bytes of stream text every run of this process holds in memory now.
pub fn in_memory() -> usize {
    IN_MEMORY.load(Ordering::Relaxed)
}

/// One stream's text.
#[derive(Debug, Default)]
pub struct StreamStore {
    /// Raw bytes appended since the last clear: the coordinates of the run's stream slots.
    raw_len: usize,
    store: Store,
    /// What this store has added to [`IN_MEMORY`].
    counted: usize,
}

impl Drop for StreamStore {
    fn drop(&mut self) {
        IN_MEMORY.fetch_sub(self.counted, Ordering::Relaxed);
    }
}

#[derive(Debug)]
enum Store {
    Memory {
        raw: String,
        /// Cleaned text keyed by the raw length it was computed from (`None` text: the raw
        /// text needed no cleaning).
        clean: Option<(usize, Option<String>)>,
    },
    Spilled(Spilled),
}

impl Default for Store {
    fn default() -> Store {
        Store::Memory {
            raw: String::new(),
            clean: None,
        }
    }
}

#[derive(Debug)]
struct Spilled {
    /// Cleaned text of every complete line (and of pieces of over-long lines).
    file: SpoolFile,
    /// Raw text after the last newline written.
    pending: String,
}

impl StreamStore {
    /// Raw bytes appended since the last clear.
    pub fn raw_len(&self) -> usize {
        self.raw_len
    }

    /// Bytes of this stream held in memory.
    pub fn mem_bytes(&self) -> usize {
        match &self.store {
            Store::Memory { raw, clean } => {
                raw.len()
                    + clean
                        .as_ref()
                        .and_then(|c| c.1.as_ref())
                        .map_or(0, String::len)
            }
            Store::Spilled(s) => s.pending.len(),
        }
    }

    pub fn is_spilled(&self) -> bool {
        matches!(self.store, Store::Spilled(_))
    }

    /// The spool file, when spilled.
    #[cfg(test)]
    pub fn spool_path(&self) -> Option<&std::path::Path> {
        match &self.store {
            Store::Spilled(s) => Some(s.file.path()),
            Store::Memory { .. } => None,
        }
    }

    /// Bring [`IN_MEMORY`] up to date with what this store holds now.
    fn recount(&mut self) {
        let now = self.mem_bytes();
        if now >= self.counted {
            IN_MEMORY.fetch_add(now - self.counted, Ordering::Relaxed);
        } else {
            IN_MEMORY.fetch_sub(self.counted - now, Ordering::Relaxed);
        }
        self.counted = now;
    }

    /// Append raw `text`. Errors: writing the spool file (what was not written is lost).
    pub fn append(&mut self, text: &str) -> std::io::Result<()> {
        self.raw_len += text.len();
        let r = match &mut self.store {
            Store::Memory { raw, .. } => {
                raw.push_str(text);
                Ok(())
            }
            Store::Spilled(s) => s.append(text),
        };
        self.recount();
        r
    }

    /// Move the text to `file` from now on: the complete lines so far are cleaned into it and
    /// the memory they took is given back. Errors: writing the file (the text stays in memory).
    pub fn spill(&mut self, file: SpoolFile) -> std::io::Result<()> {
        let Store::Memory { raw, .. } = &mut self.store else {
            return Ok(());
        };
        let raw = std::mem::take(raw);
        let mut s = Spilled {
            file,
            pending: String::new(),
        };
        if let Err(e) = s.append(&raw) {
            self.store = Store::Memory { raw, clean: None };
            return Err(e);
        }
        self.store = Store::Spilled(s);
        self.recount();
        Ok(())
    }

    /// Forget the text (`clear_output`); a spool file is removed.
    pub fn clear(&mut self) {
        self.raw_len = 0;
        self.store = Store::default();
        self.recount();
    }

    /// Close the spool file's descriptor (the run finished); reads and late output reopen it.
    pub fn seal(&mut self) {
        if let Store::Spilled(s) = &mut self.store {
            s.file.close();
        }
    }

    /// The raw text of bytes `[start, end)`, while in memory (`None` once spilled).
    pub fn raw_slice(&self, start: usize, end: usize) -> Option<&str> {
        match &self.store {
            Store::Memory { raw, .. } => Some(raw.get(start..end).unwrap_or_default()),
            Store::Spilled(_) => None,
        }
    }

    #[cfg(test)]
    /// The whole cleaned text, read into memory (for tests and small streams only: every
    /// response and page is bounded, see [`Self::head_tail`] and [`Self::page`]).
    pub fn full_text(&mut self) -> String {
        let mut v = self.view();
        let len = v.len();
        v.read(0, len)
    }

    /// Length of the cleaned text (bytes).
    pub fn len(&mut self) -> usize {
        self.view().len()
    }

    /// The cleaned text if it fits in `limit` bytes; else its head and tail around a marker
    /// (as [`crate::session::text::head_tail`]), and the number of bytes left out.
    pub fn head_tail(&mut self, limit: usize) -> (String, Option<usize>) {
        let mut v = self.view();
        let len = v.len();
        if len <= limit {
            return (v.read(0, len), None);
        }
        let half = limit / 2;
        let head_end = v.floor_boundary(half);
        let tail_start = v.ceil_boundary(len - half);
        let omitted = tail_start - head_end;
        let shown = format!(
            "{}{}{}",
            v.read(0, head_end),
            omitted_marker(omitted),
            v.read(tail_start, len)
        );
        (shown, Some(omitted))
    }

    /// The page of the cleaned text at byte `offset` with at most `limit` bytes (see
    /// [`crate::session::text::page`]).
    pub fn page(&mut self, offset: usize, limit: usize) -> StreamPage {
        let mut v = self.view();
        let len = v.len();
        let start = v.floor_boundary(offset.min(len));
        let mut end = v.floor_boundary(start.saturating_add(limit).min(len));
        if end == start && start < len {
            end = v.ceil_boundary(start + 1);
        }
        StreamPage {
            offset: start,
            text: v.read(start, end),
            next_offset: end,
            total_bytes: len,
        }
    }

    /// The last non-empty cleaned line among the last 4 KiB, at most 200 characters.
    pub fn last_line(&mut self) -> Option<String> {
        let last = |text: &str| {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.chars().take(200).collect::<String>())
        };
        match &self.store {
            Store::Memory { raw, .. } => {
                let start = ceil_char(raw, raw.len().saturating_sub(4096));
                last(&clean_text(&raw[start..]))
            }
            Store::Spilled(_) => {
                let mut v = self.view();
                let len = v.len();
                let start = v.ceil_boundary(len.saturating_sub(4096));
                last(&v.read(start, len))
            }
        }
    }

    /// The first cleaned line that starts with `prefix`.
    pub fn find_line(&mut self, prefix: &str) -> Option<String> {
        let found = |text: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .map(str::to_string)
        };
        if !self.is_spilled() {
            return found(&self.view().tail);
        }
        match &mut self.store {
            Store::Memory { .. } => None,
            Store::Spilled(s) => {
                // Line by line through the file, a piece at a time.
                let mut carry = String::new();
                let mut at = 0;
                while at < s.file.len() {
                    let bytes = s.file.read(at, at + WRITE_PIECE).ok()?;
                    at += bytes.len();
                    carry.push_str(&String::from_utf8_lossy(&bytes));
                    let cut = carry.rfind('\n').map_or(0, |i| i + 1);
                    if let Some(l) = found(&carry[..cut]) {
                        return Some(l);
                    }
                    carry.drain(..cut);
                }
                carry.push_str(&clean_lines(&s.pending));
                found(&carry)
            }
        }
    }

    fn view(&mut self) -> View<'_> {
        if let Store::Memory { raw, clean } = &mut self.store
            && clean.as_ref().map(|c| c.0) != Some(raw.len())
        {
            let cleaned = match clean_text(raw) {
                Cow::Borrowed(_) => None,
                Cow::Owned(s) => Some(s),
            };
            *clean = Some((raw.len(), cleaned));
            self.recount();
        }
        match &mut self.store {
            Store::Memory { raw, clean } => {
                let text = match clean {
                    Some((_, Some(text))) => text.as_str(),
                    _ => raw.as_str(),
                };
                View {
                    file: None,
                    tail: Cow::Borrowed(text),
                }
            }
            Store::Spilled(s) => View {
                file: Some(&mut s.file),
                tail: clean_lines(&s.pending),
            },
        }
    }
}

impl Spilled {
    /// Clean and write the complete lines of `pending + text`; keep the rest raw.
    fn append(&mut self, text: &str) -> std::io::Result<()> {
        let Some(last_nl) = text.rfind('\n') else {
            self.pending.push_str(text);
            return self.bound_pending();
        };
        let (lines, rest) = text.split_at(last_nl + 1);
        let mut lines = lines;
        if !self.pending.is_empty() {
            // Finish the pending line first, then the rest straight from `text`.
            let first_nl = lines.find('\n').map_or(lines.len(), |i| i + 1);
            self.pending.push_str(&lines[..first_nl]);
            let line = std::mem::take(&mut self.pending);
            self.file.append(&clean_lines(&line))?;
            lines = &lines[first_nl..];
        }
        while !lines.is_empty() {
            let cut = piece_end(lines, WRITE_PIECE);
            self.file.append(&clean_lines(&lines[..cut]))?;
            lines = &lines[cut..];
        }
        self.pending.push_str(rest);
        self.bound_pending()
    }

    /// Keep the unfinished line under [`PENDING_MAX`]: clean what comes before its last
    /// carriage return (later text overwrites from the line's start, so that is all of it
    /// that can still change), or, with none, write it out as it stands.
    fn bound_pending(&mut self) -> std::io::Result<()> {
        if self.pending.len() <= PENDING_MAX {
            return Ok(());
        }
        if let Some(cr) = self.pending.rfind('\r').filter(|&i| i > 0) {
            let cleaned = clean_lines(&self.pending[..cr]).into_owned();
            let rest = self.pending[cr..].to_string();
            self.pending = cleaned + &rest;
        }
        if self.pending.len() > PENDING_MAX {
            let line = std::mem::take(&mut self.pending);
            self.file.append(&clean_lines(&line))?;
        }
        Ok(())
    }
}

/// The end of the first piece of `lines` (which ends with a newline): after the last
/// newline within `size` bytes, or after the first newline if there is none.
fn piece_end(lines: &str, size: usize) -> usize {
    if lines.len() <= size {
        return lines.len();
    }
    let mut limit = size;
    while !lines.is_char_boundary(limit) {
        limit -= 1;
    }
    match lines[..limit].rfind('\n') {
        Some(i) => i + 1,
        None => lines.find('\n').map_or(lines.len(), |i| i + 1),
    }
}

/// `i` moved forward to a character boundary of `s`.
fn ceil_char(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A stream's cleaned text as one sequence of bytes: the spool file's (if any), then `tail`.
struct View<'a> {
    file: Option<&'a mut SpoolFile>,
    tail: Cow<'a, str>,
}

impl View<'_> {
    fn file_len(&self) -> usize {
        self.file.as_ref().map_or(0, |f| f.len())
    }

    fn len(&self) -> usize {
        self.file_len() + self.tail.len()
    }

    /// Bytes `[start, end)` as text (both on character boundaries; a read error gives what
    /// could be read, logged).
    fn read(&mut self, start: usize, end: usize) -> String {
        let flen = self.file_len();
        let mut out = String::new();
        if start < flen
            && let Some(f) = self.file.as_mut()
        {
            match f.read(start, end.min(flen)) {
                Ok(bytes) => {
                    out = String::from_utf8(bytes)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
                }
                Err(e) => tracing::warn!(file = %f.path().display(), "reading spooled output: {e}"),
            }
        }
        if end > flen {
            let (a, b) = (start.saturating_sub(flen), end - flen);
            out.push_str(self.tail.get(a..b).unwrap_or_default());
        }
        out
    }

    /// The byte at `i` (< len).
    fn byte(&mut self, i: usize) -> u8 {
        let flen = self.file_len();
        if i >= flen {
            return self.tail.as_bytes().get(i - flen).copied().unwrap_or(0);
        }
        self.file
            .as_mut()
            .and_then(|f| f.read(i, i + 1).ok())
            .and_then(|b| b.first().copied())
            .unwrap_or(0)
    }

    fn is_boundary(&mut self, i: usize) -> bool {
        i == 0 || i >= self.len() || (self.byte(i) & 0xC0) != 0x80
    }

    fn floor_boundary(&mut self, mut i: usize) -> usize {
        while !self.is_boundary(i) {
            i -= 1;
        }
        i
    }

    fn ceil_boundary(&mut self, mut i: usize) -> usize {
        while !self.is_boundary(i) {
            i += 1;
        }
        i
    }
}

#[cfg(test)]
mod tests;
