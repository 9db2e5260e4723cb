//! JSON string escapes (RFC 8259 §7): unescaping the body of a string literal as serde_json
//! would, refusing what it refuses (invalid escapes, unpaired surrogates).

/// Unescape the body of a JSON string literal, handing `sink` the text in order (stretches
/// between escapes, and each escaped character). `None` at an invalid escape or an unpaired
/// surrogate (what serde_json rejects); `sink` may have had part of the text by then.
pub fn unescape(raw: &str, sink: &mut dyn FnMut(&str)) -> Option<()> {
    let bytes = raw.as_bytes();
    let mut k = 0;
    while k < raw.len() {
        let Some(off) = memchr::memchr(b'\\', &bytes[k..]) else {
            sink(&raw[k..]);
            break;
        };
        if off > 0 {
            // A backslash is ASCII, so the stretch before it ends on a character boundary.
            sink(&raw[k..k + off]);
        }
        k += off + 1;
        let c = *bytes.get(k)?;
        k += 1;
        let simple = match c {
            b'"' => "\"",
            b'\\' => "\\",
            b'/' => "/",
            b'b' => "\u{8}",
            b'f' => "\u{c}",
            b'n' => "\n",
            b'r' => "\r",
            b't' => "\t",
            b'u' => {
                let hi = hex4(bytes.get(k..k + 4)?)?;
                k += 4;
                let ch = if (0xD800..0xDC00).contains(&hi) {
                    // A high surrogate must be followed by `\u` + a low one.
                    if bytes.get(k..k + 2)? != b"\\u" {
                        return None;
                    }
                    let lo = hex4(bytes.get(k + 2..k + 6)?)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    k += 6;
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                } else {
                    char::from_u32(hi)? // a lone low surrogate is `None`
                };
                let mut buf = [0u8; 4];
                sink(ch.encode_utf8(&mut buf));
                continue;
            }
            _ => return None,
        };
        sink(simple);
    }
    Some(())
}

pub fn hex4(h: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(h).ok()?;
    u32::from_str_radix(s, 16).ok()
}

/// The body of a string literal unescaped into one `String`; `None` when [`unescape`] refuses
/// it.
pub fn unescaped(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    unescape(raw, &mut |piece| out.push_str(piece))?;
    Some(out)
}
