//! The HTTP edge in front of rmcp's streamable HTTP service: who may bind where, bearer-token
//! auth, the Host/Origin allow-lists, and two status fix-ups.
//!
//! - [`HttpAccess::new`] decides at start: a loopback bind needs nothing; a non-loopback bind
//!   needs a token (else the server refuses to start, saying how to set one) and then allows
//!   the configured host names (`--allowed-host`) and the bind address as `Host`.
//! - [`guard`] (an axum middleware) answers 401 without the token in one of the face's
//!   accepted [`Presentation`]s (MCP: `Authorization: Bearer <token>`; compared in constant
//!   time, never logged; [`super::token`] reads it), 404 for a `DELETE` naming an
//!   MCP session that does not exist (rmcp answers 202), and 400 instead of rmcp's 415 for a
//!   JSON body that does not parse (its type was right; its content was not).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::token::{Presentation, Token, presented};

/// Loopback names rmcp allows as `Host` by default.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why the HTTP endpoint may not listen as asked.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "refusing to listen on {addr} without a token: anyone who can reach it could run code. \
         Set one with --token-file PATH or KERNEL_MCP_TOKEN=<TOKEN> (e.g. `openssl rand -hex 32`); \
         clients then send `Authorization: Bearer <TOKEN>`. Or listen on 127.0.0.1."
    )]
    TokenRequired { addr: SocketAddr },
}

/// The ways the MCP endpoint accepts its token.
pub const MCP_PRESENTATIONS: &[Presentation] = &[Presentation::Bearer];

/// Who may reach the HTTP endpoint.
#[derive(Clone)]
pub struct HttpAccess {
    /// Required token, if any.
    token: Option<Token>,
    /// How a request may present it.
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
            .field("presentations", &self.presentations)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .finish()
    }
}

impl HttpAccess {
    /// The access rules for listening on `addr` with `token` and extra `hosts` (names
    /// clients use to reach this machine); the token is presented as [`MCP_PRESENTATIONS`].
    /// Errors: [`AccessError::TokenRequired`] for a non-loopback bind without a token.
    pub fn new(
        addr: SocketAddr,
        token: Option<Token>,
        hosts: &[String],
    ) -> Result<HttpAccess, AccessError> {
        let loopback = addr.ip().is_loopback();
        if !loopback && token.is_none() {
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
            presentations: MCP_PRESENTATIONS,
            allowed_hosts,
            allowed_origins: origins,
        })
    }

    /// The same rules, with the token accepted in `presentations` instead of
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

    /// True when a token is required.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether the request (its `headers` and `uri`) presents the token in an accepted way
    /// (always true without a token).
    pub fn authorized(&self, headers: &HeaderMap, uri: &Uri) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        presented(headers, uri, self.presentations)
            .iter()
            .any(|given| token.matches(given))
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

/// What [`guard`] needs: the access rules and the MCP session manager (to tell an unknown
/// session from a live one).
#[derive(Clone)]
pub struct Guard {
    pub access: HttpAccess,
    pub sessions: Arc<LocalSessionManager>,
}

/// The middleware described in the module docs.
pub async fn guard(State(g): State<Guard>, request: Request, next: Next) -> Response {
    if !g.access.authorized(request.headers(), request.uri()) {
        tracing::warn!(
            method = %request.method(),
            uri = %request.uri(),
            "rejected HTTP request without a valid bearer token"
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: send `Authorization: Bearer <token>` (the server's token: its --token-file, KERNEL_MCP_TOKEN, or for `kernel-mcp service --http` the file `kernel-mcp token` names).",
        )
            .into_response();
    }
    let method = request.method().clone();
    if method == Method::DELETE
        && let Some(id) = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        let id: Arc<str> = Arc::from(id);
        if !g.sessions.has_session(&id).await.unwrap_or(false) {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    let json_body = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
        });
    let response = next.run(request).await;
    if method == Method::POST
        && json_body
        && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
    {
        let (mut parts, _) = response.into_parts();
        parts.status = StatusCode::BAD_REQUEST;
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(
            parts,
            Body::from("Bad Request: the body is not a JSON-RPC message"),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_non_loopback_bind_without_a_token_is_refused_with_how_to_set_one() {
        let e = HttpAccess::new(addr("0.0.0.0:8000"), None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--token-file") && e.contains("KERNEL_MCP_TOKEN"),
            "{e}"
        );
        assert!(HttpAccess::new(addr("127.0.0.1:8000"), None, &[]).is_ok());
    }

    #[test]
    fn a_token_on_a_lan_address_allows_that_address_and_the_configured_names() {
        let a = HttpAccess::new(
            addr("192.168.1.5:8000"),
            Some(token("t")),
            &["box.lan".into()],
        )
        .unwrap();
        assert!(a.allowed_hosts.contains(&"192.168.1.5".to_string()));
        assert!(a.allowed_hosts.contains(&"box.lan".to_string()));
        assert!(a.allowed_origins.contains(&"http://box.lan:*".to_string()));
        let any = HttpAccess::new(addr("0.0.0.0:8000"), Some(token("t")), &[]).unwrap();
        assert!(any.allowed_hosts.is_empty(), "{any:?}");
    }

    #[test]
    fn host_and_origin_checks_follow_the_allow_lists() {
        let a = HttpAccess::new(addr("127.0.0.1:8000"), None, &[]).unwrap();
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

    #[test]
    fn only_the_exact_bearer_token_is_authorized_and_debug_hides_it() {
        let a = HttpAccess::new(addr("127.0.0.1:1"), Some(token("s3cret")), &[]).unwrap();
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        let mcp: Uri = "/mcp".parse().unwrap();
        assert!(!a.authorized(&HeaderMap::new(), &mcp));
        assert!(!a.authorized(&with("Bearer wrong"), &mcp));
        assert!(!a.authorized(&with("Basic s3cret"), &mcp));
        assert!(!a.authorized(&with("token s3cret"), &mcp), "not MCP's way");
        let query: Uri = "/mcp?token=s3cret".parse().unwrap();
        assert!(!a.authorized(&HeaderMap::new(), &query), "not MCP's way");
        assert!(a.authorized(&with("Bearer s3cret"), &mcp));
        assert!(!format!("{a:?}").contains("s3cret"));
        let jupyter = a.with_presentations(&[
            Presentation::Bearer,
            Presentation::JupyterHeader,
            Presentation::Query,
        ]);
        assert!(jupyter.authorized(&with("token s3cret"), &mcp));
        assert!(jupyter.authorized(&HeaderMap::new(), &query));
        assert!(!jupyter.authorized(&with("token nope"), &mcp));
    }

    fn token(s: &str) -> Token {
        Token::new(s, "--token").unwrap()
    }
}
