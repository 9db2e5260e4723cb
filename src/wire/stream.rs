//! A fast path for the content of `stream` messages (spec: "Streams (stdout, stderr, etc)"
//! in <https://jupyter-client.readthedocs.io/en/latest/messaging.html#streams-stdout-stderr-etc>),
//! the frames that carry floods: `{"name": "stdout", "text": "…"}` of up to tens of MB.
//!
//! serde_json decodes an escaped string into a scratch buffer and then copies it into the
//! `Value` (two transient copies of a 25 MB text besides the frame itself). Here the object is
//! scanned without building anything and each string is unescaped once, straight into a
//! `String` of the right capacity — or, for a `text` over [`RAW_TEXT_BYTES`], not at all: it
//! stays in the frame as a [`RawText`] (checked here, so it is known to be valid) and is
//! unescaped in pieces where it is stored, so the message is in memory once. Anything that is
//! not a flat object of string values (nested values, numbers, invalid escapes or UTF-8)
//! returns `None` and the caller falls back to the general parser, so the result is always
//! what serde_json would give.

use bytes::Bytes;
use serde_json::{Map, Value};

use super::escape::{unescape, unescaped};
use super::stream_pieces::RawStore;

/// A `text` longer than this (escaped bytes) is left in its frame as a [`RawText`].
pub const RAW_TEXT_BYTES: usize = 1024 * 1024;

/// [`RawText::for_each_piece`] hands out pieces of about this many bytes.
const PIECE_BYTES: usize = 256 * 1024;

/// The `text` of a large `stream` message, still JSON-escaped in its frame. It was checked
/// when the frame was parsed (escapes, surrogates, UTF-8), so unescaping it cannot fail.
#[derive(Clone)]
pub struct RawText {
    /// Where the escaped bytes are: the frame in memory, or the store a frame read in
    /// pieces went to (see `stream_pieces`).
    source: Source,
    start: usize,
    end: usize,
    escaped: bool,
    release: Option<std::sync::Arc<Release>>,
}

#[derive(Clone)]
enum Source {
    Frame(Bytes),
    Store(std::sync::Arc<dyn RawStore>),
}

/// Runs its function once the last clone of the [`RawText`] that holds it is dropped.
struct Release(Option<Box<dyn FnOnce() + Send + Sync>>);

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

impl std::fmt::Debug for RawText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawText")
            .field("bytes", &(self.end - self.start))
            .field("escaped", &self.escaped)
            .finish()
    }
}

impl PartialEq for RawText {
    fn eq(&self, other: &RawText) -> bool {
        self.escaped == other.escaped && self.to_text() == other.to_text()
    }
}

impl RawText {
    /// The text at `span` of `store`, where a content frame read in pieces was put; its
    /// bytes there were checked by `stream_pieces::ContentScanner`.
    pub fn in_store(
        store: std::sync::Arc<dyn RawStore>,
        span: super::stream_pieces::TextSpan,
    ) -> RawText {
        RawText {
            source: Source::Store(store),
            start: span.start as usize,
            end: span.end as usize,
            escaped: span.escaped,
            release: None,
        }
    }

    /// Call `f` once this text (and every clone) is dropped, i.e. once its frame is free:
    /// a socket reader waits for that before taking the next large frame in.
    pub fn on_release(&mut self, f: impl FnOnce() + Send + Sync + 'static) {
        self.release = Some(std::sync::Arc::new(Release(Some(Box::new(f)))));
    }

    /// An upper bound of the text's length in bytes (its escaped length).
    pub fn max_len(&self) -> usize {
        self.end - self.start
    }

    /// Call `f` with the unescaped text in order, in pieces of about 256 KiB of whole
    /// characters.
    pub fn for_each_piece(&self, mut f: impl FnMut(&str)) {
        let frame = match &self.source {
            Source::Frame(frame) => frame,
            Source::Store(store) => {
                let span = (self.start as u64, self.end as u64);
                return super::stream_pieces::for_each_stored_piece(
                    &**store,
                    span,
                    self.escaped,
                    PIECE_BYTES,
                    &mut f,
                );
            }
        };
        let raw = &frame[self.start..self.end];
        let Ok(text) = std::str::from_utf8(raw) else {
            return; // checked at parse time
        };
        if !self.escaped {
            for_each_chunk(text, &mut f);
            return;
        }
        let mut out = String::with_capacity(PIECE_BYTES.min(raw.len()) + 4);
        let _ = unescape(text, &mut |piece: &str| {
            if out.len() + piece.len() > PIECE_BYTES && !out.is_empty() {
                f(&out);
                out.clear();
            }
            if piece.len() > PIECE_BYTES {
                for_each_chunk(piece, &mut f);
            } else {
                out.push_str(piece);
            }
        });
        if !out.is_empty() {
            f(&out);
        }
    }

    /// The whole text (one more copy: for small texts and tests).
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(self.max_len());
        self.for_each_piece(|p| s.push_str(p));
        s
    }
}

/// `text` in chunks of at most [`PIECE_BYTES`] (at least one character each).
fn for_each_chunk(mut text: &str, f: &mut impl FnMut(&str)) {
    while !text.is_empty() {
        let mut cut = text.floor_char_boundary(PIECE_BYTES.min(text.len()));
        if cut == 0 {
            cut = text.ceil_char_boundary(1);
        }
        let (a, b) = text.split_at(cut);
        f(a);
        text = b;
    }
}

/// Parse a flat JSON object whose values are all strings (a `stream` content). `None` when
/// the frame is anything else; the caller then parses it the general way.
#[cfg(test)]
pub fn parse_flat_string_object(bytes: &[u8]) -> Option<Value> {
    parse(bytes, None).map(|(v, _)| v)
}

/// [`parse_flat_string_object`] for a whole content frame, leaving a `text` over
/// [`RAW_TEXT_BYTES`] in the frame: the object without it, and the text.
pub fn parse_stream_content(frame: &Bytes) -> Option<(Value, Option<RawText>)> {
    parse(frame, Some(frame))
}

fn parse(bytes: &[u8], frame: Option<&Bytes>) -> Option<(Value, Option<RawText>)> {
    let mut p = Scanner { b: bytes, i: 0 };
    let mut map = Map::new();
    let mut raw_text = None;
    p.ws();
    p.eat(b'{')?;
    p.ws();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            p.ws();
            let key = p.string()?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            let (start, end, escaped) = p.literal()?;
            match frame {
                Some(frame) if key == "text" && end - start > RAW_TEXT_BYTES => {
                    // Checked now, unescaped where it is stored.
                    let text = std::str::from_utf8(&bytes[start..end]).ok()?;
                    if escaped {
                        unescape(text, &mut |_| {})?;
                    }
                    map.remove("text");
                    raw_text = Some(RawText {
                        source: Source::Frame(frame.clone()),
                        start,
                        end,
                        escaped,
                        release: None,
                    });
                }
                _ => {
                    if key == "text" {
                        raw_text = None;
                    }
                    map.insert(key, Value::String(p.decode(start, end, escaped)?));
                }
            }
            p.ws();
            match p.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    p.ws();
    (p.i == bytes.len()).then_some((Value::Object(map), raw_text))
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A JSON string at the cursor, unescaped into one allocation.
    fn string(&mut self) -> Option<String> {
        let (start, end, escaped) = self.literal()?;
        self.decode(start, end, escaped)
    }

    /// The string literal at the cursor: the byte range between its quotes, and whether it
    /// has escapes. Control characters must be escaped (serde_json rejects them).
    fn literal(&mut self) -> Option<(usize, usize, bool)> {
        self.eat(b'"')?;
        let start = self.i;
        // The literal's end: the first unescaped quote (escapes never contain a bare quote).
        let mut end = start;
        let mut escapes = false;
        loop {
            let at = end + memchr::memchr2(b'"', b'\\', &self.b[end..])?;
            if self.b[at] == b'"' {
                end = at;
                break;
            }
            escapes = true;
            end = at + 2;
            if end > self.b.len() {
                return None;
            }
        }
        self.i = end + 1;
        if self.b[start..end].iter().any(|&c| c < 0x20) {
            return None;
        }
        Some((start, end, escapes))
    }

    /// The literal `[start, end)` unescaped.
    fn decode(&self, start: usize, end: usize, escaped: bool) -> Option<String> {
        let raw = std::str::from_utf8(&self.b[start..end]).ok()?;
        if !escaped {
            return Some(raw.to_owned());
        }
        unescaped(raw)
    }
}

/// Frames that are not a flat object of valid string values (the parser in pieces is held to
/// the same list).
#[cfg(test)]
pub(super) const NOT_FLAT_STRING_OBJECTS: &[&[u8]] = &[
    br#"{"name": "stdout", "text": 1}"#,
    br#"{"name": "stdout", "text": {"a": "b"}}"#,
    br#"{"text": "unterminated}"#,
    br#"{"text": "bad \x escape"}"#,
    br#"{"text": "lone \udc00 surrogate"}"#,
    b"{\"text\": \"raw \n newline\"}",
    b"{\"text\": \"bad utf8 \xff\"}",
    br#"{"text": "a"} trailing"#,
    br#"[]"#,
];

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn same_as_serde(bytes: &[u8]) {
        let ours = parse_flat_string_object(bytes);
        let theirs: Option<Value> = serde_json::from_slice(bytes).ok();
        if let Some(v) = &ours {
            assert_eq!(
                Some(v),
                theirs.as_ref(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn stream_content_with_escapes_parses_like_serde() {
        let frame = br#"{"name": "stdout", "text": "a\nb\t\"q\" \\ \/ \u00e9 \ud83d\ude00 end"}"#;
        let v = parse_flat_string_object(frame).expect("fast path");
        assert_eq!(
            v,
            json!({"name": "stdout", "text": "a\nb\t\"q\" \\ / é 😀 end"})
        );
        same_as_serde(frame);
    }

    #[test]
    fn anything_but_a_flat_string_object_falls_back() {
        for frame in NOT_FLAT_STRING_OBJECTS {
            assert_eq!(parse_flat_string_object(frame), None, "{frame:?}");
        }
    }

    #[test]
    fn empty_object_and_key_order_are_kept() {
        assert_eq!(parse_flat_string_object(b" {} "), Some(json!({})));
        let v = parse_flat_string_object(br#"{"text":"t","name":"stderr"}"#).unwrap();
        assert_eq!(v, json!({"name": "stderr", "text": "t"}));
    }

    #[test]
    fn a_large_text_stays_in_its_frame_and_unescapes_in_pieces_like_serde() {
        let text = "é漢 \"q\"\t😀\n".repeat(200_000) + "end";
        let frame =
            Bytes::from(serde_json::to_vec(&json!({"name": "stdout", "text": text})).unwrap());
        let (v, raw) = parse_stream_content(&frame).expect("fast path");
        assert_eq!(v, json!({"name": "stdout"}));
        let raw = raw.expect("left in the frame");
        let mut pieces = 0;
        let mut joined = String::new();
        raw.for_each_piece(|p| {
            assert!(p.len() <= PIECE_BYTES + 4);
            pieces += 1;
            joined.push_str(p);
        });
        assert!(pieces > 1);
        assert_eq!(joined, text);
        // Without escapes it is the frame's own bytes.
        let plain = "x".repeat(RAW_TEXT_BYTES + 1);
        let frame =
            Bytes::from(serde_json::to_vec(&json!({"text": plain, "name": "stderr"})).unwrap());
        let (v, raw) = parse_stream_content(&frame).expect("fast path");
        assert_eq!(v, json!({"name": "stderr"}));
        assert_eq!(raw.expect("raw").to_text(), plain);
        // A small text is parsed as before.
        let frame = Bytes::from_static(br#"{"name": "stdout", "text": "hi\n"}"#);
        assert_eq!(
            parse_stream_content(&frame),
            Some((json!({"name": "stdout", "text": "hi\n"}), None))
        );
    }

    #[test]
    fn a_large_text_with_a_bad_escape_falls_back_like_any_other() {
        for bad in [r"\x", r"\udc00", "\u{1}"] {
            let body = "a".repeat(RAW_TEXT_BYTES) + bad;
            let frame = Bytes::from(format!(r#"{{"name": "stdout", "text": "{body}"}}"#));
            assert_eq!(parse_stream_content(&frame), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn fuzz_any_text_round_trips_like_serde(text in any::<String>(), name in "[a-z]{0,8}") {
            let frame = serde_json::to_vec(&json!({"name": name, "text": text})).unwrap();
            let v = parse_flat_string_object(&frame).expect("serde's own output is flat");
            prop_assert_eq!(v, json!({"name": name, "text": text}));
        }

        #[test]
        fn fuzz_arbitrary_bytes_never_disagree_with_serde(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            same_as_serde(&bytes);
        }
    }
}
