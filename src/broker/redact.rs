//! Redaction of a registry's secret values (what `${VAR}` expanded to, header and env values)
//! from text the broker hands back to a kernel or writes to its log: errors from a downstream
//! client and the tail of a stdio server's stderr.

use std::sync::Arc;

/// Secrets shorter than this are not redacted (they would blank out ordinary words).
const MIN_SECRET_CHARS: usize = 4;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Replaces a registry's secret values in text. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Arc<Vec<String>>,
}

impl Redactor {
    pub fn new(mut secrets: Vec<String>) -> Redactor {
        secrets.retain(|s| s.chars().count() >= MIN_SECRET_CHARS);
        // Longest first, so a value containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor {
            secrets: Arc::new(secrets),
        }
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.secrets.iter() {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_longest_first_and_short_ones_left() {
        let r = Redactor::new(vec![
            "tok".into(),
            "tok-123".into(),
            "Bearer tok-123".into(),
        ]);
        assert_eq!(
            r.redact("401 for Bearer tok-123 (tok-123)"),
            "401 for [redacted] ([redacted])"
        );
        assert_eq!(r.redact("a tok b"), "a tok b");
    }
}
