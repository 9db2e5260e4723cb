//! Checking one JWT access token (RFC 9068, RFC 8707, RFC 6750) with `jsonwebtoken`: who it
//! is for and what it grants, or why it is refused.
//!
//! Accepted: a JWS in compact form, at most [`MAX_TOKEN_LEN`] bytes, signed with one of
//! [`ALGORITHMS`] (asymmetric only: `none` and `HS*` are refused) by a key of the issuer's
//! key set ([`super::jwks`]) whose `kid` it names (or, without a `kid`, the one key for its
//! algorithm); `iss` exactly the configured issuer; `aud` the configured audience (or a list
//! holding it); `exp` not past and `nbf` (when present) not ahead, each with
//! [`LEEWAY_S`] seconds of leeway; a non-empty `sub`. Its scopes are the space-separated
//! `scope` claim (or `scp`, a string or list, as some servers write it).

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::OAuthConfig;
use super::jwks::{KeyCache, KeyMiss};
use crate::principal::{Access, MAX_CLAIM_LEN, Principal};

/// Leeway on `exp` and `nbf`, seconds (clock skew between us and the issuer).
pub const LEEWAY_S: u64 = 60;
/// Longest token read, bytes.
pub const MAX_TOKEN_LEN: usize = 16 * 1024;
/// The signing algorithms accepted: [`RSA_ALGORITHMS`](super::jwks::RSA_ALGORITHMS), ES256, ES384 and EdDSA.
pub const ALGORITHMS: [Algorithm; 9] = {
    let r = super::jwks::RSA_ALGORITHMS;
    [
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        Algorithm::ES256,
        Algorithm::ES384,
        Algorithm::EdDSA,
    ]
};

/// A valid token: its subject, and the access its scopes grant (`None`: none of ours).
#[derive(Debug, Clone)]
pub struct Verified {
    pub principal: Principal,
    pub access: Option<Access>,
}

/// Why a token is refused. None of them carries anything from the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenProblem {
    /// Not a JWS in compact form, a claim of the wrong type, or too long.
    Malformed,
    /// `none`, `HS*`, an unknown algorithm, or one the key is not for.
    Algorithm,
    /// Its `kid` is not among the issuer's keys (also after a refetch).
    UnknownKey,
    /// The signature does not verify.
    Signature,
    Expired,
    NotYetValid,
    /// `iss` is not the configured issuer.
    Issuer,
    /// `aud` does not hold the configured audience.
    Audience,
    /// A required claim is missing: `exp`, `iss`, `aud` or `sub`.
    MissingClaim(&'static str),
    /// The issuer's keys cannot be had right now (503, not 401).
    KeysUnavailable(String),
}

impl TokenProblem {
    /// A short word for the log line.
    pub fn kind(&self) -> &'static str {
        match self {
            TokenProblem::Malformed => "malformed token",
            TokenProblem::Algorithm => "algorithm not accepted",
            TokenProblem::UnknownKey => "unknown signing key",
            TokenProblem::Signature => "bad signature",
            TokenProblem::Expired => "expired token",
            TokenProblem::NotYetValid => "token not valid yet",
            TokenProblem::Issuer => "another issuer",
            TokenProblem::Audience => "another audience",
            TokenProblem::MissingClaim(_) => "missing claim",
            TokenProblem::KeysUnavailable(_) => "issuer keys unavailable",
        }
    }

    /// The RFC 6750 `error_description`: what is wrong, in words (no quotes or backslashes).
    pub fn description(&self) -> String {
        match self {
            TokenProblem::Malformed => "the token is not a signed JWT access token".into(),
            TokenProblem::Algorithm => {
                "the token's signing algorithm is not accepted (asymmetric only: RS*, PS*, ES256, ES384, EdDSA)".into()
            }
            TokenProblem::UnknownKey => {
                "the token is signed with a key (kid) the issuer does not publish".into()
            }
            TokenProblem::Signature => "the token's signature does not verify".into(),
            TokenProblem::Expired => "the token has expired".into(),
            TokenProblem::NotYetValid => "the token is not valid yet (nbf)".into(),
            TokenProblem::Issuer => {
                "the token was issued by another authorization server (iss)".into()
            }
            TokenProblem::Audience => {
                "the token is for another resource (aud); request one for this server".into()
            }
            TokenProblem::MissingClaim(c) => format!("the token has no {c} claim"),
            TokenProblem::KeysUnavailable(why) => why.replace(['"', '\\'], "'"),
        }
    }
}

/// The claims read beyond those `jsonwebtoken` validates.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Scp>,
    #[serde(default)]
    preferred_username: Option<String>,
    #[serde(default)]
    email: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scp {
    One(String),
    Many(Vec<String>),
}

/// Check `token` as the module docs say. Errors: [`TokenProblem`].
pub(super) async fn verify(
    token: &str,
    config: &OAuthConfig,
    keys: &KeyCache,
) -> Result<Verified, TokenProblem> {
    if token.len() > MAX_TOKEN_LEN || token.split('.').count() != 3 {
        return Err(TokenProblem::Malformed);
    }
    let header = jsonwebtoken::decode_header(token).map_err(|_| header_problem(token))?;
    if !ALGORITHMS.contains(&header.alg) {
        return Err(TokenProblem::Algorithm);
    }
    let key = keys
        .key(header.kid.as_deref(), header.alg)
        .await
        .map_err(|miss| match miss {
            KeyMiss::Unknown => TokenProblem::UnknownKey,
            KeyMiss::WrongAlgorithm => TokenProblem::Algorithm,
            KeyMiss::Unavailable(e) => TokenProblem::KeysUnavailable(e.to_string()),
        })?;
    let mut validation = Validation::new(header.alg);
    validation.leeway = LEEWAY_S;
    validation.validate_nbf = true;
    validation.set_issuer(&[&config.issuer]);
    validation.set_audience(&[&config.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .map_err(|e| problem(e.kind()))?
        .claims;
    let sub = claims.sub.as_deref().unwrap_or_default();
    if sub.is_empty() {
        return Err(TokenProblem::MissingClaim("sub"));
    }
    if sub.len() > MAX_CLAIM_LEN {
        return Err(TokenProblem::Malformed);
    }
    let granted: Vec<&str> = match (&claims.scope, &claims.scp) {
        (Some(s), _) => s.split_whitespace().collect(),
        (None, Some(Scp::One(s))) => s.split_whitespace().collect(),
        (None, Some(Scp::Many(list))) => list.iter().map(String::as_str).collect(),
        (None, None) => Vec::new(),
    };
    let name = claims
        .preferred_username
        .as_deref()
        .or(claims.email.as_deref());
    Ok(Verified {
        principal: Principal::oauth(&config.issuer, sub, name),
        access: config.scopes.access(granted),
    })
}

/// Why a token's header does not read: an `alg` outside the accepted ones (`none`, `HS*`,
/// unknown names) is [`TokenProblem::Algorithm`], anything else [`TokenProblem::Malformed`].
fn header_problem(token: &str) -> TokenProblem {
    use base64::Engine as _;
    let first = token.split('.').next().unwrap_or_default();
    let alg = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|h| h.get("alg").and_then(|a| a.as_str()).map(str::to_string));
    match alg {
        Some(_) => TokenProblem::Algorithm,
        None => TokenProblem::Malformed,
    }
}

/// The problem a `jsonwebtoken` error is.
fn problem(kind: &ErrorKind) -> TokenProblem {
    match kind {
        ErrorKind::InvalidSignature => TokenProblem::Signature,
        ErrorKind::ExpiredSignature => TokenProblem::Expired,
        ErrorKind::ImmatureSignature => TokenProblem::NotYetValid,
        ErrorKind::InvalidIssuer => TokenProblem::Issuer,
        ErrorKind::InvalidAudience => TokenProblem::Audience,
        ErrorKind::MissingRequiredClaim(c) => TokenProblem::MissingClaim(match c.as_str() {
            "exp" => "exp",
            "iss" => "iss",
            "aud" => "aud",
            _ => "sub",
        }),
        ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::UnsupportedAlgorithm => TokenProblem::Algorithm,
        ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => TokenProblem::Signature,
        _ => TokenProblem::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_fit_for_a_quoted_header_value() {
        let all = [
            TokenProblem::Malformed,
            TokenProblem::Algorithm,
            TokenProblem::UnknownKey,
            TokenProblem::Signature,
            TokenProblem::Expired,
            TokenProblem::NotYetValid,
            TokenProblem::Issuer,
            TokenProblem::Audience,
            TokenProblem::MissingClaim("sub"),
            TokenProblem::KeysUnavailable("GET \"x\" \\ failed".into()),
        ];
        for p in all {
            let d = p.description();
            assert!(!d.contains(['"', '\\']) && d.is_ascii(), "{d}");
            assert!(axum::http::HeaderValue::from_str(&d).is_ok());
        }
    }

    #[test]
    fn an_unaccepted_alg_in_the_header_is_an_algorithm_problem() {
        use base64::Engine as _;
        let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let none = format!("{}.{}.", enc(r#"{"alg":"none"}"#), enc("{}"));
        assert_eq!(header_problem(&none), TokenProblem::Algorithm);
        assert_eq!(header_problem("garbage.x.y"), TokenProblem::Malformed);
    }
}
