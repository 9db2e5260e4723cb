//! The Jupyter wire format: message model, multipart codec and HMAC signing.
//!
//! Pure data and bytes: no tokio, no sockets, no processes, and no panics on
//! input from a peer (the one I/O: the text of a content frame read in pieces is read back
//! from the [`RawStore`] the socket reader put it in). A malformed or badly signed multipart is an
//! [`WireError`] that drops that one message.
//!
//! The kernel websocket's framings (v1 binary and JSON) are in [`websocket`].
//!
//! Frames: `[ids…] <IDS|MSG> hmac header parent_header metadata content [buffers…]`.
//! The `§` numbers in this module refer to the wire-protocol section (§1) of the
//! project's Jupyter protocol notes; the upstream spec is linked below.
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/messaging.html#the-wire-protocol>

mod codec;
mod error;
mod escape;
mod execute;
mod message;
mod signing;
mod stream;
mod stream_pieces;
pub mod websocket;

pub use codec::{DELIMITER, StreamedContent, decode, decode_streamed, encode};
pub use error::WireError;
pub use execute::Execute;
pub use message::{Header, Message, PROTOCOL_VERSION, RawText};
pub use signing::{MacStream, Signer};
pub use stream_pieces::{ContentScanner, RawStore, TextSpan};
