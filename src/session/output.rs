//! Making kernel text readable: lenient decoding is done by the wire layer; here we apply
//! carriage returns and backspaces per line and remove every ANSI escape sequence, and bound
//! what one response shows (head + tail).

/// Text as a terminal would leave it, without escape sequences: `\r\n` → `\n`; within a line,
/// `\r` returns to column 0 (later text overwrites), `\b` deletes the previous character; then
/// all escape sequences (CSI, OSC, …) are removed.
pub fn clean_text(raw: &str) -> String {
    if !raw.contains(['\x1b', '\r', '\u{8}', '\u{9b}']) {
        return raw.to_string();
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

/// `text` if it fits in `limit` bytes; else its head and tail (split on char boundaries) around a
/// marker, plus the number of bytes left out.
pub fn head_tail(text: &str, limit: usize) -> (String, Option<usize>) {
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
        "{}\n[… {omitted} bytes omitted; page through them with get_execution(run_id, stream, offset, limit) …]\n{}",
        &text[..head_end],
        &text[tail_start..]
    );
    (shown, Some(omitted))
}

#[cfg(test)]
mod tests {
    use super::*;

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
