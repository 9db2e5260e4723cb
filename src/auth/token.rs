//! The static secret of an HTTP face, and the ways a request may present a token.
//!
//! A [`Token`] never prints (`Debug` is redacted, there is no `Display`) and is compared in
//! constant time. [`presented`] is the one place that reads a token out of a request (the
//! static token or an OAuth access token alike), for the [`Presentation`]s a face accepts:
//! MCP at `/mcp` takes `Authorization: Bearer …`; Jupyter's clients also send
//! `Authorization: token …` and `?token=…`, which the Jupyter face accepts by listing them.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::{HeaderMap, Uri, header};
use subtle::ConstantTimeEq;

/// A bearer secret. Construct with [`Token::new`], [`Token::read_file`] or
/// [`Token::generate`].
#[derive(Clone)]
pub struct Token(Arc<str>);

/// Why a token cannot be had. Messages never contain a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "the token is empty; set {origin} to a long random string (e.g. `openssl rand -hex 32`)"
    )]
    Empty { origin: &'static str },
    #[error("cannot read the token file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the token file {path} is empty; put a long random string in it (e.g. `openssl rand -hex 32 > {path}`)"
    )]
    EmptyFile { path: PathBuf },
    #[error("cannot write the token file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Token {
    /// `s` without surrounding whitespace. `origin` names where it came from, for the error.
    /// Errors: [`TokenError::Empty`].
    pub fn new(s: &str, origin: &'static str) -> Result<Token, TokenError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(TokenError::Empty { origin });
        }
        Ok(Token(Arc::from(t)))
    }

    /// The first line of the file at `path`, trimmed.
    /// Errors: [`TokenError::Read`], [`TokenError::EmptyFile`].
    pub fn read_file(path: &Path) -> Result<Token, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let first = text.lines().next().unwrap_or_default().trim();
        if first.is_empty() {
            return Err(TokenError::EmptyFile {
                path: path.to_path_buf(),
            });
        }
        Ok(Token(Arc::from(first)))
    }

    /// A fresh random token: 64 hex digits (244 random bits, from two v4 UUIDs, the same
    /// source as a kernel's connection key).
    pub fn generate() -> Token {
        let s = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Token(Arc::from(s))
    }

    /// The secret itself, to write it to its file or a header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token; the time taken does not depend on where they differ.
    pub fn matches(&self, given: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(given.as_bytes()))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A way a request may carry the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presentation {
    /// `Authorization: Bearer <token>` (MCP, RFC 6750).
    Bearer,
    /// `Authorization: token <token>` (Jupyter Server's clients).
    JupyterHeader,
    /// `?token=<token>` in the query (Jupyter's browser and websocket clients).
    Query,
}

/// The tokens a request presents in the accepted ways, in the order of `accepted`.
pub fn presented<'a>(
    headers: &'a HeaderMap,
    uri: &'a Uri,
    accepted: &[Presentation],
) -> Vec<Cow<'a, str>> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '));
    let mut found = Vec::new();
    for way in accepted {
        match way {
            Presentation::Bearer | Presentation::JupyterHeader => {
                let scheme = if *way == Presentation::Bearer {
                    "bearer"
                } else {
                    "token"
                };
                if let Some((s, given)) = authorization
                    && s.eq_ignore_ascii_case(scheme)
                {
                    found.push(Cow::Borrowed(given.trim()));
                }
            }
            Presentation::Query => {
                let pairs = uri.query().unwrap_or_default().split('&');
                for value in pairs.filter_map(|p| p.strip_prefix("token=")) {
                    found.push(percent_decode(value));
                }
            }
        }
    }
    found
}

/// `application/x-www-form-urlencoded` decoding of one value (`+` is a space, `%XX` a byte);
/// a malformed escape is kept as it is.
fn percent_decode(s: &str) -> Cow<'_, str> {
    if s.contains(['%', '+']) {
        Cow::Owned(decode_form(s))
    } else {
        Cow::Borrowed(s)
    }
}

/// The decoding loop of [`percent_decode`].
fn decode_form(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'+' {
            out.push(b' ');
        } else if b == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(v) = u8::from_str_radix(hex, 16)
        {
            out.push(v);
            i += 2;
        } else {
            out.push(b);
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, v.parse().unwrap());
        h
    }

    #[test]
    fn only_the_exact_token_matches_and_debug_hides_it() {
        let t = Token::new(" s3cret\n", "--token").unwrap();
        assert!(t.matches("s3cret"));
        assert!(!t.matches("s3cre"));
        assert!(!t.matches("s3cret2"));
        assert!(!format!("{t:?}").contains("s3cret"));
        assert!(matches!(
            Token::new("  ", "KERNEL_MCP_TOKEN"),
            Err(TokenError::Empty { .. })
        ));
        let g = Token::generate();
        assert_eq!(g.expose().len(), 64);
        assert!(g.expose().chars().all(|c| c.is_ascii_hexdigit()));
        assert!(!g.matches(Token::generate().expose()));
    }

    #[test]
    fn a_token_file_gives_its_first_line_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t");
        std::fs::write(&f, "abc\nrest\n").unwrap();
        assert!(Token::read_file(&f).unwrap().matches("abc"));
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(
            Token::read_file(&f),
            Err(TokenError::EmptyFile { .. })
        ));
        assert!(matches!(
            Token::read_file(&dir.path().join("none")),
            Err(TokenError::Read { .. })
        ));
    }

    #[test]
    fn each_presentation_is_read_only_when_accepted() {
        let uri: Uri = "/api/kernels?x=1&token=a%2Bb+c".parse().unwrap();
        let none = HeaderMap::new();
        assert_eq!(presented(&none, &uri, &[Presentation::Query]), ["a+b c"]);
        assert!(presented(&none, &uri, &[Presentation::Bearer]).is_empty());
        let bearer = headers("Bearer xyz");
        let plain: Uri = "/mcp".parse().unwrap();
        assert_eq!(presented(&bearer, &plain, &[Presentation::Bearer]), ["xyz"]);
        assert!(presented(&bearer, &plain, &[Presentation::JupyterHeader]).is_empty());
        let jupyter = headers("token xyz");
        assert!(presented(&jupyter, &plain, &[Presentation::Bearer]).is_empty());
        assert_eq!(
            presented(
                &jupyter,
                &plain,
                &[Presentation::Bearer, Presentation::JupyterHeader]
            ),
            ["xyz"]
        );
        assert_eq!(decode_form("%zz%4"), "%zz%4");
    }
}
