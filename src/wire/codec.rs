//! Multipart frames <-> [`Message`] (spec §1.1, §1.7): finding the delimiter,
//! checking the signature over the received bytes, and lenient JSON parsing of
//! the four dicts. Decoding never panics; every defect is a [`WireError`].

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::{Header, Message, Signer, WireError};

/// The frame separating routing ids from the signed message.
pub const DELIMITER: &[u8] = b"<IDS|MSG>";

/// Frames after the delimiter that every message has: signature + 4 JSON dicts.
const MIN_FRAMES: usize = 5;

/// Frames to send (spec §1.1): identities, delimiter, signature, header,
/// parent_header (`{}` when `None`), metadata, content, buffers.
///
/// The signature covers exactly the four JSON frames as serialized here.
pub fn encode(msg: &Message, signer: &Signer) -> Vec<Bytes> {
    let header = to_json(&msg.header);
    let parent = match &msg.parent_header {
        Some(p) => to_json(p),
        None => Bytes::from_static(b"{}"),
    };
    let metadata = to_json(&msg.metadata);
    let content = to_json(&*msg.full_content());
    let signature = signer.sign([&header, &parent, &metadata, &content]);

    let mut frames = Vec::with_capacity(msg.identities.len() + 6 + msg.buffers.len());
    frames.extend(msg.identities.iter().cloned());
    frames.push(Bytes::from_static(DELIMITER));
    frames.push(Bytes::from(signature));
    frames.extend([header, parent, metadata, content]);
    frames.extend(msg.buffers.iter().cloned());
    frames
}

/// Parse a received multipart (spec §1.1, §1.2, §1.7). Never panics; any defect is an `Err`.
///
/// Everything before the first [`DELIMITER`] is kept as `identities` (routing ids or
/// iopub topics); at least 5 frames must follow it, and any beyond those are buffers.
/// The signature is checked over the received bytes. `parent_header`, `metadata` and
/// `content` may be `null`; JSON with invalid UTF-8 is decoded lossily (U+FFFD).
pub fn decode(frames: Vec<Bytes>, signer: &Signer) -> Result<Message, WireError> {
    let parts = split(frames)?;
    signer.verify(
        &parts.signature,
        [
            &parts.header,
            &parts.parent,
            &parts.metadata,
            &parts.content,
        ],
    )?;
    finish(parts, |is_stream, content| {
        // Floods arrive as `stream` frames of tens of MB: unescape their text once, or leave
        // a large one in the frame (see `stream`).
        let fast = is_stream
            .then(|| super::stream::parse_stream_content(content))
            .flatten();
        match fast {
            Some(v) => Ok(v),
            None => Ok((or_empty(parse_json("content", content)?), None)),
        }
    })
}

/// A `stream` content frame that was read in pieces (see `stream_pieces`): the signature
/// computed over it as it came, and what it parsed to.
#[derive(Debug)]
pub struct StreamedContent {
    pub mac: super::MacStream,
    pub content: Value,
    pub raw_text: Option<super::stream::RawText>,
}

/// [`decode`] for a multipart whose content frame was read in pieces: `frames` holds an
/// empty frame in its place and `streamed` what it was. The signature is checked with the
/// MAC computed as the content came; the errors are [`decode`]'s.
pub fn decode_streamed(
    frames: Vec<Bytes>,
    streamed: StreamedContent,
) -> Result<Message, WireError> {
    let parts = split(frames)?;
    streamed.mac.verify(&parts.signature)?;
    let StreamedContent {
        content, raw_text, ..
    } = streamed;
    finish(parts, |_, _| Ok((content, raw_text)))
}

/// A multipart's frames by role.
struct Parts {
    identities: Vec<Bytes>,
    signature: Bytes,
    header: Bytes,
    parent: Bytes,
    metadata: Bytes,
    content: Bytes,
    buffers: Vec<Bytes>,
}

fn split(mut frames: Vec<Bytes>) -> Result<Parts, WireError> {
    let Some(delim) = frames.iter().position(|f| f.as_ref() == DELIMITER) else {
        return Err(WireError::NoDelimiter {
            frames: frames.len(),
        });
    };
    let mut rest = frames.split_off(delim + 1);
    frames.truncate(delim);
    if rest.len() < MIN_FRAMES {
        return Err(WireError::TooFewFrames { found: rest.len() });
    }
    let buffers = rest.split_off(MIN_FRAMES);
    let [signature, header, parent, metadata, content]: [Bytes; MIN_FRAMES] = rest
        .try_into()
        .map_err(|r: Vec<Bytes>| WireError::TooFewFrames { found: r.len() })?;
    Ok(Parts {
        identities: frames,
        signature,
        header,
        parent,
        metadata,
        content,
        buffers,
    })
}

/// The message from its (verified) parts; `content` turns the content frame into `content`
/// and the text left out of it, given whether the message is a `stream`.
fn finish(
    parts: Parts,
    content: impl FnOnce(bool, &Bytes) -> Result<(Value, Option<super::stream::RawText>), WireError>,
) -> Result<Message, WireError> {
    let header: Header = parse_typed("header", &parts.header)?;
    let parent_header = match parts.parent.trim_ascii() {
        b"null" | b"{}" => None,
        bytes => match parse_typed::<Header>("parent_header", bytes) {
            Ok(h) => Some(h),
            // `{ }` with spaces, or `null` spelled oddly, is still no parent.
            Err(e) => match parse_json("parent_header", bytes)? {
                Value::Null => None,
                Value::Object(o) if o.is_empty() => None,
                _ => return Err(e),
            },
        },
    };
    let metadata = or_empty(parse_json("metadata", &parts.metadata)?);
    let (content, raw_text) = content(header.msg_type == "stream", &parts.content)?;
    Ok(Message {
        identities: parts.identities,
        header,
        parent_header,
        metadata,
        content,
        buffers: parts.buffers,
        raw_text,
    })
}

/// Serialize one of our own values. `Header` and `Value` always serialize.
fn to_json<T: Serialize>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("Header and Value serialize infallibly"))
}

/// Parse one JSON frame; on invalid UTF-8 retry with the bytes decoded lossily.
fn parse_json(part: &'static str, bytes: &[u8]) -> Result<Value, WireError> {
    serde_json::from_slice(bytes).or_else(|err| match std::str::from_utf8(bytes) {
        Ok(_) => Err(json_error(part, err)),
        Err(_) => serde_json::from_str(&String::from_utf8_lossy(bytes))
            .map_err(|err| json_error(part, err)),
    })
}

/// One JSON frame straight into `T` (no `Value` in between); on invalid UTF-8 retry with the
/// bytes decoded lossily. A header must carry string `msg_id` and `msg_type`.
fn parse_typed<T: serde::de::DeserializeOwned>(
    part: &'static str,
    bytes: &[u8],
) -> Result<T, WireError> {
    serde_json::from_slice(bytes).or_else(|err| match std::str::from_utf8(bytes) {
        Ok(_) => Err(json_error(part, err)),
        Err(_) => serde_json::from_str(&String::from_utf8_lossy(bytes))
            .map_err(|err| json_error(part, err)),
    })
}

/// `null` becomes `{}`; anything else is kept as sent.
fn or_empty(value: Value) -> Value {
    match value {
        Value::Null => Value::Object(Default::default()),
        v => v,
    }
}

/// A [`WireError::Json`] for `part`.
pub(super) fn json_error(part: &'static str, err: serde_json::Error) -> WireError {
    WireError::Json {
        part,
        detail: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEY: &[u8] = b"test-key";

    fn sample() -> Message {
        let mut m = Message::new("execute_request", json!({"code": "1+1"}), "sess");
        m.buffers = vec![Bytes::from_static(b"\x00\x01binary")];
        m
    }

    /// Frames after the delimiter, signed with `KEY`, from raw JSON parts.
    fn signed(parts: [&[u8]; 4]) -> Vec<Bytes> {
        let sig = Signer::new(KEY).sign(parts);
        let mut frames = vec![Bytes::from_static(DELIMITER), Bytes::from(sig)];
        frames.extend(parts.iter().map(|p| Bytes::copy_from_slice(p)));
        frames
    }

    const HEADER: &[u8] = br#"{"msg_id":"m1","msg_type":"status"}"#;

    #[test]
    fn encode_then_decode_round_trips() {
        let signer = Signer::new(KEY);
        let mut msg = sample();
        msg.identities = vec![Bytes::from_static(b"route")];
        msg.parent_header = Some(Message::new("p", json!({}), "k").header);
        let frames = encode(&msg, &signer);
        assert_eq!(frames.len(), 1 + 1 + 5 + 1);
        assert_eq!(frames[1].as_ref(), DELIMITER);
        assert_eq!(decode(frames, &signer), Ok(msg));
    }

    #[test]
    fn encode_writes_empty_parent_as_object_and_signs_json_frames() {
        let signer = Signer::new(KEY);
        let frames = encode(&sample(), &signer);
        assert_eq!(frames[0].as_ref(), DELIMITER);
        assert_eq!(frames[3].as_ref(), b"{}");
        let parts = [&frames[2][..], &frames[3], &frames[4], &frames[5]];
        assert_eq!(frames[1], signer.sign(parts).as_bytes());
    }

    #[test]
    fn encode_without_key_has_empty_signature() {
        let frames = encode(&sample(), &Signer::new(b""));
        assert!(frames[1].is_empty());
    }

    #[test]
    fn buffers_are_not_signed() {
        let signer = Signer::new(KEY);
        let mut frames = encode(&sample(), &signer);
        *frames.last_mut().unwrap() = Bytes::from_static(b"tampered buffer");
        let msg = decode(frames, &signer).expect("buffer change keeps signature valid");
        assert_eq!(msg.buffers, vec![Bytes::from_static(b"tampered buffer")]);
    }

    #[test]
    fn changed_content_breaks_the_signature() {
        let signer = Signer::new(KEY);
        let mut frames = encode(&sample(), &signer);
        frames[5] = Bytes::from_static(br#"{"code":"rm -rf /"}"#);
        assert_eq!(decode(frames, &signer), Err(WireError::BadSignature));
    }

    #[test]
    fn unsigned_message_with_key_is_rejected() {
        let frames = encode(&sample(), &Signer::new(b""));
        assert_eq!(decode(frames, &Signer::new(KEY)), Err(WireError::Unsigned));
    }

    #[test]
    fn empty_key_accepts_unsigned_message() {
        let msg = sample();
        let frames = encode(&msg, &Signer::new(b""));
        assert_eq!(decode(frames, &Signer::new(b"")), Ok(msg));
    }

    #[test]
    fn bad_hex_signature_is_rejected() {
        let mut frames = signed([HEADER, b"{}", b"{}", b"{}"]);
        frames[1] = Bytes::from_static(b"not-hex!");
        assert_eq!(
            decode(frames, &Signer::new(KEY)),
            Err(WireError::BadSignature)
        );
    }

    #[test]
    fn missing_delimiter_is_rejected() {
        let frames = vec![Bytes::from_static(b"a"), Bytes::from_static(b"{}")];
        assert_eq!(
            decode(frames, &Signer::new(KEY)),
            Err(WireError::NoDelimiter { frames: 2 })
        );
        assert_eq!(
            decode(Vec::new(), &Signer::new(KEY)),
            Err(WireError::NoDelimiter { frames: 0 })
        );
    }

    #[test]
    fn three_frames_after_delimiter_are_too_few() {
        let mut frames = signed([HEADER, b"{}", b"{}", b"{}"]);
        frames.truncate(4);
        assert_eq!(
            decode(frames, &Signer::new(KEY)),
            Err(WireError::TooFewFrames { found: 3 })
        );
    }

    #[test]
    fn null_parent_metadata_and_content_are_accepted() {
        let msg = decode(
            signed([HEADER, b"null", b"null", b"null"]),
            &Signer::new(KEY),
        )
        .expect("xeus-style nulls");
        assert_eq!(msg.parent_header, None);
        assert_eq!(msg.metadata, json!({}));
        assert_eq!(msg.content, json!({}));
    }

    #[test]
    fn spaced_empty_parent_is_none_and_a_partial_parent_is_an_error() {
        let msg = decode(signed([HEADER, b" { } ", b"{}", b"{}"]), &Signer::new(KEY)).unwrap();
        assert_eq!(msg.parent_header, None);
        let err = decode(
            signed([HEADER, br#"{"date":"x"}"#, b"{}", b"{}"]),
            &Signer::new(KEY),
        );
        assert!(
            matches!(
                err,
                Err(WireError::Json {
                    part: "parent_header",
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn empty_parent_object_is_none() {
        let msg = decode(signed([HEADER, b"{}", b"{}", b"{}"]), &Signer::new(KEY)).unwrap();
        assert_eq!(msg.parent_header, None);
        assert_eq!(msg.parent_msg_id(), None);
    }

    #[test]
    fn routing_and_topic_frames_before_delimiter_are_identities() {
        let mut frames = vec![
            Bytes::from_static(b"kernel.abc.status"),
            Bytes::from_static(b"second-id"),
        ];
        frames.extend(signed([
            HEADER,
            b"{}",
            b"{}",
            br#"{"execution_state":"idle"}"#,
        ]));
        let msg = decode(frames, &Signer::new(KEY)).unwrap();
        assert_eq!(
            msg.identities,
            vec![
                Bytes::from_static(b"kernel.abc.status"),
                Bytes::from_static(b"second-id")
            ]
        );
        assert_eq!(msg.content, json!({"execution_state": "idle"}));
    }

    #[test]
    fn first_delimiter_wins_and_later_ones_are_buffers() {
        let mut frames = signed([HEADER, b"{}", b"{}", b"{}"]);
        frames.push(Bytes::from_static(DELIMITER));
        let msg = decode(frames, &Signer::new(KEY)).unwrap();
        assert!(msg.identities.is_empty());
        assert_eq!(msg.buffers, vec![Bytes::from_static(DELIMITER)]);
    }

    #[test]
    fn invalid_utf8_in_content_is_decoded_lossily() {
        let content: &[u8] = b"{\"name\":\"stdout\",\"text\":\"a\xff\xfeb\"}";
        let msg = decode(signed([HEADER, b"{}", b"{}", content]), &Signer::new(KEY))
            .expect("lossy, not dropped");
        assert_eq!(msg.content["text"], json!("a\u{FFFD}\u{FFFD}b"));
    }

    #[test]
    fn header_without_msg_id_or_msg_type_is_a_json_error() {
        for header in [
            &br#"{"msg_type":"status"}"#[..],
            br#"{"msg_id":"m"}"#,
            b"null",
        ] {
            let err = decode(signed([header, b"{}", b"{}", b"{}"]), &Signer::new(KEY));
            assert!(
                matches!(err, Err(WireError::Json { part: "header", .. })),
                "{err:?}"
            );
        }
    }

    #[test]
    fn malformed_json_is_a_json_error_naming_the_frame() {
        let err = decode(signed([HEADER, b"{}", b"{", b"{}"]), &Signer::new(KEY));
        assert!(
            matches!(
                err,
                Err(WireError::Json {
                    part: "metadata",
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn header_date_and_unknown_fields_are_not_validated() {
        let header: &[u8] =
            br#"{"msg_id":"m","msg_type":"status","date":"yesterday","subshell_id":null,"x":[1]}"#;
        let msg = decode(signed([header, b"{}", b"{}", b"{}"]), &Signer::new(KEY)).unwrap();
        assert_eq!(msg.header.date, "yesterday");
        assert_eq!(msg.header.session, "");
        let msg = decode(signed([HEADER, b"{}", b"{}", b"{}"]), &Signer::new(KEY)).unwrap();
        assert_eq!(msg.header.date, "");
    }
}
