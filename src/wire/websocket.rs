//! The kernel websocket's framings (`/api/kernels/{id}/channels` of Jupyter Server, Kernel
//! Gateway and Enterprise Gateway): [`Message`] + channel name <-> one websocket frame.
//!
//! - **v1** (subprotocol [`V1_SUBPROTOCOL`], binary frames): a little-endian u64 count `n` of
//!   offsets, then `n` little-endian u64 offsets from the start of the frame, then the parts
//!   they delimit: channel (UTF-8), header, parent_header, metadata, content (JSON each), then
//!   the buffers. The last offset is the frame's length. Nothing is signed here: the server
//!   signs towards the kernel and checks the kernel's signatures.
//! - **JSON** (no subprotocol chosen): a text frame holding one object with `channel`,
//!   `header`, `parent_header`, `metadata`, `content` (and `buffers: []`). A message with
//!   buffers comes as a binary frame instead: a big-endian u32 count `k`, `k` big-endian u32
//!   offsets, then the JSON object followed by the buffers.
//!
//! Pure functions; decoding never panics and reports every defect as a [`WireError`].
//!
//! Spec: <https://jupyter-server.readthedocs.io/en/latest/developers/websocket-protocols.html>

use bytes::Bytes;
use serde_json::{Value, json};

use super::codec::json_error;
use super::{Header, Message, WireError};

/// The websocket subprotocol of the binary v1 framing.
pub const V1_SUBPROTOCOL: &str = "v1.kernel.websocket.jupyter.org";

/// Parts of a v1 frame besides the buffers: channel, header, parent_header, metadata, content.
const V1_PARTS: usize = 5;

/// One v1 binary frame for `msg` on `channel` (see the module docs).
pub fn encode_v1(channel: &str, msg: &Message) -> Vec<u8> {
    let dicts = [
        json_bytes(&serde_json::to_value(&msg.header).unwrap_or(Value::Null)),
        json_bytes(&parent_value(msg)),
        json_bytes(&msg.metadata),
        json_bytes(&msg.full_content()),
    ];
    let mut parts: Vec<&[u8]> = Vec::with_capacity(V1_PARTS + msg.buffers.len());
    parts.push(channel.as_bytes());
    parts.extend(dicts.iter().map(|d| d.as_slice()));
    parts.extend(msg.buffers.iter().map(|b| b.as_ref()));

    // One offset per part start, plus the end of the frame.
    let count = parts.len() + 1;
    let mut offset = 8 * (1 + count) as u64;
    let total = offset as usize + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(count as u64).to_le_bytes());
    for p in &parts {
        out.extend_from_slice(&offset.to_le_bytes());
        offset += p.len() as u64;
    }
    out.extend_from_slice(&offset.to_le_bytes());
    for p in &parts {
        out.extend_from_slice(p);
    }
    out
}

/// Parse a v1 binary frame into its channel and message.
/// Errors: [`WireError::Framing`] for bad offsets, [`WireError::Json`] for a bad dict.
pub fn decode_v1(frame: &[u8]) -> Result<(String, Message), WireError> {
    let word = |i: usize| -> Result<u64, WireError> {
        let at = i
            .checked_mul(8)
            .filter(|&a| a + 8 <= frame.len())
            .ok_or_else(|| {
                framing(format!(
                    "frame of {} bytes ends inside its offsets",
                    frame.len()
                ))
            })?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&frame[at..at + 8]);
        Ok(u64::from_le_bytes(b))
    };
    let count = word(0)?;
    if count < (V1_PARTS + 1) as u64 || count > (frame.len() / 8) as u64 {
        return Err(framing(format!(
            "{count} offsets; a frame of {} bytes with channel and 4 dicts needs 6 to {}",
            frame.len(),
            frame.len() / 8
        )));
    }
    let count = count as usize;
    let offsets = (1..=count).map(word).collect::<Result<Vec<u64>, _>>()?;
    let parts = slices(frame, &offsets, 8 * (1 + count))?;
    let channel = std::str::from_utf8(parts[0])
        .map_err(|_| framing("the channel name is not UTF-8".into()))?
        .to_string();
    let msg = from_parts(
        parts[1],
        parts[2],
        parts[3],
        parts[4],
        parts[V1_PARTS..]
            .iter()
            .map(|b| Bytes::copy_from_slice(b))
            .collect(),
    )?;
    Ok((channel, msg))
}

/// One JSON text frame for `msg` on `channel` (the framing without a subprotocol). Buffers
/// are not carried: a message we send has none.
pub fn encode_json(channel: &str, msg: &Message) -> String {
    json!({
        "channel": channel,
        "header": msg.header,
        "parent_header": parent_value(msg),
        "metadata": msg.metadata,
        "content": msg.full_content(),
        "buffers": [],
    })
    .to_string()
}

/// One binary frame of the JSON framing for `msg` on `channel`, carrying its buffers (see
/// the module docs): what a server sends a client without the v1 subprotocol when a message
/// has buffers. A message without buffers is [`encode_json`]'s text frame instead.
pub fn encode_json_binary(channel: &str, msg: &Message) -> Vec<u8> {
    let object = json!({
        "channel": channel,
        "header": msg.header,
        "parent_header": parent_value(msg),
        "metadata": msg.metadata,
        "content": msg.full_content(),
    })
    .to_string();
    let mut parts: Vec<&[u8]> = vec![object.as_bytes()];
    parts.extend(msg.buffers.iter().map(|b| b.as_ref()));
    let count = parts.len();
    let mut offset = 4 * (1 + count);
    let total = offset + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(count as u32).to_be_bytes());
    for p in &parts {
        out.extend_from_slice(&(offset as u32).to_be_bytes());
        offset += p.len();
    }
    for p in &parts {
        out.extend_from_slice(p);
    }
    out
}

/// Parse a JSON text frame into its channel and message.
/// Errors: [`WireError::Json`] when it is not an object with a valid header and a channel.
pub fn decode_json(text: &str) -> Result<(String, Message), WireError> {
    let v: Value = serde_json::from_str(text).map_err(|e| json_error("message", e))?;
    from_json_object(v, Vec::new())
}

/// Parse a binary frame of the JSON framing (a message with buffers; see the module docs).
/// Errors: [`WireError::Framing`] for bad offsets, [`WireError::Json`] for a bad object.
pub fn decode_json_binary(frame: &[u8]) -> Result<(String, Message), WireError> {
    let word = |i: usize| -> Result<u32, WireError> {
        let at = i * 4;
        frame
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| {
                framing(format!(
                    "frame of {} bytes ends inside its offsets",
                    frame.len()
                ))
            })
    };
    let count = word(0)? as usize;
    if count == 0 || count > frame.len() / 4 {
        return Err(framing(format!(
            "{count} offsets in a frame of {} bytes",
            frame.len()
        )));
    }
    let mut offsets = (1..=count)
        .map(|i| word(i).map(u64::from))
        .collect::<Result<Vec<u64>, _>>()?;
    offsets.push(frame.len() as u64);
    let parts = slices(frame, &offsets, 4 * (1 + count))?;
    let v: Value = serde_json::from_slice(parts[0]).map_err(|e| json_error("message", e))?;
    let buffers = parts[1..]
        .iter()
        .map(|b| Bytes::copy_from_slice(b))
        .collect();
    from_json_object(v, buffers)
}

/// The parts between consecutive `offsets`, which must rise from `start` to the frame's end.
fn slices<'a>(frame: &'a [u8], offsets: &[u64], start: usize) -> Result<Vec<&'a [u8]>, WireError> {
    if offsets.first() != Some(&(start as u64)) {
        return Err(framing(format!(
            "the first part starts at {:?}, not right after the offsets at {start}",
            offsets.first()
        )));
    }
    if offsets.last() != Some(&(frame.len() as u64)) {
        return Err(framing(format!(
            "the last offset is {:?}, not the frame's length {}",
            offsets.last(),
            frame.len()
        )));
    }
    offsets
        .windows(2)
        .map(|w| {
            if w[0] > w[1] || w[1] > frame.len() as u64 {
                Err(framing(format!(
                    "offsets go backwards ({} > {})",
                    w[0], w[1]
                )))
            } else {
                Ok(&frame[w[0] as usize..w[1] as usize])
            }
        })
        .collect()
}

fn from_json_object(mut v: Value, buffers: Vec<Bytes>) -> Result<(String, Message), WireError> {
    let Some(obj) = v.as_object_mut() else {
        return Err(WireError::Json {
            part: "message",
            detail: "not a JSON object".into(),
        });
    };
    let channel = match obj.remove("channel") {
        Some(Value::String(c)) => c,
        _ => {
            return Err(WireError::Json {
                part: "message",
                detail: "no string `channel`".into(),
            });
        }
    };
    let header: Header = serde_json::from_value(obj.remove("header").unwrap_or(Value::Null))
        .map_err(|e| json_error("header", e))?;
    let parent_header = parse_parent(obj.remove("parent_header").unwrap_or(Value::Null))?;
    Ok((
        channel,
        Message {
            identities: Vec::new(),
            header,
            parent_header,
            metadata: or_empty(obj.remove("metadata").unwrap_or(Value::Null)),
            content: or_empty(obj.remove("content").unwrap_or(Value::Null)),
            buffers,
            raw_text: None,
        },
    ))
}

fn from_parts(
    header: &[u8],
    parent: &[u8],
    metadata: &[u8],
    content: &[u8],
    buffers: Vec<Bytes>,
) -> Result<Message, WireError> {
    let parse = |part: &'static str, b: &[u8]| -> Result<Value, WireError> {
        serde_json::from_slice(b).or_else(|e| {
            serde_json::from_str(&String::from_utf8_lossy(b)).map_err(|_| json_error(part, e))
        })
    };
    let header: Header =
        serde_json::from_value(parse("header", header)?).map_err(|e| json_error("header", e))?;
    Ok(Message {
        identities: Vec::new(),
        header,
        parent_header: parse_parent(parse("parent_header", parent)?)?,
        metadata: or_empty(parse("metadata", metadata)?),
        content: or_empty(parse("content", content)?),
        buffers,
        raw_text: None,
    })
}

fn parse_parent(v: Value) -> Result<Option<Header>, WireError> {
    match v {
        Value::Null => Ok(None),
        Value::Object(ref o) if o.is_empty() => Ok(None),
        v => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| json_error("parent_header", e)),
    }
}

fn parent_value(msg: &Message) -> Value {
    match &msg.parent_header {
        Some(p) => serde_json::to_value(p).unwrap_or_else(|_| json!({})),
        None => json!({}),
    }
}

fn json_bytes(v: &Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn or_empty(v: Value) -> Value {
    match v {
        Value::Null => Value::Object(Default::default()),
        v => v,
    }
}

fn framing(detail: String) -> WireError {
    WireError::Framing { detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"msg_id":"m1","msg_type":"status","session":"s","username":"u","date":"d","version":"5.3"}"#;
    const PARENT: &str = r#"{"msg_id":"p1","msg_type":"execute_request"}"#;

    /// A v1 frame built by hand from its parts, as the Python server builds one.
    fn v1_by_hand(parts: &[&[u8]]) -> Vec<u8> {
        let count = parts.len() as u64 + 1;
        let mut out = count.to_le_bytes().to_vec();
        let mut off = 8 * (1 + count);
        for p in parts {
            out.extend_from_slice(&off.to_le_bytes());
            off += p.len() as u64;
        }
        out.extend_from_slice(&off.to_le_bytes());
        for p in parts {
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn v1_encode_lays_out_count_offsets_then_parts_little_endian() {
        let mut msg = Message::new("execute_request", json!({"code": "1"}), "sess");
        msg.buffers = vec![Bytes::from_static(b"\x00\xff")];
        let frame = encode_v1("shell", &msg);
        // 7 parts + end → 7 offsets; header of 8 × (1 + 7) = 64 bytes.
        assert_eq!(&frame[..8], &7u64.to_le_bytes());
        assert_eq!(&frame[8..16], &64u64.to_le_bytes());
        assert_eq!(&frame[16..24], &69u64.to_le_bytes()); // after "shell"
        assert_eq!(&frame[64..69], b"shell");
        assert_eq!(&frame[frame.len() - 2..], b"\x00\xff");
        let last = u64::from_le_bytes(frame[56..64].try_into().unwrap());
        assert_eq!(last as usize, frame.len());
        let header: Value = serde_json::from_slice(
            &frame[69..u64::from_le_bytes(frame[24..32].try_into().unwrap()) as usize],
        )
        .unwrap();
        assert_eq!(header["msg_type"], "execute_request");
    }

    #[test]
    fn v1_round_trips_channel_dicts_and_buffers() {
        let mut msg = Message::new("comm_msg", json!({"data": {"x": 1}}), "sess");
        msg.parent_header = Some(Message::new("p", json!({}), "s").header);
        msg.metadata = json!({"m": true});
        msg.buffers = vec![Bytes::from_static(b"one"), Bytes::new()];
        let (channel, back) = decode_v1(&encode_v1("iopub", &msg)).unwrap();
        assert_eq!(channel, "iopub");
        assert_eq!(back, msg);
    }

    #[test]
    fn v1_decodes_a_frame_built_by_the_server_rules() {
        let frame = v1_by_hand(&[
            b"iopub",
            HEADER.as_bytes(),
            PARENT.as_bytes(),
            b"{}",
            br#"{"execution_state":"idle"}"#,
        ]);
        let (channel, msg) = decode_v1(&frame).unwrap();
        assert_eq!(channel, "iopub");
        assert_eq!(msg.msg_type(), "status");
        assert_eq!(msg.parent_msg_id(), Some("p1"));
        assert_eq!(msg.content["execution_state"], "idle");
        assert!(msg.buffers.is_empty());
    }

    #[test]
    fn v1_rejects_truncated_and_inconsistent_frames_without_panicking() {
        let good = v1_by_hand(&[b"shell", HEADER.as_bytes(), b"{}", b"{}", b"{}"]);
        for cut in 0..good.len() {
            assert!(decode_v1(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut backwards = good.clone();
        backwards[16..24].copy_from_slice(&1000u64.to_le_bytes());
        assert!(matches!(
            decode_v1(&backwards),
            Err(WireError::Framing { .. })
        ));
        let mut huge = good.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(decode_v1(&huge), Err(WireError::Framing { .. })));
        let few = v1_by_hand(&[b"shell", HEADER.as_bytes(), b"{}"]);
        assert!(decode_v1(&few).is_err());
        let bad_json = v1_by_hand(&[b"shell", b"{", b"{}", b"{}", b"{}"]);
        assert!(matches!(
            decode_v1(&bad_json),
            Err(WireError::Json { part: "header", .. })
        ));
    }

    #[test]
    fn json_round_trips_and_carries_the_channel() {
        let msg = Message::new("execute_request", json!({"code": "print(1)"}), "sess");
        let text = encode_json("shell", &msg);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["channel"], "shell");
        assert_eq!(v["parent_header"], json!({}));
        let (channel, back) = decode_json(&text).unwrap();
        assert_eq!(channel, "shell");
        assert_eq!(back, msg);
    }

    #[test]
    fn json_from_the_server_with_extra_fields_and_null_parent_decodes() {
        let text = format!(
            r#"{{"channel":"iopub","header":{HEADER},"parent_header":null,"metadata":null,"content":{{"name":"stdout","text":"hi"}},"msg_id":"m1","msg_type":"stream","buffers":[]}}"#
        );
        let (channel, msg) = decode_json(&text).unwrap();
        assert_eq!(channel, "iopub");
        assert_eq!(msg.parent_header, None);
        assert_eq!(msg.metadata, json!({}));
        assert_eq!(msg.content["text"], "hi");
        assert!(decode_json("[1]").is_err());
        assert!(decode_json(&format!(r#"{{"header":{HEADER}}}"#)).is_err());
        assert!(decode_json("{").is_err());
    }

    #[test]
    fn json_binary_frame_with_big_endian_u32_offsets_decodes_its_buffers() {
        let obj = format!(
            r#"{{"channel":"iopub","header":{HEADER},"parent_header":{{}},"metadata":{{}},"content":{{}}}}"#
        );
        let parts: [&[u8]; 3] = [obj.as_bytes(), b"buf-one", b"2"];
        // count = parts, offsets = start of each part.
        let mut frame = (parts.len() as u32).to_be_bytes().to_vec();
        let mut off = 4 * (1 + parts.len() as u32);
        for p in parts {
            frame.extend_from_slice(&off.to_be_bytes());
            off += p.len() as u32;
        }
        for p in parts {
            frame.extend_from_slice(p);
        }
        let (channel, msg) = decode_json_binary(&frame).unwrap();
        assert_eq!(channel, "iopub");
        assert_eq!(
            msg.buffers,
            vec![Bytes::from_static(b"buf-one"), Bytes::from_static(b"2")]
        );
        for cut in 0..12 {
            assert!(decode_json_binary(&frame[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_json_binary_frame_we_encode_decodes_with_its_buffers() {
        let mut msg = Message::new("comm_msg", json!({"data": {}}), "s");
        msg.buffers = vec![Bytes::from_static(b"\x00\x01"), Bytes::from_static(b"xyz")];
        let frame = encode_json_binary("shell", &msg);
        let (channel, back) = decode_json_binary(&frame).unwrap();
        assert_eq!(channel, "shell");
        assert_eq!(back.buffers, msg.buffers);
        assert_eq!(back.header, msg.header);
        assert_eq!(back.content, msg.content);
    }
}
