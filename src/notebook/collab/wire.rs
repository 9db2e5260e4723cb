//! The messages of a collaboration room's websocket, one per binary frame, as
//! `jupyter_server_ydoc` (over `pycrdt.websocket`) and JupyterLab's providers exchange them.
//!
//! A message starts with a varuint type: `0` y-sync (then a varuint step: `0` sync step 1
//! carrying a state vector, `1` sync step 2 and `2` update, each carrying a v1 update as a
//! varuint-length buffer), `1` awareness (a buffer holding an awareness update: per client
//! its id, clock and JSON state), `2` Jupyter's own JSON messages (a varuint-length string:
//! `{"type": "save", "responseTo", "status"}`, `{"type": "conflict"}`; the client asks for a
//! save with `2`, the string `save` and a varuint request id), `3` an awareness query. Other
//! types are ignored. Jupyter's type `2` is y-protocols' "auth", which is why frames are read
//! here rather than by `yrs::sync::Message` (which would read Jupyter's string as a
//! permission flag).
//!
//! Decoding never panics and never allocates past the frame: every length is checked
//! against the bytes that are there.
//!
//! Protocols: <https://github.com/yjs/y-protocols/blob/master/PROTOCOL.md>.

use serde_json::Value;
use yrs::StateVector;
use yrs::encoding::read::{Cursor, Read};
use yrs::encoding::write::Write;
use yrs::sync::awareness::AwarenessUpdate;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::{Encode, Encoder, EncoderV1};

/// Message type: y-sync.
const SYNC: u8 = 0;
/// Message type: awareness.
const AWARENESS: u8 = 1;
/// Message type: Jupyter's JSON messages.
const RAW: u8 = 2;
/// Message type: awareness query.
const QUERY_AWARENESS: u8 = 3;

const STEP1: u8 = 0;
const STEP2: u8 = 1;
const UPDATE: u8 = 2;

/// One message from the room.
#[derive(Debug)]
pub enum Incoming {
    /// The peer's state vector: answer with what it lacks ([`sync_step2`]).
    SyncStep1(StateVector),
    /// What we lacked, in answer to our step 1 (a v1 update).
    SyncStep2(Vec<u8>),
    /// A change made by someone (a v1 update).
    Update(Vec<u8>),
    Awareness(AwarenessUpdate),
    /// Jupyter's JSON message (a save's answer, a conflict notice).
    Raw(Value),
    AwarenessQuery,
    /// A type this client does not know: ignored.
    Other(u8),
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed collaboration message: {0}")]
pub struct WireError(pub String);

fn err(e: impl std::fmt::Display) -> WireError {
    WireError(e.to_string())
}

/// Read one frame.
///
/// Errors: [`WireError`] naming what was wrong (truncated, an unknown sync step, a state
/// vector or awareness update that does not decode, a JSON message that is not JSON).
pub fn decode(frame: &[u8]) -> Result<Incoming, WireError> {
    // The CRDT library asserts (in debug builds) that client ids fit 53 bits; a peer's bytes
    // must not be able to trip that.
    std::panic::catch_unwind(|| decode_unguarded(frame))
        .unwrap_or_else(|_| Err(WireError("a value out of range".into())))
}

fn decode_unguarded(frame: &[u8]) -> Result<Incoming, WireError> {
    let mut cur = Cursor::new(frame);
    let kind: u8 = cur.read_var().map_err(err)?;
    match kind {
        SYNC => {
            let step: u8 = cur.read_var().map_err(err)?;
            let body = cur.read_buf().map_err(err)?;
            match step {
                STEP1 => Ok(Incoming::SyncStep1(
                    StateVector::decode_v1(plausible(body)?).map_err(err)?,
                )),
                STEP2 => Ok(Incoming::SyncStep2(body.to_vec())),
                UPDATE => Ok(Incoming::Update(body.to_vec())),
                n => Err(WireError(format!("unknown sync step {n}"))),
            }
        }
        AWARENESS => {
            let body = cur.read_buf().map_err(err)?;
            Ok(Incoming::Awareness(
                AwarenessUpdate::decode_v1(plausible(body)?).map_err(err)?,
            ))
        }
        RAW => {
            let text = cur.read_string().map_err(err)?;
            Ok(Incoming::Raw(serde_json::from_str(text).map_err(err)?))
        }
        QUERY_AWARENESS => Ok(Incoming::AwarenessQuery),
        n => Ok(Incoming::Other(n)),
    }
}

/// `body` when the count it starts with could be true (every entry takes at least one
/// byte), so a few bytes claiming a billion entries reserve nothing.
fn plausible(body: &[u8]) -> Result<&[u8], WireError> {
    let count: u64 = Cursor::new(body).read_var().map_err(err)?;
    if count > body.len() as u64 {
        return Err(WireError(format!(
            "{count} entries announced in {} bytes",
            body.len()
        )));
    }
    Ok(body)
}

fn sync(step: u8, body: &[u8]) -> Vec<u8> {
    let mut enc = EncoderV1::new();
    enc.write_var(SYNC);
    enc.write_var(step);
    enc.write_buf(body);
    enc.to_vec()
}

/// Sync step 1: our state vector (the peer answers with what we lack).
pub fn sync_step1(sv: &StateVector) -> Vec<u8> {
    sync(STEP1, &sv.encode_v1())
}

/// Sync step 2: what the peer lacks (a v1 update), in answer to its step 1.
pub fn sync_step2(update: &[u8]) -> Vec<u8> {
    sync(STEP2, update)
}

/// A change of ours (a v1 update).
pub fn update(update: &[u8]) -> Vec<u8> {
    sync(UPDATE, update)
}

/// Our awareness state (or its removal).
pub fn awareness(update: &AwarenessUpdate) -> Vec<u8> {
    let mut enc = EncoderV1::new();
    enc.write_var(AWARENESS);
    enc.write_buf(update.encode_v1());
    enc.to_vec()
}

/// Ask the server to save the document to its file now; it answers with a
/// `{"type": "save", "responseTo": id, "status": "success" | "skipped" | "failed"}`.
pub fn save(id: u64) -> Vec<u8> {
    let mut enc = EncoderV1::new();
    enc.write_var(RAW);
    enc.write_string("save");
    enc.write_var(id);
    enc.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use yrs::ClientID;
    use yrs::sync::awareness::AwarenessUpdateEntry;

    #[test]
    fn our_messages_read_back_as_what_they_say() {
        let mut sv = StateVector::default();
        sv.set_max(ClientID::new(7), 42);
        match decode(&sync_step1(&sv)).unwrap() {
            Incoming::SyncStep1(got) => assert_eq!(got.get(&ClientID::new(7)), 42),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(decode(&sync_step2(b"\x00\x00")).unwrap(), Incoming::SyncStep2(b) if b == b"\x00\x00")
        );
        assert!(
            matches!(decode(&update(b"\x01\x02")).unwrap(), Incoming::Update(b) if b == b"\x01\x02")
        );
        let mut clients = HashMap::new();
        clients.insert(
            ClientID::new(9),
            AwarenessUpdateEntry {
                clock: 3,
                json: r#"{"user":{"name":"x"}}"#.into(),
            },
        );
        let aw = AwarenessUpdate { clients };
        match decode(&awareness(&aw)).unwrap() {
            Incoming::Awareness(got) => assert_eq!(got, aw),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jupyters_json_messages_are_not_read_as_auth() {
        // What jupyter_server_ydoc sends after a save: type 2, then a JSON string.
        let json = r#"{"type": "save", "responseTo": 1, "status": "success"}"#;
        let mut frame = vec![RAW, json.len() as u8];
        frame.extend_from_slice(json.as_bytes());
        match decode(&frame).unwrap() {
            Incoming::Raw(v) => assert_eq!(v["status"], "success"),
            other => panic!("{other:?}"),
        }
        // Our save request: 2, "save", id.
        assert_eq!(save(5), [2, 4, b's', b'a', b'v', b'e', 5]);
    }

    #[test]
    fn truncated_or_garbled_frames_are_errors_not_panics() {
        for frame in [
            &[][..],
            &[0],
            &[0, 0],
            &[0, 0, 200, 1],
            &[0, 9, 0],
            &[1, 5, 1, 2],
            &[1, 3, 0xff, 0xff, 0xff],
            &[2, 3, b'{', b'x', b'}'],
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
            // A billion awareness entries announced in four bytes.
            &[1, 5, 0x80, 0x94, 0xeb, 0xdc, 0x03],
        ] {
            assert!(decode(frame).is_err(), "{frame:?}");
        }
        assert!(matches!(decode(&[125, 0]).unwrap(), Incoming::Other(125)));
        // A client id past 53 bits, in an awareness update and in a state vector: no panic
        // (an error in debug builds, where the library asserts; read masked in release).
        let mut big = vec![1, 12, 1];
        big.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]);
        big.extend([1, 0]);
        let _ = decode(&big);
        let mut sv = vec![0, 0, 12, 1];
        sv.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]);
        sv.push(1);
        let _ = decode(&sv);
    }
}
