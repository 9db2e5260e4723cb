//! Who may reach an HTTP face, and who a request comes from.
//!
//! - [`HttpAccess::new`] decides at start: a loopback bind needs nothing; a non-loopback bind
//!   needs the static token or OAuth (else the server refuses to start, saying how to set one)
//!   and then allows the configured host names (`--allowed-host`) and the bind address as
//!   `Host`.
//! - [`HttpAccess::authenticate`] decides, once per request, who it comes from: the static
//!   token (compared in constant time) is the owner with every access; an OAuth access token
//!   is its subject with the access its scopes grant ([`super::oauth`]); with neither
//!   configured (loopback only) every request is the owner, as before OAuth existed. Tokens
//!   are read in the face's [`Presentation`]s and never logged.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, Uri, header};

use super::challenge::Rejection;
use super::oauth::OAuth;
use super::token::{Presentation, Token, presented};
use crate::principal::{Access, Principal};

/// Loopback names rmcp allows as `Host` by default.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why the HTTP endpoint may not listen as asked.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "refusing to listen on {addr} without a token: anyone who can reach it could run code. \
         Set one with --token-file PATH or KERNEL_MCP_TOKEN=<TOKEN> (e.g. `openssl rand -hex 32`); \
         clients then send `Authorization: Bearer <TOKEN>`. Or require OAuth access tokens \
         (--oauth-issuer, --oauth-audience), or listen on 127.0.0.1."
    )]
    TokenRequired { addr: SocketAddr },
}

/// The ways the MCP endpoint accepts a token.
pub const MCP_PRESENTATIONS: &[Presentation] = &[Presentation::Bearer];

/// Who a request comes from, before the face checks what it asks for: `access` is `None`
/// for a valid OAuth token that grants none of kernel-mcp's scopes.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub access: Option<Access>,
}

/// Who may reach the HTTP endpoint.
#[derive(Clone)]
pub struct HttpAccess {
    /// Required static token, if any.
    token: Option<Token>,
    /// OAuth access tokens, when configured.
    oauth: Option<Arc<OAuth>>,
    /// How a request may present a token.
    presentations: &'static [Presentation],
    /// Accepted `Host` values (names or addresses, optionally with `:port`); empty = any.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` patterns (scheme://host:port, `*` for any port).
    pub allowed_origins: Vec<String>,
}

impl std::fmt::Debug for HttpAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAccess")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field(
                "oauth",
                &self.oauth.as_ref().map(|o| o.issuer().to_string()),
            )
            .field("presentations", &self.presentations)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .finish()
    }
}

impl HttpAccess {
    /// The access rules for listening on `addr` with the static `token`, OAuth `oauth`, and
    /// extra `hosts` (names clients use to reach this machine); tokens are presented as
    /// [`MCP_PRESENTATIONS`].
    /// Errors: [`AccessError::TokenRequired`] for a non-loopback bind with neither.
    pub fn new(
        addr: SocketAddr,
        token: Option<Token>,
        oauth: Option<Arc<OAuth>>,
        hosts: &[String],
    ) -> Result<HttpAccess, AccessError> {
        let loopback = addr.ip().is_loopback();
        if !loopback && token.is_none() && oauth.is_none() {
            return Err(AccessError::TokenRequired { addr });
        }
        let mut names: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        if !addr.ip().is_unspecified() && !loopback {
            names.push(addr.ip().to_string());
        }
        names.extend(
            hosts
                .iter()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty()),
        );
        let mut origins = Vec::new();
        for name in &names {
            let host = if name.contains(':')
                && !name.starts_with('[')
                && name.parse::<std::net::Ipv6Addr>().is_ok()
            {
                format!("[{name}]")
            } else {
                name.clone()
            };
            origins.push(format!("http://{host}:*"));
            origins.push(format!("https://{host}:*"));
        }
        // Bound to every address with no names given: the Host a client uses cannot be known,
        // so only the token protects (DNS rebinding cannot supply it).
        let allowed_hosts = if addr.ip().is_unspecified() && hosts.is_empty() {
            Vec::new()
        } else {
            names
        };
        Ok(HttpAccess {
            token,
            oauth,
            presentations: MCP_PRESENTATIONS,
            allowed_hosts,
            allowed_origins: origins,
        })
    }

    /// The same rules, with tokens accepted in `presentations` instead of
    /// [`MCP_PRESENTATIONS`] (a Jupyter face also takes `Authorization: token …` and
    /// `?token=`).
    pub fn with_presentations(mut self, presentations: &'static [Presentation]) -> HttpAccess {
        self.presentations = presentations;
        self
    }

    /// Whether the `Host` header names an allowed host (always, with no allow-list).
    pub fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if self.allowed_hosts.is_empty() {
            return true;
        }
        let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let (name, port) = split_authority(host);
        self.allowed_hosts.iter().any(|a| {
            let (allowed, allowed_port) = split_authority(a);
            allowed.eq_ignore_ascii_case(name) && allowed_port.is_none_or(|p| Some(p) == port)
        })
    }

    /// Whether a browser's `Origin` (if any) is one of the allowed origins.
    pub fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Some((scheme, authority)) = origin.to_str().ok().and_then(|o| o.split_once("://"))
        else {
            return false;
        };
        let (name, _) = split_authority(authority);
        self.allowed_origins.iter().any(|pattern| {
            pattern.split_once("://").is_some_and(|(s, a)| {
                s.eq_ignore_ascii_case(scheme) && split_authority(a).0.eq_ignore_ascii_case(name)
            })
        })
    }

    /// True when the static token is required.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// OAuth, when configured.
    pub fn oauth(&self) -> Option<&Arc<OAuth>> {
        self.oauth.as_ref()
    }

    /// Who the request (its `headers` and `uri`) comes from: the static token's owner, an
    /// OAuth token's subject, or (with neither configured) the owner.
    ///
    /// # Errors
    /// [`Rejection::Missing`] without any token; [`Rejection::Invalid`] for a token that is
    /// neither the static token nor a valid OAuth access token (or whose issuer's keys cannot
    /// be had right now).
    pub async fn authenticate(&self, headers: &HeaderMap, uri: &Uri) -> Result<Caller, Rejection> {
        if self.token.is_none() && self.oauth.is_none() {
            return Ok(owner());
        }
        let given = presented(headers, uri, self.presentations);
        if let Some(token) = &self.token
            && given.iter().any(|g| token.matches(g))
        {
            return Ok(owner());
        }
        let Some(candidate) = given.iter().find(|g| !g.is_empty()) else {
            return Err(Rejection::Missing);
        };
        let Some(oauth) = &self.oauth else {
            return Err(Rejection::WrongStaticToken);
        };
        let verified = oauth.verify(candidate).await.map_err(Rejection::Invalid)?;
        Ok(Caller {
            principal: verified.principal,
            access: verified.access,
        })
    }
}

/// The owner with every access.
fn owner() -> Caller {
    Caller {
        principal: Principal::Owner,
        access: Some(Access::Admin),
    }
}

/// `host[:port]` or `[v6][:port]` (or a bare IPv6 address) as (host without brackets, port).
fn split_authority(a: &str) -> (&str, Option<&str>) {
    let a = a.trim();
    if let Some(rest) = a.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':'));
    }
    match a.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (a, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_non_loopback_bind_without_a_token_is_refused_with_how_to_set_one() {
        let e = HttpAccess::new(addr("0.0.0.0:8000"), None, None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--token-file")
                && e.contains("KERNEL_MCP_TOKEN")
                && e.contains("--oauth-issuer"),
            "{e}"
        );
        assert!(HttpAccess::new(addr("127.0.0.1:8000"), None, None, &[]).is_ok());
    }

    #[test]
    fn a_token_on_a_lan_address_allows_that_address_and_the_configured_names() {
        let a = HttpAccess::new(
            addr("192.168.1.5:8000"),
            Some(token("t")),
            None,
            &["box.lan".into()],
        )
        .unwrap();
        assert!(a.allowed_hosts.contains(&"192.168.1.5".to_string()));
        assert!(a.allowed_hosts.contains(&"box.lan".to_string()));
        assert!(a.allowed_origins.contains(&"http://box.lan:*".to_string()));
        let any = HttpAccess::new(addr("0.0.0.0:8000"), Some(token("t")), None, &[]).unwrap();
        assert!(any.allowed_hosts.is_empty(), "{any:?}");
    }

    #[test]
    fn host_and_origin_checks_follow_the_allow_lists() {
        let a = HttpAccess::new(addr("127.0.0.1:8000"), None, None, &[]).unwrap();
        let h = |k: header::HeaderName, v: &str| {
            let mut m = HeaderMap::new();
            m.insert(k, v.parse().unwrap());
            m
        };
        assert!(a.host_allowed(&h(header::HOST, "127.0.0.1:8000")));
        assert!(a.host_allowed(&h(header::HOST, "[::1]:8000")));
        assert!(!a.host_allowed(&h(header::HOST, "evil.example:8000")));
        assert!(a.origin_allowed(&h(header::ORIGIN, "http://localhost:3000")));
        assert!(!a.origin_allowed(&h(header::ORIGIN, "http://evil.example")));
        assert!(a.origin_allowed(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn only_the_exact_static_token_is_the_owner_and_debug_hides_it() {
        let a = HttpAccess::new(addr("127.0.0.1:1"), Some(token("s3cret")), None, &[]).unwrap();
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        let mcp: Uri = "/mcp".parse().unwrap();
        let ok = |r: Result<Caller, Rejection>| r.is_ok_and(|c| c.principal.is_owner());
        assert!(matches!(
            a.authenticate(&HeaderMap::new(), &mcp).await,
            Err(Rejection::Missing)
        ));
        assert!(matches!(
            a.authenticate(&with("Bearer wrong"), &mcp).await,
            Err(Rejection::WrongStaticToken)
        ));
        assert!(!ok(a.authenticate(&with("Basic s3cret"), &mcp).await));
        assert!(
            !ok(a.authenticate(&with("token s3cret"), &mcp).await),
            "not MCP's way"
        );
        let query: Uri = "/mcp?token=s3cret".parse().unwrap();
        assert!(
            !ok(a.authenticate(&HeaderMap::new(), &query).await),
            "not MCP's way"
        );
        let owner = a.authenticate(&with("Bearer s3cret"), &mcp).await.unwrap();
        assert_eq!(owner.access, Some(Access::Admin));
        assert!(!format!("{a:?}").contains("s3cret"));
        let jupyter = a.with_presentations(&[
            Presentation::Bearer,
            Presentation::JupyterHeader,
            Presentation::Query,
        ]);
        assert!(ok(jupyter.authenticate(&with("token s3cret"), &mcp).await));
        assert!(ok(jupyter.authenticate(&HeaderMap::new(), &query).await));
        assert!(!ok(jupyter.authenticate(&with("token nope"), &mcp).await));
        let open = HttpAccess::new(addr("127.0.0.1:1"), None, None, &[]).unwrap();
        assert!(ok(open.authenticate(&HeaderMap::new(), &mcp).await));
    }

    fn token(s: &str) -> Token {
        Token::new(s, "--token").unwrap()
    }
}
