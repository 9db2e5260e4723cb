//! Golden vector: a message signed by jupyter_client 8.10.0 (the reference
//! implementation, spec §1.2) must verify and decode with our codec.
//!
//! Produced in a scratch venv (`python3 -m venv .venv-vec && .venv-vec/bin/pip install
//! jupyter_client`, Python 3.11.7, jupyter_client 8.10.0) with:
//!
//! ```python
//! from jupyter_client.session import Session
//! s = Session(key=b"8493b6e1-db4c689f2c9e145bee03e806", signature_scheme="hmac-sha256")
//! msg = {
//!     "header": {"msg_id": "c6d3a1e2-0b7f-4f4e-9d2a-5b1e8f3c9a10", "session": "7f1c2b3a-kernel",
//!                "username": "alice", "date": "2026-11-30T11:24:48.064504Z",
//!                "msg_type": "stream", "version": "5.4"},
//!     "parent_header": {"msg_id": "0a1b2c3d-req", "session": "client-sess", "username": "kernel-mcp",
//!                       "date": "2026-11-30T11:24:47.000001Z", "msg_type": "execute_request",
//!                       "version": "5.4"},
//!     "metadata": {},
//!     "content": {"name": "stdout", "text": "h\u00e9llo \u2713\n"},
//! }
//! for f in s.serialize(msg, ident=[b"stream.stdout"]):
//!     print(repr(f))
//! ```
//!
//! The frames below are that output verbatim. The signature was cross-checked with
//! `hmac.new(key, b"".join(frames[3:7]), hashlib.sha256).hexdigest()`.

use bytes::Bytes;
use kernel_mcp::wire::{DELIMITER, Signer, WireError, decode};
use serde_json::json;

const KEY: &[u8] = b"8493b6e1-db4c689f2c9e145bee03e806";
const SIGNATURE: &str = "c917a94a4fb73d0d7c11c54f98534be4a9a622c6dba041dd8cfeffb5719ea21c";
const HEADER: &[u8] = b"{\"msg_id\": \"c6d3a1e2-0b7f-4f4e-9d2a-5b1e8f3c9a10\", \"session\": \"7f1c2b3a-kernel\", \"username\": \"alice\", \"date\": \"2026-11-30T11:24:48.064504Z\", \"msg_type\": \"stream\", \"version\": \"5.4\"}";
const PARENT: &[u8] = b"{\"msg_id\": \"0a1b2c3d-req\", \"session\": \"client-sess\", \"username\": \"kernel-mcp\", \"date\": \"2026-11-30T11:24:47.000001Z\", \"msg_type\": \"execute_request\", \"version\": \"5.4\"}";
const METADATA: &[u8] = b"{}";
const CONTENT: &[u8] = b"{\"name\": \"stdout\", \"text\": \"h\xc3\xa9llo \xe2\x9c\x93\\n\"}";

fn python_frames() -> Vec<Bytes> {
    [
        b"stream.stdout".as_slice(),
        DELIMITER,
        SIGNATURE.as_bytes(),
        HEADER,
        PARENT,
        METADATA,
        CONTENT,
    ]
    .into_iter()
    .map(Bytes::from_static)
    .collect()
}

#[test]
fn signer_reproduces_jupyter_client_signature() {
    let sig = Signer::new(KEY).sign([HEADER, PARENT, METADATA, CONTENT]);
    assert_eq!(sig, SIGNATURE);
}

#[test]
fn jupyter_client_message_decodes_and_verifies() {
    let msg = decode(python_frames(), &Signer::new(KEY)).expect("valid vector");
    assert_eq!(msg.identities, vec![Bytes::from_static(b"stream.stdout")]);
    assert_eq!(msg.msg_type(), "stream");
    assert_eq!(msg.msg_id(), "c6d3a1e2-0b7f-4f4e-9d2a-5b1e8f3c9a10");
    assert_eq!(msg.header.session, "7f1c2b3a-kernel");
    assert_eq!(msg.header.date, "2026-11-30T11:24:48.064504Z");
    assert_eq!(msg.parent_msg_id(), Some("0a1b2c3d-req"));
    assert_eq!(msg.metadata, json!({}));
    assert_eq!(
        msg.content,
        json!({"name": "stdout", "text": "h\u{e9}llo \u{2713}\n"})
    );
    assert!(msg.buffers.is_empty());
}

#[test]
fn jupyter_client_message_fails_with_another_key() {
    let err = decode(python_frames(), &Signer::new(b"wrong-key")).unwrap_err();
    assert_eq!(err, WireError::BadSignature);
}
