//! Making kernel text readable, the way a terminal would show it: carriage returns and
//! backspaces applied, cursor movement (what nested tqdm bars emit) applied by a terminal
//! emulator (the `vt100` crate), every remaining escape sequence removed; and bounding what one
//! response shows (head + tail). Lenient UTF-8 decoding happens in the wire layer.

use std::borrow::Cow;

/// Text with cursor movement up to this many lines goes through the terminal emulator;
/// longer text keeps its line structure and only gets `\r`/`\b` applied (the emulator's
/// grid costs 32 bytes per cell).
const EMULATED_MAX_LINES: usize = 1000;
/// Widest grid the emulator gets; longer lines wrap.
const EMULATED_MAX_COLS: usize = 400;

/// Stands in for a tab while control sequences are applied: both the escape stripper and the
/// terminal emulator turn a tab into cursor movement, and a tab in data (`!cat file.tsv`, whose
/// lines end `\r\n` under a pty) must reach the agent as a tab. A private-use character.
const TAB_STAND_IN: char = '\u{E009}';

/// Text as a terminal would leave it, without escape sequences: `\r\n` → `\n`; `\r` returns to
/// column 0 (later text overwrites), `\b` moves back one column, cursor up/down and erase-line
/// sequences are applied; all other escape sequences (CSI, OSC, DCS…) are removed. Every
/// other character, tab included, is kept. Plain text is returned as is, without copying.
pub fn clean_text(raw: &str) -> Cow<'_, str> {
    clean(raw, true)
}

/// [`clean_text`] one line at a time: cursor movement between lines is not applied (its
/// sequences are removed), so the text can be cleaned in pieces that end at a newline and
/// the pieces joined give the same text. Text of more than [`EMULATED_MAX_LINES`] lines is
/// cleaned this way by [`clean_text`] too; a run's spooled output always is.
pub fn clean_lines(raw: &str) -> Cow<'_, str> {
    clean(raw, false)
}

fn clean(raw: &str, emulate: bool) -> Cow<'_, str> {
    if !needs_cleaning(raw) {
        return Cow::Borrowed(raw);
    }
    if raw.contains('\t') {
        let guarded = raw.replace('\t', &TAB_STAND_IN.to_string());
        let cleaned = apply_control(&guarded, emulate).replace(TAB_STAND_IN, "\t");
        return Cow::Owned(cleaned);
    }
    Cow::Owned(apply_control(raw, emulate))
}

/// True if `raw` has ESC, CR, BS or a C1 CSI (U+009B, `C2 9B` in UTF-8): a byte search, since
/// this runs on every stream's whole text (tens of MB in a flood).
fn needs_cleaning(raw: &str) -> bool {
    let b = raw.as_bytes();
    memchr::memchr3(0x1b, b'\r', 0x08, b).is_some()
        || memchr::memmem::find(b, "\u{9b}".as_bytes()).is_some()
}

/// [`clean_text`] for text that has control characters or escapes; with `emulate`, text
/// with cursor motion goes through the terminal emulator.
fn apply_control(raw: &str, emulate_motion: bool) -> String {
    if emulate_motion
        && has_cursor_motion(raw)
        && let Some(text) = emulate(raw)
    {
        return text;
    }
    // Strip escapes between the control characters we interpret (the stripper drops `\r` and
    // `\b` itself), then apply them line by line.
    let mut interpreted = String::with_capacity(raw.len());
    for piece in raw.split_inclusive(['\r', '\u{8}', '\n']) {
        let (body, ctrl) = match piece.chars().last() {
            Some(c @ ('\r' | '\u{8}' | '\n')) => (&piece[..piece.len() - c.len_utf8()], Some(c)),
            _ => (piece, None),
        };
        interpreted.push_str(&strip_ansi_escapes::strip_str(body));
        if let Some(c) = ctrl {
            interpreted.push(c);
        }
    }
    let normalized = interpreted.replace("\r\n", "\n");
    if !normalized.contains(['\r', '\u{8}']) {
        return normalized;
    }
    let mut out = String::with_capacity(normalized.len());
    for (i, line) in normalized.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&overstrike(line));
    }
    out
}

/// True if `raw` has a CSI sequence that moves the cursor between lines or erases
/// (`A B E F H f J K d`), or a reverse index (`ESC M`).
fn has_cursor_motion(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == 0x1b) {
        let start = i + off + 1;
        match bytes.get(start) {
            Some(b'M') => return true,
            Some(b'[') => {
                let mut j = start + 1;
                while j < bytes.len()
                    && (bytes[j].is_ascii_digit() || bytes[j] == b';' || bytes[j] == b'?')
                {
                    j += 1;
                }
                if matches!(
                    bytes.get(j),
                    Some(b'A' | b'B' | b'E' | b'F' | b'H' | b'f' | b'J' | b'K' | b'd')
                ) {
                    return true;
                }
            }
            _ => {}
        }
        i = start;
    }
    false
}

/// Run `raw` through a terminal emulator sized to fit it; `None` when it is too long to.
fn emulate(raw: &str) -> Option<String> {
    let text = raw.replace("\r\n", "\n");
    let lines = text.matches('\n').count() + 1;
    if lines > EMULATED_MAX_LINES {
        return None;
    }
    let width = text
        .split('\n')
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let cols = width.clamp(80, EMULATED_MAX_COLS) as u16;
    let rows = (lines + 1) as u16;
    let mut parser = vt100::Parser::new(rows.try_into().ok()?, cols.try_into().ok()?, 0);
    // A terminal's line discipline turns `\n` into `\r\n`.
    parser.process(text.replace('\n', "\r\n").as_bytes());
    let mut out = parser.screen().contents();
    if text.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

/// One line with `\r` and `\b` applied.
fn overstrike(line: &str) -> String {
    let mut cells: Vec<char> = Vec::new();
    let mut col = 0usize;
    for ch in line.chars() {
        match ch {
            '\r' => col = 0,
            '\u{8}' => col = col.saturating_sub(1),
            c => {
                if col < cells.len() {
                    cells[col] = c;
                } else {
                    cells.push(c);
                }
                col += 1;
            }
        }
    }
    // A trailing `\r` then shorter text leaves the old tail, as a terminal would; a progress bar
    // that redraws fully overwrites it.
    cells.into_iter().collect()
}

/// One page of a stream's text: bytes `[offset, next_offset)` of the UTF-8 text, moved to
/// character boundaries; `text` is empty at the end.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct StreamPage {
    pub offset: usize,
    pub text: String,
    pub next_offset: usize,
    pub total_bytes: usize,
}

/// The page of `text` starting at byte `offset` (clamped, moved back to a character boundary)
/// with at most `limit` bytes (at least one character when any remain).
pub fn page(text: &str, offset: usize, limit: usize) -> StreamPage {
    let mut start = offset.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = start.saturating_add(limit).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end == start && start < text.len() {
        end = text[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
    }
    StreamPage {
        offset: start,
        text: text[start..end].to_string(),
        next_offset: end,
        total_bytes: text.len(),
    }
}

/// `text` if it fits in `limit` bytes; else its head and tail (split on char boundaries) around a
/// marker, plus the number of bytes left out.
pub fn head_tail(text: &str, limit: usize) -> (String, Option<usize>) {
    head_tail_with(text, limit, omitted_marker)
}

/// What stands between the head and the tail of a bounded text.
pub fn omitted_marker(omitted: usize) -> String {
    format!("\n[… {omitted} bytes omitted …]\n")
}

/// Like [`head_tail`], with the marker between head and tail made by `marker` from the
/// number of bytes left out. Head and tail together take at most `limit` bytes; the marker
/// comes on top.
pub fn head_tail_with(
    text: &str,
    limit: usize,
    marker: impl FnOnce(usize) -> String,
) -> (String, Option<usize>) {
    if text.len() <= limit {
        return (text.to_string(), None);
    }
    let half = limit / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = tail_start - head_end;
    let shown = format!(
        "{}{}{}",
        &text[..head_end],
        marker(omitted),
        &text[tail_start..]
    );
    (shown, Some(omitted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_survive_carriage_returns_colours_and_cursor_motion() {
        assert_eq!(clean_text("a\tb\tc\r"), "a\tb\tc");
        assert_eq!(
            clean_text("real\t0m0.003s\r\nuser\t0m0.001s\r\n"),
            "real\t0m0.003s\nuser\t0m0.001s\n"
        );
        assert_eq!(clean_text("\x1b[31mx\ty\x1b[0m\r\n"), "x\ty\n");
        assert_eq!(
            clean_text("col1\tcol2\n\x1b[1A\x1b[2Knew\tline\n"),
            "new\tline\n"
        );
    }

    #[test]
    fn colour_codes_and_osc_titles_are_removed() {
        let s = clean_text("\x1b[31mred\x1b[0m \x1b]0;title\x07done");
        assert_eq!(s, "red done");
        assert!(!s.contains('\x1b'));
    }

    #[test]
    fn carriage_return_keeps_the_final_frame_of_a_progress_line() {
        assert_eq!(clean_text("10%\r50%\r100%\nnext"), "100%\nnext");
    }

    #[test]
    fn crlf_is_a_plain_newline() {
        assert_eq!(clean_text("a\r\nb\r\n"), "a\nb\n");
    }

    #[test]
    fn backspace_erases_the_previous_character() {
        assert_eq!(clean_text("abc\u{8}\u{8}XY"), "aXY");
    }

    #[test]
    fn nested_progress_bars_collapse_to_their_final_frames() {
        // What tqdm prints for two nested bars: redraws with \r, moves up with ESC[A.
        let mut raw = String::new();
        for outer in 0..3 {
            for inner in 0..5 {
                raw.push_str(&format!("\router {outer}/3\n\rinner {inner}/5\x1b[A"));
            }
        }
        raw.push_str("\router 3/3\n\rinner 5/5\n");
        let s = clean_text(&raw);
        assert_eq!(s, "outer 3/3\ninner 5/5\n");
    }

    #[test]
    fn erase_line_sequences_are_applied_not_printed() {
        let s = clean_text("loading...\r\x1b[2Kdone\n");
        assert_eq!(s, "done\n");
    }

    #[test]
    fn pages_cover_the_text_without_splitting_characters() {
        let text = "aé".repeat(10);
        let mut offset = 0;
        let mut joined = String::new();
        loop {
            let p = page(&text, offset, 4);
            if p.text.is_empty() {
                break;
            }
            joined.push_str(&p.text);
            offset = p.next_offset;
        }
        assert_eq!(joined, text);
        assert_eq!(
            page(&text, 2, 1).text,
            "é",
            "a page never returns nothing before the end"
        );
    }

    #[test]
    fn plain_text_is_not_copied() {
        assert!(matches!(clean_text("hello\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn head_tail_keeps_both_ends_and_counts_what_it_left_out() {
        let text = "a".repeat(100) + &"b".repeat(100);
        let (shown, omitted) = head_tail(&text, 50);
        assert!(shown.starts_with(&"a".repeat(25)));
        assert!(shown.ends_with(&"b".repeat(25)));
        assert_eq!(omitted, Some(150));
    }

    #[test]
    fn head_tail_never_splits_a_multibyte_character() {
        let text = "é".repeat(100);
        let (shown, omitted) = head_tail(&text, 51);
        assert!(omitted.is_some());
        assert!(shown.contains("bytes omitted"));
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Text rich in what the cleaner interprets: escapes, CR, BS, tabs, cursor moves, UTF-8.
    fn terminal_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[ -~]{0,20}",
            Just("\r".to_string()),
            Just("\u{8}".to_string()),
            Just("\t".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just("\x1b[".to_string()),
            Just("\x1b[2K".to_string()),
            Just("\x1b[1A".to_string()),
            Just("\x1b[31m".to_string()),
            Just("\x1b]0;title\x07".to_string()),
            Just("\u{9b}".to_string()),
            Just("é漢\u{fffd}".to_string()),
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn fuzz_cleaning_never_panics_and_leaves_no_escape(text in terminal_text()) {
            let cleaned = clean_text(&text);
            prop_assert!(!cleaned.contains('\x1b'), "{cleaned:?} from {text:?}");
        }

        #[test]
        fn fuzz_head_tail_and_pages_stay_on_character_boundaries(
            text in terminal_text(),
            limit in 0usize..64,
            offset in 0usize..200,
        ) {
            let (shown, omitted) = head_tail(&text, limit);
            if omitted.is_none() {
                prop_assert_eq!(&shown, &text);
            }
            let p = page(&text, offset, limit.max(1));
            prop_assert!(p.next_offset <= text.len());
            prop_assert!(text.is_char_boundary(p.offset) && text.is_char_boundary(p.next_offset));
        }
    }
}
