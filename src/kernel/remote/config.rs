//! Gateway configuration: `--gateway [NAME=]URL` (repeatable; the name defaults to
//! `gateway`), a token from `KERNEL_MCP_GATEWAY_TOKEN` or `--gateway-token-file [NAME=]PATH`
//! (a file without a name serves every gateway that has none of its own), sent as
//! `Authorization: token …`. The token lives in a [`Token`], which never prints.

use std::sync::Arc;

use reqwest::header::HeaderValue;

/// The name of a gateway given without one.
pub const DEFAULT_NAME: &str = "gateway";

/// A secret that never appears in `Debug` or `Display` output.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl Token {
    pub fn new(s: &str) -> Token {
        Token(Arc::from(s.trim()))
    }
    /// The secret itself, for the header and for [`super::redact`].
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// One configured Jupyter server or gateway.
#[derive(Debug, Clone)]
pub struct Gateway {
    /// How tools name it (`create_session(gateway=NAME)`, `gateway` in `list_kernels`).
    pub name: String,
    /// Its base URL, ending in `/` (e.g. `http://127.0.0.1:8888/`).
    pub url: String,
    pub token: Option<Token>,
}

impl Gateway {
    /// `path` (no leading `/`) under the base URL.
    pub fn join(&self, path: &str) -> String {
        format!("{}{}", self.url, path.trim_start_matches('/'))
    }

    /// The `ws://`/`wss://` URL of `path` under the base URL.
    pub fn ws_join(&self, path: &str) -> String {
        let http = self.join(path);
        match http.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => format!("ws://{}", http.trim_start_matches("http://")),
        }
    }

    /// `Authorization: token …`, marked sensitive; `None` without a token.
    pub fn auth_header(&self) -> Option<HeaderValue> {
        let t = self.token.as_ref()?;
        let mut v = HeaderValue::from_str(&format!("token {}", t.expose())).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

/// Why the gateway options cannot be used. The messages name the option, never a token.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--gateway-token-file {path}: {source}")]
    TokenFile {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "--gateway {spec}: the URL must start with http:// or https:// (e.g. --gateway lab=http://127.0.0.1:8888)"
    )]
    NotHttp { spec: String },
    #[error(
        "--gateway {spec}: a gateway named '{name}' is already configured; name each one (NAME=URL)"
    )]
    Duplicate { spec: String, name: String },
    #[error("--gateway-token-file names gateway '{name}', which no --gateway defines")]
    UnknownGateway { name: String },
    /// The HTTP client for a gateway cannot be built (see [`super::Rest::new`]).
    #[error("cannot build an HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
}

/// Split `[NAME=]VALUE`; a `=` inside a URL (after `://`) is not a name separator.
fn split_named(spec: &str) -> (Option<&str>, &str) {
    match spec.split_once('=') {
        Some((name, value))
            if !name.contains("://")
                && !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) =>
        {
            (Some(name), value)
        }
        _ => (None, spec),
    }
}

/// The gateways of `--gateway` specs, with tokens from `--gateway-token-file` specs, else
/// `env_token`. Errors: [`ConfigError`] naming the bad spec or unreadable file (never a token).
pub fn parse_gateways(
    specs: &[String],
    token_files: &[String],
    env_token: Option<&str>,
) -> Result<Vec<Gateway>, ConfigError> {
    let mut files: Vec<(Option<String>, Token)> = Vec::new();
    for spec in token_files {
        let (name, path) = split_named(spec);
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::TokenFile {
            path: path.to_string(),
            source,
        })?;
        files.push((name.map(String::from), Token::new(&text)));
    }
    let mut out: Vec<Gateway> = Vec::new();
    for spec in specs {
        let (name, url) = split_named(spec);
        let name = name.unwrap_or(DEFAULT_NAME).to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::NotHttp { spec: spec.clone() });
        }
        if out.iter().any(|g| g.name == name) {
            return Err(ConfigError::Duplicate {
                spec: spec.clone(),
                name,
            });
        }
        let mut url = url.trim().to_string();
        if !url.ends_with('/') {
            url.push('/');
        }
        let token = files
            .iter()
            .find(|(n, _)| n.as_deref() == Some(name.as_str()))
            .or_else(|| files.iter().find(|(n, _)| n.is_none()))
            .map(|(_, t)| t.clone())
            .or_else(|| env_token.filter(|t| !t.trim().is_empty()).map(Token::new));
        out.push(Gateway { name, url, token });
    }
    if let Some((Some(n), _)) = files.iter().find(|(n, _)| {
        n.as_ref()
            .is_some_and(|n| !out.iter().any(|g| &g.name == n))
    }) {
        return Err(ConfigError::UnknownGateway { name: n.clone() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_default_and_urls_keep_their_equals_signs() {
        let g = parse_gateways(
            &["http://h:1".into(), "lab=https://x/base".into()],
            &[],
            Some("t0"),
        )
        .unwrap();
        assert_eq!(g[0].name, "gateway");
        assert_eq!(g[0].url, "http://h:1/");
        assert_eq!(g[1].name, "lab");
        assert_eq!(g[1].url, "https://x/base/");
        assert_eq!(g[0].token.as_ref().unwrap().expose(), "t0");
        assert_eq!(g[1].ws_join("api/kernels"), "wss://x/base/api/kernels");
        let q = parse_gateways(&["http://h/p?a=b".into()], &[], None).unwrap();
        assert_eq!(q[0].name, "gateway");
        assert_eq!(g[0].ws_join("/api/x"), "ws://h:1/api/x");
    }

    #[test]
    fn token_files_by_name_win_over_the_unnamed_file_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "secret-a\n").unwrap();
        std::fs::write(&b, "secret-b").unwrap();
        let g = parse_gateways(
            &["one=http://h:1".into(), "two=http://h:2".into()],
            &[format!("two={}", b.display()), a.display().to_string()],
            Some("env"),
        )
        .unwrap();
        assert_eq!(g[0].token.as_ref().unwrap().expose(), "secret-a");
        assert_eq!(g[1].token.as_ref().unwrap().expose(), "secret-b");
    }

    #[test]
    fn bad_specs_are_refused_without_showing_a_token() {
        assert!(parse_gateways(&["h:1".into()], &[], None).is_err());
        assert!(parse_gateways(&["http://a".into(), "http://b".into()], &[], None).is_err());
        assert!(parse_gateways(&[], &["x=/nonexistent/file".into()], None).is_err());
        let g = parse_gateways(&["http://a".into()], &[], Some("s3cret")).unwrap();
        assert!(!format!("{g:?}").contains("s3cret"));
        let h = g[0].auth_header().unwrap();
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("s3cret"));
    }
}
