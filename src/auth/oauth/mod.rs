//! kernel-mcp as an OAuth 2.1 resource server (docs/auth.md; the MCP authorization spec):
//! JWT access tokens from one issuer, for one audience, with scopes that grant an [`Access`].
//!
//! - [`OAuthConfig`] is what `--oauth-issuer`, `--oauth-audience` and the scope names say;
//!   [`OAuth::new`] checks it (the issuer is `https://`, or `http://` on loopback only; the
//!   audience is an absolute `http(s)` URL without a fragment, the resource's canonical URL).
//! - [`OAuth::verify`] checks a token ([`jwt`]) against the issuer's keys ([`jwks`]) and
//!   says who it is for and what it grants.
//! - [`OAuth::metadata`] is the RFC 9728 protected resource metadata, which [`router`] serves
//!   at `/.well-known/oauth-protected-resource` and at the same path followed by the
//!   audience's path (`…/mcp`, RFC 9728 §3.1), without a token.
//!
//! Scopes: `kernel-mcp:read` grants [`Access::Read`], `kernel-mcp:execute` grants
//! [`Access::Execute`] (and so read), `kernel-mcp:admin` grants [`Access::Admin`]; the names
//! are configurable ([`ScopeNames`]).

pub mod jwks;
pub mod jwt;

use std::sync::Arc;

use axum::routing::get;
use reqwest::Url;

use crate::principal::Access;

pub use jwt::{TokenProblem, Verified};

/// The default scope names.
pub const DEFAULT_READ_SCOPE: &str = "kernel-mcp:read";
pub const DEFAULT_EXECUTE_SCOPE: &str = "kernel-mcp:execute";
pub const DEFAULT_ADMIN_SCOPE: &str = "kernel-mcp:admin";

/// Where the protected resource metadata is served (and, followed by the audience's path,
/// its path-suffixed form).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The scope names that grant each [`Access`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeNames {
    pub read: String,
    pub execute: String,
    pub admin: String,
}

impl Default for ScopeNames {
    fn default() -> ScopeNames {
        ScopeNames {
            read: DEFAULT_READ_SCOPE.into(),
            execute: DEFAULT_EXECUTE_SCOPE.into(),
            admin: DEFAULT_ADMIN_SCOPE.into(),
        }
    }
}

impl ScopeNames {
    /// The scope that grants `access`.
    pub fn name(&self, access: Access) -> &str {
        match access {
            Access::Read => &self.read,
            Access::Execute => &self.execute,
            Access::Admin => &self.admin,
        }
    }

    /// The highest access the `granted` scopes give; `None` when they give none.
    pub fn access<'a>(&self, granted: impl IntoIterator<Item = &'a str>) -> Option<Access> {
        granted
            .into_iter()
            .filter_map(|s| {
                [Access::Admin, Access::Execute, Access::Read]
                    .into_iter()
                    .find(|a| self.name(*a) == s)
            })
            .max()
    }
}

/// What the command line says about OAuth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier, exactly as its tokens' `iss`.
    pub issuer: String,
    /// This resource's canonical URL, exactly as its tokens' `aud` (RFC 8707).
    pub audience: String,
    pub scopes: ScopeNames,
}

/// Why an OAuth configuration is refused. Each message names the option and the fix.
#[derive(Debug, thiserror::Error)]
pub enum OAuthConfigError {
    #[error("--oauth-issuer {issuer:?}: {why}")]
    Issuer { issuer: String, why: &'static str },
    #[error(
        "--oauth-audience {audience:?}: {why} (it is this server's canonical URL as clients reach it, e.g. https://kernels.example.com/mcp)"
    )]
    Audience { audience: String, why: &'static str },
    #[error(
        "the scope name {name:?} is not usable: scope names are non-empty and have no spaces, quotes or backslashes"
    )]
    Scope { name: String },
    #[error("cannot build the HTTP client that fetches the issuer's keys: {0}")]
    Client(#[source] reqwest::Error),
}

/// A configured resource server: the checked configuration and the issuer's key cache.
pub struct OAuth {
    config: OAuthConfig,
    keys: jwks::KeyCache,
    metadata_url: String,
    audience_path: String,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("issuer", &self.config.issuer)
            .field("audience", &self.config.audience)
            .finish()
    }
}

impl OAuth {
    /// A resource server for `config`. Fetches nothing yet (see [`OAuth::probe`]).
    ///
    /// # Errors
    /// [`OAuthConfigError`]: an issuer that is not `https://` (or `http://` on loopback), has
    /// a query or fragment; an audience that is not an absolute `http(s)` URL or has a
    /// fragment; a scope name with spaces or quotes; no HTTP client.
    pub fn new(config: OAuthConfig) -> Result<Arc<OAuth>, OAuthConfigError> {
        let issuer = check_issuer(&config.issuer)?;
        let audience = check_audience(&config.audience)?;
        for name in [
            &config.scopes.read,
            &config.scopes.execute,
            &config.scopes.admin,
        ] {
            if name.is_empty()
                || name.contains([' ', '"', '\\'])
                || name.chars().any(char::is_control)
            {
                return Err(OAuthConfigError::Scope { name: name.clone() });
            }
        }
        let audience_path = audience.path().trim_end_matches('/').to_string();
        let metadata_url = format!(
            "{}{METADATA_PATH}{audience_path}",
            audience.origin().ascii_serialization()
        );
        let keys = jwks::KeyCache::new(issuer).map_err(OAuthConfigError::Client)?;
        Ok(Arc::new(OAuth {
            config,
            keys,
            metadata_url,
            audience_path,
        }))
    }

    /// The issuer, as configured.
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The audience, as configured.
    pub fn audience(&self) -> &str {
        &self.config.audience
    }

    /// The scope names.
    pub fn scopes(&self) -> &ScopeNames {
        &self.config.scopes
    }

    /// Where clients find [`OAuth::metadata`]: the audience's origin, then
    /// `/.well-known/oauth-protected-resource`, then the audience's path.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// The RFC 9728 protected resource metadata document.
    pub fn metadata(&self) -> serde_json::Value {
        let s = &self.config.scopes;
        serde_json::json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "scopes_supported": [s.read, s.execute, s.admin],
            "bearer_methods_supported": ["header"],
            "resource_name": "kernel-mcp",
        })
    }

    /// Who `token` is for and what it grants.
    /// Errors: [`TokenProblem`], each a reason to answer 401 (or 503 when the issuer's keys
    /// cannot be had).
    pub async fn verify(&self, token: &str) -> Result<Verified, TokenProblem> {
        jwt::verify(token, &self.config, &self.keys).await
    }

    /// Fetch the issuer's metadata and keys now: the number of usable keys.
    /// Errors: why they cannot be had (for `doctor` and the start-up log).
    pub async fn probe(&self) -> Result<usize, jwks::KeysError> {
        self.keys.refresh().await
    }
}

/// The issuer as a URL, when it is one kernel-mcp may fetch keys from.
fn check_issuer(issuer: &str) -> Result<Url, OAuthConfigError> {
    let bad = |why| OAuthConfigError::Issuer {
        issuer: issuer.to_string(),
        why,
    };
    let url = Url::parse(issuer).map_err(|_| bad("not an absolute URL"))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("an issuer has no query or fragment (RFC 8414)"));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(bad(
            "use https:// (http:// is accepted only on loopback, for tests)",
        )),
        _ => Err(bad("use an https:// URL")),
    }
}

/// The audience as a URL, when it is a resource's canonical URL.
fn check_audience(audience: &str) -> Result<Url, OAuthConfigError> {
    let bad = |why| OAuthConfigError::Audience {
        audience: audience.to_string(),
        why,
    };
    let url = Url::parse(audience).map_err(|_| bad("not an absolute URL"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host().is_none() {
        return Err(bad("not an http(s) URL"));
    }
    if url.fragment().is_some() {
        return Err(bad("a resource indicator has no fragment (RFC 8707)"));
    }
    Ok(url)
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub(crate) fn is_loopback(url: &Url) -> bool {
    url.host_str().is_some_and(|h| {
        h.eq_ignore_ascii_case("localhost")
            || h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|a| a.is_loopback())
    })
}

/// The routes of the protected resource metadata (no token needed): at
/// [`METADATA_PATH`], and followed by `/mcp` and by the audience's path.
pub fn router(oauth: Arc<OAuth>) -> axum::Router {
    let doc: Arc<str> = Arc::from(oauth.metadata().to_string());
    let serve = move || {
        let doc = doc.clone();
        async move {
            (
                [
                    (axum::http::header::CONTENT_TYPE, "application/json"),
                    (axum::http::header::CACHE_CONTROL, "max-age=3600"),
                ],
                doc.to_string(),
            )
        }
    };
    let mut paths = std::collections::BTreeSet::new();
    for suffix in ["", "/mcp", oauth.audience_path.as_str()] {
        if !suffix.contains(['{', '}', '*']) {
            paths.insert(format!("{METADATA_PATH}{suffix}"));
        }
    }
    paths.into_iter().fold(axum::Router::new(), |router, path| {
        router.route(&path, get(serve.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(issuer: &str, audience: &str) -> OAuthConfig {
        OAuthConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            scopes: ScopeNames::default(),
        }
    }

    #[test]
    fn the_issuer_is_https_or_loopback_http_and_the_audience_a_url_without_fragment() {
        crate::tls::install_provider();
        let ok = OAuth::new(config("https://id.example", "https://k.example/mcp")).unwrap();
        assert_eq!(
            ok.metadata_url(),
            "https://k.example/.well-known/oauth-protected-resource/mcp"
        );
        assert!(OAuth::new(config("http://127.0.0.1:9", "http://127.0.0.1:8/mcp")).is_ok());
        assert!(OAuth::new(config("http://localhost:9", "http://localhost:8")).is_ok());
        for (issuer, audience, word) in [
            ("http://id.example", "https://k/mcp", "https://"),
            ("https://id.example?x=1", "https://k/mcp", "query"),
            ("id.example", "https://k/mcp", "absolute"),
            ("https://id.example", "https://k/mcp#x", "fragment"),
            ("https://id.example", "urn:kernel-mcp", "http(s)"),
        ] {
            let e = OAuth::new(config(issuer, audience))
                .unwrap_err()
                .to_string();
            assert!(e.contains(word), "{issuer} {audience}: {e}");
        }
        let mut spaced = config("https://id.example", "https://k/mcp");
        spaced.scopes.read = "a b".into();
        assert!(matches!(
            OAuth::new(spaced),
            Err(OAuthConfigError::Scope { .. })
        ));
    }

    #[test]
    fn scopes_grant_the_highest_access_they_name() {
        let s = ScopeNames::default();
        assert_eq!(s.access(["openid", "kernel-mcp:read"]), Some(Access::Read));
        assert_eq!(
            s.access(["kernel-mcp:read", "kernel-mcp:execute"]),
            Some(Access::Execute)
        );
        assert_eq!(s.access(["kernel-mcp:admin"]), Some(Access::Admin));
        assert_eq!(s.access(["openid", "profile"]), None);
        assert_eq!(s.name(Access::Execute), "kernel-mcp:execute");
    }

    #[test]
    fn the_metadata_names_the_audience_the_issuer_and_the_scopes() {
        crate::tls::install_provider();
        let o = OAuth::new(config("https://id.example", "https://k.example/mcp")).unwrap();
        let m = o.metadata();
        assert_eq!(m["resource"], "https://k.example/mcp");
        assert_eq!(m["authorization_servers"][0], "https://id.example");
        assert_eq!(m["bearer_methods_supported"][0], "header");
        assert_eq!(m["scopes_supported"].as_array().unwrap().len(), 3);
    }
}
