//! A fast path for the content of `stream` messages (spec: "Streams (stdout, stderr, etc)"
//! in <https://jupyter-client.readthedocs.io/en/latest/messaging.html#streams-stdout-stderr-etc>),
//! the frames that carry floods: `{"name": "stdout", "text": "…"}` of up to tens of MB.
//!
//! serde_json decodes an escaped string into a scratch buffer and then copies it into the
//! `Value` (two transient copies of a 25 MB text besides the frame itself). Here the object is
//! scanned without building anything and each string is unescaped once, straight into a
//! `String` of the right capacity. Anything that is not a flat object of string values
//! (nested values, numbers, invalid escapes or UTF-8) returns `None` and the caller falls back
//! to the general parser, so the result is always what serde_json would give.

use serde_json::{Map, Value};

/// Parse a flat JSON object whose values are all strings (a `stream` content). `None` when
/// the frame is anything else; the caller then parses it the general way.
pub fn parse_flat_string_object(bytes: &[u8]) -> Option<Value> {
    let mut p = Scanner { b: bytes, i: 0 };
    let mut map = Map::new();
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
            let value = p.string()?;
            map.insert(key, Value::String(value));
            p.ws();
            match p.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    p.ws();
    (p.i == bytes.len()).then_some(Value::Object(map))
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
        let raw = &self.b[start..end];
        self.i = end + 1;
        if raw.iter().any(|&c| c < 0x20) {
            return None; // control characters must be escaped (serde_json rejects them)
        }
        if !escapes {
            return std::str::from_utf8(raw).ok().map(str::to_owned);
        }
        let mut out: Vec<u8> = Vec::with_capacity(raw.len());
        let mut k = 0;
        while k < raw.len() {
            let Some(off) = memchr::memchr(b'\\', &raw[k..]) else {
                out.extend_from_slice(&raw[k..]);
                break;
            };
            out.extend_from_slice(&raw[k..k + off]);
            k += off + 1;
            let c = *raw.get(k)?;
            k += 1;
            let simple = match c {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 8,
                b'f' => 12,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let hi = hex4(raw.get(k..k + 4)?)?;
                    k += 4;
                    let ch = if (0xD800..0xDC00).contains(&hi) {
                        // A high surrogate must be followed by `\u` + a low one.
                        if raw.get(k..k + 2)? != b"\\u" {
                            return None;
                        }
                        let lo = hex4(raw.get(k + 2..k + 6)?)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return None;
                        }
                        k += 6;
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                    } else {
                        char::from_u32(hi)? // a lone low surrogate is `None`
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
                _ => return None,
            };
            out.push(simple);
        }
        String::from_utf8(out).ok()
    }
}

fn hex4(h: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(h).ok()?;
    u32::from_str_radix(s, 16).ok()
}

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
        for frame in [
            &br#"{"name": "stdout", "text": 1}"#[..],
            br#"{"name": "stdout", "text": {"a": "b"}}"#,
            br#"{"text": "unterminated}"#,
            br#"{"text": "bad \x escape"}"#,
            br#"{"text": "lone \udc00 surrogate"}"#,
            b"{\"text\": \"raw \n newline\"}",
            b"{\"text\": \"bad utf8 \xff\"}",
            br#"{"text": "a"} trailing"#,
            br#"[]"#,
        ] {
            assert_eq!(parse_flat_string_object(frame), None, "{frame:?}");
        }
    }

    #[test]
    fn empty_object_and_key_order_are_kept() {
        assert_eq!(parse_flat_string_object(b" {} "), Some(json!({})));
        let v = parse_flat_string_object(br#"{"text":"t","name":"stderr"}"#).unwrap();
        assert_eq!(v, json!({"name": "stderr", "text": "t"}));
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
