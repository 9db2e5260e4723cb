//! The Jupyter wire format: message model, multipart codec and HMAC signing.
//!
//! Pure data and bytes: no tokio, no sockets, no processes, and no panics on
//! input from a peer. A malformed or badly signed multipart is an
//! [`WireError`] that drops that one message.
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/messaging.html#the-wire-protocol>

mod codec;
mod error;
mod message;
mod signing;

pub use codec::{DELIMITER, decode, encode};
pub use error::WireError;
pub use message::{Header, Message, PROTOCOL_VERSION};
pub use signing::Signer;
