//! The issuer's signing keys: discovered from its metadata, fetched, cached, refetched.
//!
//! - Discovery (RFC 8414 §3, then OpenID Connect Discovery): for an issuer
//!   `https://host/path`, `https://host/.well-known/oauth-authorization-server/path`, then
//!   `https://host/.well-known/openid-configuration/path`, then
//!   `https://host/path/.well-known/openid-configuration`. The first document whose `issuer`
//!   is exactly the configured one gives the `jwks_uri` (`https://`, or `http://` on loopback
//!   only).
//! - The key set is kept in memory. A token whose `kid` is not in it makes the cache fetch the
//!   set again, at most once per [`UNKNOWN_KID_REFETCH`] (a rotation is picked up at once, a
//!   flood of made-up `kid`s costs one fetch a minute). A set older than [`MAX_AGE`] is
//!   fetched again on next use (on failure the old one serves). With no set yet, a failed
//!   fetch is retried at most every [`FAILURE_RETRY`]; meanwhile tokens are answered 503.
//! - Only signing keys that can verify an asymmetric algorithm are kept (RSA, EC P-256 and
//!   P-384, Ed25519); a key with `use` other than `sig`, or of a type the crate does not read,
//!   is skipped. Documents are read at most [`MAX_DOCUMENT`] bytes, each fetch within
//!   [`FETCH_TIMEOUT`], without following redirects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;

/// Least time between two fetches caused by an unknown `kid`.
pub const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(60);
/// Age after which the key set is fetched again on next use.
pub const MAX_AGE: Duration = Duration::from_secs(3600);
/// Least time between two attempts while no key set could be had.
pub const FAILURE_RETRY: Duration = Duration::from_secs(10);
/// Largest metadata document or key set read, in bytes.
pub const MAX_DOCUMENT: usize = 1024 * 1024;
/// Longest one fetch (connect, send, read) may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the issuer's keys cannot be had. Messages name the URL and never a token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KeysError {
    #[error("GET {url}: {why}")]
    Fetch { url: String, why: String },
    #[error(
        "no authorization server metadata names the issuer {issuer} (tried {tried}); check --oauth-issuer"
    )]
    NoMetadata { issuer: String, tried: String },
    #[error(
        "the metadata at {url} names the issuer {found:?}, not {expected:?}; give --oauth-issuer exactly as the authorization server names itself"
    )]
    IssuerMismatch {
        url: String,
        found: String,
        expected: String,
    },
    #[error("the metadata at {url} has no usable jwks_uri (https://, or http:// on loopback)")]
    NoJwksUri { url: String },
    #[error(
        "the key set at {url} has no key kernel-mcp can verify with (RSA, EC P-256/P-384 or Ed25519 signing keys)"
    )]
    NoUsableKey { url: String },
}

/// Why no key was found for a token.
#[derive(Debug)]
pub enum KeyMiss {
    /// No key with its `kid` (or, without one, not exactly one key for its algorithm).
    Unknown,
    /// The key with its `kid` is for another algorithm.
    WrongAlgorithm,
    /// The issuer's keys cannot be had right now.
    Unavailable(KeysError),
}

/// A verification key and the algorithms it may verify.
struct Key {
    decoding: Arc<DecodingKey>,
    algorithms: &'static [Algorithm],
    /// The key's own `alg`, when it names one.
    alg: Option<Algorithm>,
}

impl Key {
    fn verifies(&self, alg: Algorithm) -> bool {
        self.algorithms.contains(&alg) && self.alg.is_none_or(|a| a == alg)
    }
}

/// The usable keys of one fetch.
#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Key>,
    unnamed: Vec<Key>,
}

impl KeySet {
    fn len(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }

    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Result<Arc<DecodingKey>, KeyMiss> {
        match kid {
            Some(kid) => match self.by_kid.get(kid) {
                Some(k) if k.verifies(alg) => Ok(k.decoding.clone()),
                Some(_) => Err(KeyMiss::WrongAlgorithm),
                None => Err(KeyMiss::Unknown),
            },
            None => {
                let mut fits = self
                    .by_kid
                    .values()
                    .chain(&self.unnamed)
                    .filter(|k| k.verifies(alg));
                match (fits.next(), fits.next()) {
                    (Some(k), None) => Ok(k.decoding.clone()),
                    _ => Err(KeyMiss::Unknown),
                }
            }
        }
    }
}

#[derive(Default)]
struct State {
    keys: Option<Arc<KeySet>>,
    /// Counts completed fetches, so a caller that waited for another's fetch does not repeat it.
    generation: u64,
    fetched: Option<Instant>,
    last_kid_refetch: Option<Instant>,
    failure: Option<(Instant, KeysError)>,
}

/// The key cache of one issuer.
pub struct KeyCache {
    issuer: Url,
    http: reqwest::Client,
    state: Mutex<State>,
    /// Held while fetching: one fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl KeyCache {
    /// The cache of `issuer` (nothing fetched yet). Errors: no HTTP client.
    pub fn new(issuer: Url) -> Result<KeyCache, reqwest::Error> {
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(FETCH_TIMEOUT)
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        Ok(KeyCache {
            issuer,
            http,
            state: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key for a token signed with `alg` under `kid`.
    /// Errors: [`KeyMiss`].
    pub async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Arc<DecodingKey>, KeyMiss> {
        let (keys, generation, stale) = {
            let s = self.lock();
            let stale = s.fetched.is_none_or(|t| t.elapsed() >= MAX_AGE);
            (s.keys.clone(), s.generation, stale)
        };
        let Some(keys) = keys else {
            self.fetch_after(generation, true)
                .await
                .map_err(KeyMiss::Unavailable)?;
            return self.current().find(kid, alg);
        };
        let keys = if stale {
            // On failure the old set serves (the error was logged); retried after a pause.
            let _ = self.fetch_after(generation, true).await;
            self.current()
        } else {
            keys
        };
        match keys.find(kid, alg) {
            Err(KeyMiss::Unknown) if self.may_refetch_for_unknown_kid() => {
                let generation = self.lock().generation;
                let _ = self.fetch_after(generation, false).await;
                self.current().find(kid, alg)
            }
            found => found,
        }
    }

    /// Fetch the metadata and key set now: the number of usable keys.
    /// Errors: [`KeysError`].
    pub async fn refresh(&self) -> Result<usize, KeysError> {
        let generation = self.lock().generation;
        self.fetch_after(generation, false).await?;
        Ok(self.current().len())
    }

    /// The set in the cache (empty when none).
    fn current(&self) -> Arc<KeySet> {
        self.lock().keys.clone().unwrap_or_default()
    }

    /// Whether an unknown `kid` may cause a fetch now (and if so, count it).
    fn may_refetch_for_unknown_kid(&self) -> bool {
        let mut s = self.lock();
        if s.last_kid_refetch
            .is_some_and(|t| t.elapsed() < UNKNOWN_KID_REFETCH)
        {
            return false;
        }
        s.last_kid_refetch = Some(Instant::now());
        true
    }

    /// Fetch unless a fetch completed since `generation` (another caller's, waited for), or
    /// (`backoff`) the last attempt failed less than [`FAILURE_RETRY`] ago.
    async fn fetch_after(&self, generation: u64, backoff: bool) -> Result<(), KeysError> {
        let _one = self.fetching.lock().await;
        {
            let s = self.lock();
            if s.generation != generation && s.keys.is_some() {
                return Ok(());
            }
            if backoff
                && let Some((at, e)) = &s.failure
                && at.elapsed() < FAILURE_RETRY
            {
                return Err(e.clone());
            }
        }
        let fetched = self.fetch().await;
        let mut s = self.lock();
        match fetched {
            Ok(keys) => {
                tracing::info!(issuer = %self.issuer, keys = keys.len(), "fetched the OAuth issuer's signing keys");
                s.keys = Some(Arc::new(keys));
                s.generation += 1;
                s.fetched = Some(Instant::now());
                s.failure = None;
                Ok(())
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, "cannot fetch the OAuth issuer's signing keys: {e}");
                s.failure = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    /// Discovery, then the key set.
    async fn fetch(&self) -> Result<KeySet, KeysError> {
        let jwks_uri = self.discover().await?;
        let doc = self.get_json(&jwks_uri).await?;
        let keys = parse_key_set(&doc);
        if keys.len() == 0 {
            return Err(KeysError::NoUsableKey {
                url: jwks_uri.to_string(),
            });
        }
        Ok(keys)
    }

    /// The `jwks_uri` of the first metadata document that names our issuer.
    async fn discover(&self) -> Result<Url, KeysError> {
        let expected = self.issuer.as_str().trim_end_matches('/');
        let configured = self.issuer.as_str();
        let mut tried = Vec::new();
        for url in metadata_urls(&self.issuer) {
            tried.push(url.to_string());
            let Ok(doc) = self.get_json(&url).await else {
                continue;
            };
            let found = doc
                .get("issuer")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            if found != configured && found != expected {
                return Err(KeysError::IssuerMismatch {
                    url: url.to_string(),
                    found: found.to_string(),
                    expected: configured.to_string(),
                });
            }
            let jwks = doc
                .get("jwks_uri")
                .and_then(|v| v.as_str())
                .and_then(|u| Url::parse(u).ok())
                .filter(|u| {
                    u.scheme() == "https" || (u.scheme() == "http" && super::is_loopback(u))
                });
            return jwks.ok_or(KeysError::NoJwksUri {
                url: url.to_string(),
            });
        }
        Err(KeysError::NoMetadata {
            issuer: configured.to_string(),
            tried: tried.join(", "),
        })
    }

    /// GET `url` as JSON, at most [`MAX_DOCUMENT`] bytes. Errors: [`KeysError::Fetch`].
    async fn get_json(&self, url: &Url) -> Result<serde_json::Value, KeysError> {
        let fail = |why: String| KeysError::Fetch {
            url: url.to_string(),
            why,
        };
        let mut response = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("HTTP {}", response.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT {
                return Err(fail(format!("larger than {MAX_DOCUMENT} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| fail(format!("not JSON: {e}")))
    }
}

/// The metadata URLs of `issuer`, in the order they are tried.
fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let origin = issuer.origin().ascii_serialization();
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ];
    let mut out: Vec<Url> = Vec::new();
    for c in candidates {
        if let Ok(u) = Url::parse(&c)
            && !out.contains(&u)
        {
            out.push(u);
        }
    }
    out
}

/// The usable keys of a JWK Set document; keys that do not parse are skipped.
fn parse_key_set(doc: &serde_json::Value) -> KeySet {
    let mut set = KeySet::default();
    let keys = doc.get("keys").and_then(|k| k.as_array());
    for value in keys.into_iter().flatten() {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value.clone()) else {
            continue;
        };
        let Some(key) = usable(&jwk) else {
            continue;
        };
        match jwk.common.key_id {
            Some(kid) => {
                set.by_kid.insert(kid, key);
            }
            None => set.unnamed.push(key),
        }
    }
    set
}

/// The RSA signing algorithms accepted (an RSA key may sign with any of them).
pub const RSA_ALGORITHMS: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// `jwk` as a verification key, when it is an asymmetric signing key.
fn usable(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let algorithms: &'static [Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &RSA_ALGORITHMS,
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            &[Algorithm::EdDSA]
        }
        _ => return None,
    };
    let alg = match &jwk.common.key_algorithm {
        Some(a) => Some(a.to_string().parse::<Algorithm>().ok()?),
        None => None,
    };
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        decoding: Arc::new(decoding),
        algorithms,
        alg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_is_looked_for_where_rfc_8414_and_openid_put_it() {
        let root = Url::parse("https://id.example").unwrap();
        let urls: Vec<String> = metadata_urls(&root).iter().map(|u| u.to_string()).collect();
        assert_eq!(
            urls,
            [
                "https://id.example/.well-known/oauth-authorization-server",
                "https://id.example/.well-known/openid-configuration"
            ]
        );
        let tenant = Url::parse("https://id.example/realms/a/").unwrap();
        let urls: Vec<String> = metadata_urls(&tenant)
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(urls.len(), 3);
        assert_eq!(
            urls[0],
            "https://id.example/.well-known/oauth-authorization-server/realms/a"
        );
        assert_eq!(
            urls[2],
            "https://id.example/realms/a/.well-known/openid-configuration"
        );
    }

    #[test]
    fn only_asymmetric_signing_keys_are_kept_and_found_by_kid_and_algorithm() {
        // A P-256 public key (RFC 7515 appendix A.3).
        let ec = json!({"kty": "EC", "crv": "P-256", "kid": "ec",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tw2mTc1tg1OE",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
        let doc = json!({"keys": [
            ec,
            {"kty": "oct", "kid": "secret", "k": "c2VjcmV0"},
            {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tw2mTc1tg1OE",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "weird", "kid": "w"},
            "not a key",
        ]});
        let set = parse_key_set(&doc);
        assert_eq!(set.len(), 1);
        assert!(set.find(Some("ec"), Algorithm::ES256).is_ok());
        assert!(
            set.find(None, Algorithm::ES256).is_ok(),
            "the one key for ES256"
        );
        assert!(matches!(
            set.find(Some("ec"), Algorithm::RS256),
            Err(KeyMiss::WrongAlgorithm)
        ));
        assert!(matches!(
            set.find(Some("secret"), Algorithm::HS256),
            Err(KeyMiss::Unknown)
        ));
        assert!(matches!(
            set.find(Some("nope"), Algorithm::ES256),
            Err(KeyMiss::Unknown)
        ));
    }
}
