//! HMAC-SHA256 over the four JSON frames; constant-time verification.

/// Signs and verifies messages with the connection file's `key`.
/// An empty key disables signing (empty signature frame, no checks).
#[derive(Clone)]
pub struct Signer {}

impl Signer {
    pub fn new(key: &[u8]) -> Signer {
        todo!()
    }
    /// Lowercase hex HMAC of the 4 JSON frames in order; "" when signing is disabled.
    pub fn sign(&self, parts: [&[u8]; 4]) -> String {
        todo!()
    }
    /// Constant-time check of a received hex signature.
    pub fn verify(&self, signature: &[u8], parts: [&[u8]; 4]) -> Result<(), crate::wire::WireError> {
        todo!()
    }
}
