//! Message authentication (spec §1.2): HMAC-SHA256 over the four JSON frames
//! (header, parent_header, metadata, content) exactly as they travel on the
//! wire, lowercase hex, verified in constant time. Buffers are never signed.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::WireError;

type HmacSha256 = Hmac<Sha256>;

/// Signs and verifies messages with the connection file's `key` (`hmac-sha256`).
///
/// An empty key disables signing: [`Signer::sign`] returns `""` and
/// [`Signer::verify`] accepts any signature frame. `Debug` never prints the key.
#[derive(Clone)]
pub struct Signer {
    /// Keyed HMAC state, cloned for each message; `None` when signing is disabled.
    mac: Option<HmacSha256>,
}

impl Signer {
    /// A signer for `key` (the connection file's `key` as UTF-8 bytes); `b""` disables signing.
    pub fn new(key: &[u8]) -> Signer {
        let mac = (!key.is_empty())
            .then(|| HmacSha256::new_from_slice(key).expect("HMAC accepts keys of any length"));
        Signer { mac }
    }

    /// Whether a key is set, i.e. messages are signed and checked.
    pub fn is_enabled(&self) -> bool {
        self.mac.is_some()
    }

    /// Lowercase hex HMAC of the 4 JSON frames in order; "" when signing is disabled.
    pub fn sign(&self, parts: [&[u8]; 4]) -> String {
        match self.keyed(parts) {
            Some(mac) => hex::encode(mac.finalize().into_bytes()),
            None => String::new(),
        }
    }

    /// Constant-time check of a received hex `signature` over the 4 received JSON frames.
    ///
    /// With signing disabled everything passes. With a key set, an empty signature is
    /// [`WireError::Unsigned`]; bad hex or a wrong digest is [`WireError::BadSignature`].
    pub fn verify(&self, signature: &[u8], parts: [&[u8]; 4]) -> Result<(), WireError> {
        let [header, parent, metadata, content] = parts;
        let mut mac = self.begin([header, parent, metadata]);
        mac.update(content);
        mac.verify(signature)
    }

    /// A signature check over frames that arrive in pieces: the first three JSON frames
    /// (header, parent_header, metadata) now, the content through [`MacStream::update`].
    pub fn begin(&self, parts: [&[u8]; 3]) -> MacStream {
        let mac = self.mac.clone().map(|mut mac| {
            for part in parts {
                mac.update(part);
            }
            mac
        });
        MacStream { mac }
    }

    /// The keyed HMAC fed with `parts`, or `None` when signing is disabled.
    fn keyed(&self, parts: [&[u8]; 4]) -> Option<HmacSha256> {
        let mut mac = self.mac.clone()?;
        for part in parts {
            mac.update(part);
        }
        Some(mac)
    }
}

/// An HMAC being computed over a message whose content frame arrives in pieces (see
/// [`Signer::begin`]); [`MacStream::verify`] checks it like [`Signer::verify`].
pub struct MacStream {
    mac: Option<HmacSha256>,
}

impl MacStream {
    /// Feed the next bytes of the content frame.
    pub fn update(&mut self, bytes: &[u8]) {
        if let Some(mac) = self.mac.as_mut() {
            mac.update(bytes);
        }
    }

    /// Constant-time check of `signature` over everything fed; the errors of
    /// [`Signer::verify`].
    pub fn verify(self, signature: &[u8]) -> Result<(), WireError> {
        let Some(mac) = self.mac else {
            return Ok(());
        };
        if signature.is_empty() {
            return Err(WireError::Unsigned);
        }
        let tag = hex::decode(signature).map_err(|_| WireError::BadSignature)?;
        mac.verify_slice(&tag).map_err(|_| WireError::BadSignature)
    }
}

impl fmt::Debug for MacStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MacStream")
            .field("enabled", &self.mac.is_some())
            .finish()
    }
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("scheme", &"hmac-sha256")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARTS: [&[u8]; 4] = [b"{\"a\":1}", b"{}", b"{}", b"{}"];

    #[test]
    fn sign_then_verify_round_trips() {
        let s = Signer::new(b"secret");
        let sig = s.sign(PARTS);
        assert_eq!(sig.len(), 64);
        assert!(
            sig.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(s.verify(sig.as_bytes(), PARTS), Ok(()));
    }

    #[test]
    fn verify_rejects_other_key_bad_hex_and_truncation() {
        let sig = Signer::new(b"other").sign(PARTS);
        let s = Signer::new(b"secret");
        assert_eq!(
            s.verify(sig.as_bytes(), PARTS),
            Err(WireError::BadSignature)
        );
        assert_eq!(s.verify(b"zz", PARTS), Err(WireError::BadSignature));
        let good = s.sign(PARTS);
        assert_eq!(
            s.verify(&good.as_bytes()[..62], PARTS),
            Err(WireError::BadSignature)
        );
    }

    #[test]
    fn a_content_fed_in_pieces_verifies_like_the_whole_frame() {
        let s = Signer::new(b"secret");
        let content = b"{\"name\": \"stdout\", \"text\": \"abcdefgh\"}";
        let parts: [&[u8]; 4] = [PARTS[0], PARTS[1], PARTS[2], content];
        let sig = s.sign(parts);
        let mut mac = s.begin([PARTS[0], PARTS[1], PARTS[2]]);
        for piece in content.chunks(5) {
            mac.update(piece);
        }
        assert_eq!(mac.verify(sig.as_bytes()), Ok(()));
        let mut short = s.begin([PARTS[0], PARTS[1], PARTS[2]]);
        short.update(&content[..content.len() - 1]);
        assert_eq!(short.verify(sig.as_bytes()), Err(WireError::BadSignature));
    }

    #[test]
    fn empty_signature_with_key_is_unsigned() {
        assert_eq!(
            Signer::new(b"k").verify(b"", PARTS),
            Err(WireError::Unsigned)
        );
    }

    #[test]
    fn empty_key_disables_signing() {
        let s = Signer::new(b"");
        assert!(!s.is_enabled());
        assert_eq!(s.sign(PARTS), "");
        assert_eq!(s.verify(b"", PARTS), Ok(()));
        assert_eq!(s.verify(b"anything", PARTS), Ok(()));
    }

    #[test]
    fn debug_does_not_print_the_key() {
        let dbg = format!("{:?}", Signer::new(b"topsecretkey"));
        let streaming = format!("{:?}", Signer::new(b"topsecretkey").begin([b"", b"", b""]));
        assert!(!streaming.contains("topsecretkey"), "{streaming}");
        assert!(!dbg.contains("topsecretkey"), "{dbg}");
        assert!(dbg.contains("enabled: true"), "{dbg}");
    }
}
