//! Multipart frames <-> [`Message`].

use bytes::Bytes;

use super::{Message, Signer, WireError};

/// The frame separating routing ids from the signed message.
pub const DELIMITER: &[u8] = b"<IDS|MSG>";

/// Frames to send: identities, delimiter, signature, header, parent_header, metadata, content, buffers.
pub fn encode(msg: &Message, signer: &Signer) -> Vec<Bytes> {
    todo!()
}

/// Parse a received multipart. Never panics; any defect is an `Err`.
pub fn decode(frames: Vec<Bytes>, signer: &Signer) -> Result<Message, WireError> {
    todo!()
}
