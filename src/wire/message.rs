//! The Jupyter message model (spec §1.1, §1.3): header, parent header, metadata,
//! content and buffers as plain data, plus constructors for the messages we send.
//! Content stays a `serde_json::Value`; typing it is the consumer's job (§1.7).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::stream::RawText;

/// Protocol version written into the headers we send.
pub const PROTOCOL_VERSION: &str = "5.4";

/// A message header (spec §1.3), e.g.
/// `{"msg_id","session","username","date","msg_type","version"}`.
///
/// Only `msg_id` and `msg_type` are required when parsing; the other fields default
/// to `""`. Unknown fields are ignored; `date` is kept as text and never validated.
/// `subshell_id` (JEP 91, kernel subshells) is written only when set.
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
    /// The kernel subshell a shell request runs in (JEP 91); `None`: the main shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subshell_id: Option<String>,
}

/// One Jupyter message (spec §1.1). `parent_header` is `None` for `{}` and `null`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// ZMQ routing or topic frames before the delimiter (empty on a DEALER).
    pub identities: Vec<Bytes>,
    /// This message's own header.
    pub header: Header,
    /// The header of the request this message answers; `None` when unparented.
    pub parent_header: Option<Header>,
    /// `{}` when absent or `null`.
    pub metadata: Value,
    /// `{}` when absent or `null`.
    pub content: Value,
    /// Raw binary frames after the 4 JSON dicts; not covered by the signature.
    pub buffers: Vec<Bytes>,
    /// The `text` of a large `stream` message, left in its frame (see [`RawText`]); its
    /// `content` then has no `text`. Read a stream's text with [`Message::stream_text`].
    pub raw_text: Option<RawText>,
}

impl Header {
    /// A fresh header for a message we send (see [`Message::new`]).
    fn new(msg_type: &str, session: &str) -> Header {
        Header {
            msg_id: uuid::Uuid::new_v4().to_string(),
            session: session.to_owned(),
            username: std::env::var("USER")
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "kernel-mcp".to_owned()),
            date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            msg_type: msg_type.to_owned(),
            version: PROTOCOL_VERSION.to_owned(),
            subshell_id: None,
        }
    }
}

impl Message {
    /// A new request: fresh UUIDv4 msg_id, the given client `session`, username
    /// `$USER` (or `"kernel-mcp"`), date now (UTC, RFC 3339, microseconds, `Z`),
    /// version [`PROTOCOL_VERSION`]; no parent, metadata `{}`, no identities or buffers.
    pub fn new(msg_type: &str, content: Value, session: &str) -> Message {
        Message {
            identities: Vec::new(),
            header: Header::new(msg_type, session),
            parent_header: None,
            metadata: Value::Object(Default::default()),
            content,
            buffers: Vec::new(),
            raw_text: None,
        }
    }
    /// The same, with `parent_header` set (e.g. an `input_reply` to an `input_request`).
    pub fn reply_to(parent: &Header, msg_type: &str, content: Value, session: &str) -> Message {
        Message {
            parent_header: Some(parent.clone()),
            ..Message::new(msg_type, content, session)
        }
    }
    /// `header.msg_type`.
    pub fn msg_type(&self) -> &str {
        &self.header.msg_type
    }
    /// `header.msg_id`.
    pub fn msg_id(&self) -> &str {
        &self.header.msg_id
    }
    /// A `stream` message's text in order, in pieces of whole characters: `content.text`,
    /// or the [`RawText`] left in the frame. Nothing for a message without text.
    pub fn stream_text(&self, mut f: impl FnMut(&str)) {
        match &self.raw_text {
            Some(raw) => raw.for_each_piece(f),
            None => f(self.content["text"].as_str().unwrap_or_default()),
        }
    }
    /// `content`, with the [`RawText`] put back as its `text` when there is one (for
    /// re-encoding a received message).
    pub fn full_content(&self) -> std::borrow::Cow<'_, Value> {
        match (&self.raw_text, &self.content) {
            (Some(raw), Value::Object(map)) => {
                let mut map = map.clone();
                map.insert("text".into(), Value::String(raw.to_text()));
                std::borrow::Cow::Owned(Value::Object(map))
            }
            _ => std::borrow::Cow::Borrowed(&self.content),
        }
    }
    /// `parent_header.msg_id`, the only correlation key we trust.
    pub fn parent_msg_id(&self) -> Option<&str> {
        self.parent_header
            .as_ref()
            .map(|h| h.msg_id.as_str())
            .filter(|s| !s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn new_fills_a_fresh_header_without_parent() {
        let a = Message::new("kernel_info_request", json!({}), "sess-1");
        let b = Message::new("kernel_info_request", json!({}), "sess-1");
        assert_ne!(a.msg_id(), b.msg_id());
        assert!(uuid::Uuid::parse_str(a.msg_id()).is_ok());
        assert_eq!(a.header.session, "sess-1");
        assert_eq!(a.header.version, PROTOCOL_VERSION);
        assert!(!a.header.username.is_empty());
        assert_eq!(a.parent_header, None);
        assert_eq!(a.parent_msg_id(), None);
        assert_eq!(a.metadata, json!({}));
        assert!(a.identities.is_empty() && a.buffers.is_empty());
    }

    #[test]
    fn new_date_is_utc_rfc3339_with_microseconds() {
        let m = Message::new("x", json!({}), "s");
        let d = &m.header.date;
        assert!(d.ends_with('Z'), "{d}");
        // 2026-11-30T11:24:48.064504Z
        assert_eq!(d.len(), 27, "{d}");
        assert!(chrono::DateTime::parse_from_rfc3339(d).is_ok(), "{d}");
    }

    #[test]
    fn reply_to_sets_parent_header() {
        let req = Message::new("input_request", json!({"prompt": "? "}), "kernel");
        let rep = Message::reply_to(&req.header, "input_reply", json!({"value": "1"}), "client");
        assert_eq!(rep.parent_header.as_ref(), Some(&req.header));
        assert_eq!(rep.parent_msg_id(), Some(req.msg_id()));
        assert_eq!(rep.header.session, "client");
        assert_ne!(rep.msg_id(), req.msg_id());
    }
}
