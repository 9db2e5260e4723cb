//! Why one multipart could not be turned into a [`crate::wire::Message`]
//! (the failure cases of spec §1.1, §1.2 and §1.7).

/// A multipart message that was dropped, and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// No `<IDS|MSG>` frame anywhere (§1.1).
    #[error("no <IDS|MSG> delimiter in a {frames}-frame message")]
    NoDelimiter { frames: usize },
    /// Fewer than signature + 4 JSON frames after the delimiter (§1.1).
    #[error("{found} frames after the delimiter; at least 5 are needed (signature + 4 JSON dicts)")]
    TooFewFrames { found: usize },
    /// Empty signature frame although a key is set (§1.2).
    #[error("message is unsigned but a key is set")]
    Unsigned,
    /// Signature is not hex or does not match the HMAC of the 4 JSON frames (§1.2).
    #[error("signature does not match")]
    BadSignature,
    /// A JSON frame does not parse, or a header lacks string `msg_id`/`msg_type` (§1.3, §1.7).
    #[error("invalid JSON in the {part} frame: {detail}")]
    Json { part: &'static str, detail: String },
    /// A websocket frame whose offsets do not delimit its parts (see `wire::websocket`).
    #[error("malformed websocket frame: {detail}")]
    Framing { detail: String },
}
