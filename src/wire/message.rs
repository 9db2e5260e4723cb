//! The Jupyter message model: header, parent header, metadata, content, buffers.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Protocol version written into the headers we send.
pub const PROTOCOL_VERSION: &str = "5.4";

/// A message header. Unknown fields are ignored; `date` is kept as text and never validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub msg_id: String,
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub date: String,
    pub msg_type: String,
    #[serde(default)]
    pub version: String,
}

/// One Jupyter message. `parent_header` is `None` for `{}` and `null`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// ZMQ routing or topic frames before the delimiter (empty on a DEALER).
    pub identities: Vec<Bytes>,
    pub header: Header,
    pub parent_header: Option<Header>,
    /// `{}` when absent or `null`.
    pub metadata: Value,
    /// `{}` when absent or `null`.
    pub content: Value,
    pub buffers: Vec<Bytes>,
}

impl Message {
    /// A new request: fresh UUID msg_id, the given client `session`, date now (UTC).
    pub fn new(msg_type: &str, content: Value, session: &str) -> Message {
        todo!()
    }
    /// The same, with `parent_header` set (e.g. an `input_reply` to an `input_request`).
    pub fn reply_to(parent: &Header, msg_type: &str, content: Value, session: &str) -> Message {
        todo!()
    }
    pub fn msg_type(&self) -> &str {
        &self.header.msg_type
    }
    pub fn msg_id(&self) -> &str {
        &self.header.msg_id
    }
    /// `parent_header.msg_id`, the only correlation key we trust.
    pub fn parent_msg_id(&self) -> Option<&str> {
        self.parent_header.as_ref().map(|h| h.msg_id.as_str()).filter(|s| !s.is_empty())
    }
}
