//! Identifier newtypes: a run's id (ours, handed to clients) and a message's `msg_id` (the
//! Jupyter header field a reply's `parent_header.msg_id` points back to). Keeping them apart
//! in the type system keeps a run id from being looked up as a message id and back.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The rule for names people choose (session ids, environment names): 1–64 characters from
/// `[A-Za-z0-9._-]`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A run's id, `run-` and 12 hex digits (e.g. `run-3f2a9c01b7de`). Serialized as a string.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// A new random run id.
    pub fn new() -> RunId {
        RunId(format!(
            "run-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RunId {
    fn default() -> RunId {
        RunId::new()
    }
}

impl From<&str> for RunId {
    fn from(s: &str) -> RunId {
        RunId(s.to_string())
    }
}

impl From<String> for RunId {
    fn from(s: String) -> RunId {
        RunId(s)
    }
}

impl Borrow<str> for RunId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Jupyter message's `header.msg_id`, as we sent it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MsgId(String);

impl MsgId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for MsgId {
    fn from(s: &str) -> MsgId {
        MsgId(s.to_string())
    }
}

impl Borrow<str> for MsgId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
