//! A `stream` content frame taken in pieces as it comes off the socket (docs/performance.md),
//! so a flood's frame of tens of MB is never whole in memory: the reader writes the frame's
//! bytes to a store (an unnamed file) as they come and feeds them to a [`ContentScanner`],
//! which follows the JSON as it passes, keeps the small fields and notes where `text` lies in
//! the store. The text is checked piece by piece exactly as [`super::stream`] checks a frame in
//! memory (escapes, surrogate pairs, UTF-8, control characters), so a scan that succeeds gives
//! what serde_json would; anything else (a value that is not a string, a second `text`, a small
//! field over [`SMALL_FIELD_BYTES`]) ends in `None` and the caller parses the whole frame the
//! general way.
//!
//! The one rule both directions share is [`safe_cut`]: where a piece of escaped text may be
//! cut so that each side unescapes on its own (never inside an escape, between the two
//! halves of a surrogate pair, or inside a UTF-8 character).

use serde_json::{Map, Value};

use super::escape::{hex4, unescape, unescaped};

/// Where the bytes of a content frame read in pieces were put (an unnamed file).
pub trait RawStore: Send + Sync {
    /// Read into `buf` from `offset`, like `pread(2)`: the count read, 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
}

impl RawStore for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

/// A field other than `text` longer than this makes the scan give up.
pub const SMALL_FIELD_BYTES: usize = 64 * 1024;

/// The longest escape: a surrogate pair, `\uD83D\uDE00`.
const LONGEST_ESCAPE: usize = 12;

/// Where `text`'s escaped bytes lie in the frame: `[start, end)`, and whether they hold any
/// escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextSpan {
    pub start: u64,
    pub end: u64,
    pub escaped: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    BeforeKey { first: bool },
    Key,
    Colon,
    BeforeValue,
    Value,
    Text,
    AfterValue,
    End,
    Failed,
}

/// Follows a flat JSON object of string values fed in pieces (see the module docs).
#[derive(Debug)]
pub struct ContentScanner {
    state: State,
    /// Bytes fed before the current piece.
    offset: u64,
    map: Map<String, Value>,
    /// The key whose value comes next.
    key: String,
    /// A small literal's raw bytes (a key or a value other than `text`).
    literal: Vec<u8>,
    /// A backslash ended the last piece: the next byte is escaped.
    escape_pending: bool,
    /// Text bytes not yet checked: the tail a later piece completes.
    unchecked: Vec<u8>,
    text: Option<TextSpan>,
}

impl Default for ContentScanner {
    fn default() -> ContentScanner {
        ContentScanner {
            state: State::Start,
            offset: 0,
            map: Map::new(),
            key: String::new(),
            literal: Vec::new(),
            escape_pending: false,
            unchecked: Vec::new(),
            text: None,
        }
    }
}

impl ContentScanner {
    /// Follow the next bytes of the frame.
    pub fn feed(&mut self, piece: &[u8]) {
        let mut i = 0;
        while i < piece.len() && self.state != State::Failed {
            let c = piece[i];
            let ws = matches!(c, b' ' | b'\t' | b'\n' | b'\r');
            self.state = match self.state {
                State::Key | State::Value | State::Text => {
                    let (len, closed) = literal_end(&piece[i..], &mut self.escape_pending);
                    let at = self.offset + i as u64;
                    let next = self.literal_piece(&piece[i..i + len], at, closed);
                    i += len + usize::from(closed);
                    self.state = next;
                    continue;
                }
                _ if ws => self.state,
                State::Start if c == b'{' => State::BeforeKey { first: true },
                State::BeforeKey { first: true } if c == b'}' => State::End,
                State::BeforeKey { .. } if c == b'"' => State::Key,
                State::Colon if c == b':' => State::BeforeValue,
                State::BeforeValue if c == b'"' => {
                    if self.key == "text" {
                        if self.text.is_some() {
                            State::Failed
                        } else {
                            let start = self.offset + i as u64 + 1;
                            self.text = Some(TextSpan {
                                start,
                                end: start,
                                escaped: false,
                            });
                            State::Text
                        }
                    } else {
                        State::Value
                    }
                }
                State::AfterValue if c == b',' => State::BeforeKey { first: false },
                State::AfterValue if c == b'}' => State::End,
                _ => State::Failed,
            };
            i += 1;
        }
        self.offset += piece.len() as u64;
    }

    /// The object's fields other than `text`, and where `text` lies; `None` when the frame
    /// was not a flat object of valid string values.
    pub fn finish(self) -> Option<(Map<String, Value>, Option<TextSpan>)> {
        (self.state == State::End).then_some((self.map, self.text))
    }

    /// Take `bytes` of the literal being read (`at` is their offset in the frame); `closed`
    /// when its closing quote follows them. Returns the next state.
    fn literal_piece(&mut self, bytes: &[u8], at: u64, closed: bool) -> State {
        if self.state == State::Text {
            let span = self.text.as_mut().expect("a text span while in the text");
            span.end = at + bytes.len() as u64;
            span.escaped |= memchr::memchr(b'\\', bytes).is_some();
            self.unchecked.extend_from_slice(bytes);
            let cut = if closed {
                self.unchecked.len()
            } else {
                safe_cut(&self.unchecked)
            };
            if !is_valid_text(&self.unchecked[..cut]) {
                return State::Failed;
            }
            self.unchecked.drain(..cut);
            // What a valid piece leaves is at most a partial escape or character.
            if self.unchecked.len() > 2 * LONGEST_ESCAPE {
                return State::Failed;
            }
            return if closed {
                State::AfterValue
            } else {
                State::Text
            };
        }
        if self.literal.len() + bytes.len() > SMALL_FIELD_BYTES {
            return State::Failed;
        }
        self.literal.extend_from_slice(bytes);
        if !closed {
            return self.state;
        }
        let Some(s) = decode_literal(&self.literal) else {
            return State::Failed;
        };
        self.literal.clear();
        if self.state == State::Key {
            self.key = s;
            State::Colon
        } else {
            self.map
                .insert(std::mem::take(&mut self.key), Value::String(s));
            State::AfterValue
        }
    }
}

/// How many of `bytes` belong to the string literal being read, and whether its closing
/// quote comes next. `escape_pending` carries a backslash that ended the previous piece.
fn literal_end(bytes: &[u8], escape_pending: &mut bool) -> (usize, bool) {
    let mut k = 0;
    if *escape_pending {
        *escape_pending = false;
        k = 1;
    }
    while k < bytes.len() {
        let Some(off) = memchr::memchr2(b'"', b'\\', &bytes[k..]) else {
            break;
        };
        let at = k + off;
        if bytes[at] == b'"' {
            return (at, true);
        }
        if at + 1 == bytes.len() {
            *escape_pending = true;
        }
        k = at + 2;
    }
    (bytes.len(), false)
}

/// A literal's body is valid JSON text: no raw control characters, UTF-8, valid escapes.
fn is_valid_text(bytes: &[u8]) -> bool {
    if bytes.iter().any(|&c| c < 0x20) {
        return false;
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => unescape(s, &mut |_| {}).is_some(),
        Err(_) => false,
    }
}

/// A small literal's body unescaped; `None` when invalid.
fn decode_literal(bytes: &[u8]) -> Option<String> {
    if bytes.iter().any(|&c| c < 0x20) {
        return None;
    }
    unescaped(std::str::from_utf8(bytes).ok()?)
}

/// The longest prefix of escaped text `data` (which starts on a boundary) that ends on a
/// boundary too: before an escape that may be incomplete (with the high surrogate it may
/// pair with) and before a UTF-8 character that may be incomplete. What follows the cut is
/// at most [`LONGEST_ESCAPE`] bytes.
pub fn safe_cut(data: &[u8]) -> usize {
    let tail = data.len().saturating_sub(LONGEST_ESCAPE);
    let mut cut = data.len();
    let mut previous: Option<usize> = None;
    let mut k = 0;
    while let Some(off) = memchr::memchr(b'\\', data.get(k..).unwrap_or_default()) {
        let at = k + off;
        if at >= tail {
            cut = match previous {
                Some(p) if p + 6 == at && is_high_surrogate(&data[p..at]) => p,
                _ => at,
            };
            return cut;
        }
        previous = Some(at);
        k = at + 2;
    }
    // No escape near the end: back off to the start of a character the piece cuts.
    let mut j = cut;
    let mut continuation = 0;
    while j > 0 && continuation < 3 && data[j - 1] & 0xC0 == 0x80 {
        j -= 1;
        continuation += 1;
    }
    if j > 0 {
        let lead = data[j - 1];
        let need = match lead {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        if need > continuation + 1 {
            cut = j - 1;
        }
    }
    cut
}

/// Call `f` with the text at `span` (`[start, end)`) of `store` in order, unescaped when
/// `escaped`, in pieces of whole characters of at most `piece` + 12 bytes. The bytes were
/// checked when they were scanned; a read error ends the text early (and is logged).
pub(super) fn for_each_stored_piece(
    store: &dyn RawStore,
    (mut at, end): (u64, u64),
    escaped: bool,
    piece: usize,
    f: &mut dyn FnMut(&str),
) {
    // One buffer, zeroed once: `carried` bytes from the last piece, then the new read.
    let first = usize::try_from(end.saturating_sub(at)).map_or(piece, |left| left.min(piece));
    let mut buf = vec![0u8; first + LONGEST_ESCAPE];
    let mut carried = 0;
    let mut out = String::new();
    loop {
        let want = usize::try_from(end.saturating_sub(at)).map_or(piece, |left| left.min(piece));
        if buf.len() < carried + want {
            buf.resize(carried + want, 0);
        }
        let mut filled = carried;
        while filled < carried + want {
            match store.read_at(&mut buf[filled..carried + want], at) {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    at += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(
                        "a stream's text could not be read back from its transit file: {e}"
                    );
                    return;
                }
            }
        }
        let data = &buf[..filled];
        // The end of the span, or of the store (a short read).
        let last = at >= end || filled < carried + want;
        let cut = if last { data.len() } else { safe_cut(data) };
        let Ok(text) = std::str::from_utf8(&data[..cut]) else {
            return; // checked when scanned
        };
        if escaped {
            out.clear();
            let _ = unescape(text, &mut |p| out.push_str(p));
            if !out.is_empty() {
                f(&out);
            }
        } else if !text.is_empty() {
            f(text);
        }
        if last {
            return;
        }
        buf.copy_within(cut..filled, 0);
        carried = filled - cut;
    }
}

/// `bytes` is `\uD800`–`\uDBFF`, the first half of a surrogate pair.
fn is_high_surrogate(bytes: &[u8]) -> bool {
    bytes.len() == 6
        && bytes[1] == b'u'
        && hex4(&bytes[2..]).is_some_and(|h| (0xD800..0xDC00).contains(&h))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// A store in memory.
    struct Held(Vec<u8>);

    impl RawStore for Held {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            let from = self.0.get(offset as usize..).unwrap_or_default();
            let n = from.len().min(buf.len());
            buf[..n].copy_from_slice(&from[..n]);
            Ok(n)
        }
    }

    /// Scan `frame` in pieces of `size`; the fields and the text read back from the frame in
    /// pieces of `size` too (each checked to be whole characters).
    fn scan(frame: &[u8], size: usize) -> Option<(Value, Option<String>)> {
        let mut s = ContentScanner::default();
        for piece in frame.chunks(size.max(1)) {
            s.feed(piece);
        }
        let (map, span) = s.finish()?;
        let text = span.map(|t| {
            let raw = &frame[t.start as usize..t.end as usize];
            assert_eq!(t.escaped, raw.contains(&b'\\'));
            let whole: String =
                serde_json::from_slice(&[b"\"", raw, b"\""].concat()).expect("valid");
            let store = Held(frame.to_vec());
            let mut joined = String::new();
            for_each_stored_piece(&store, (t.start, t.end), t.escaped, size, &mut |p| {
                assert!(
                    p.len() <= size + LONGEST_ESCAPE,
                    "a piece of {} bytes",
                    p.len()
                );
                joined.push_str(p);
            });
            assert_eq!(joined, whole, "read back in pieces of {size}");
            whole
        });
        Some((Value::Object(map), text))
    }

    #[test]
    fn a_stream_content_in_any_pieces_gives_its_fields_and_text() {
        let text = "é漢 \"q\"\t😀\n\\u0041 ".repeat(50);
        let frame = serde_json::to_vec(&json!({"name": "stdout", "text": text})).unwrap();
        for size in [1, 2, 3, 5, 7, 11, 13, 64, 4096] {
            let (fields, got) = scan(&frame, size).expect("a flat object");
            assert_eq!(fields, json!({"name": "stdout"}), "pieces of {size}");
            assert_eq!(got.as_deref(), Some(text.as_str()), "pieces of {size}");
        }
        assert_eq!(scan(b" { } ", 1), Some((json!({}), None)));
    }

    #[test]
    fn anything_but_a_flat_string_object_gives_up_in_any_pieces() {
        let more: [&[u8]; 4] = [
            br#"{"text": "high \ud83d alone"}"#,
            b"{\"text\": \"cut utf8 \xe6\xbc\"}",
            br#"{"text": "a", "text": "b"}"#,
            br#"{"text": "a",}"#,
        ];
        for frame in super::super::stream::NOT_FLAT_STRING_OBJECTS
            .iter()
            .chain(&more)
        {
            for size in [1, 3, 4096] {
                assert_eq!(scan(frame, size), None, "{frame:?} in pieces of {size}");
            }
        }
        let big = format!(
            r#"{{"name": "{}", "text": ""}}"#,
            "n".repeat(SMALL_FIELD_BYTES + 1)
        );
        assert_eq!(scan(big.as_bytes(), 4096), None);
    }

    #[test]
    fn a_cut_never_splits_an_escape_a_surrogate_pair_or_a_character() {
        assert_eq!(safe_cut(br"abc\ud83d\ude00"), 3);
        assert_eq!(safe_cut(br"abcdefghijklmnop\n"), 16);
        assert_eq!(safe_cut("abcdefghijklmnop漢".as_bytes()), 19);
        assert_eq!(safe_cut(&"abcdefghijklmnop漢".as_bytes()[..18]), 16);
        assert_eq!(safe_cut(br"abcdefghijklmnop\\"), 16);
        assert_eq!(safe_cut(br"abcdefghijklmnopqrstuvwxyz"), 26);
    }

    proptest! {
        #[test]
        fn fuzz_any_text_in_any_pieces_scans_like_serde(
            text in any::<String>(), name in "[a-z]{0,8}", size in 1usize..40,
        ) {
            let frame = serde_json::to_vec(&json!({"name": name, "text": text})).unwrap();
            let (fields, got) = scan(&frame, size).expect("serde's own output is flat");
            prop_assert_eq!(fields, json!({"name": name}));
            prop_assert_eq!(got, Some(text));
        }

        #[test]
        fn fuzz_arbitrary_bytes_never_disagree_with_serde(
            bytes in proptest::collection::vec(any::<u8>(), 0..64), size in 1usize..9,
        ) {
            if let Some((fields, text)) = scan(&bytes, size) {
                let mut want = fields.as_object().cloned().unwrap();
                if let Some(t) = text {
                    want.insert("text".into(), Value::String(t));
                }
                let theirs: Value = serde_json::from_slice(&bytes).expect("serde agrees it is valid");
                prop_assert_eq!(Value::Object(want), theirs);
            }
        }
    }
}
