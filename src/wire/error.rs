//! Why one multipart could not be turned into a [`crate::wire::Message`].

/// A multipart message that was dropped, and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("no <IDS|MSG> delimiter in a {frames}-frame message")]
    NoDelimiter { frames: usize },
    #[error("{found} frames after the delimiter; at least 5 are needed (signature + 4 JSON dicts)")]
    TooFewFrames { found: usize },
    #[error("message is unsigned but a key is set")]
    Unsigned,
    #[error("signature does not match")]
    BadSignature,
    #[error("invalid JSON in the {part} frame: {detail}")]
    Json { part: &'static str, detail: String },
}
