//! The broker's own OAuth (docs/broker.md, "OAuth"): a `type: http` registry entry
//! may carry an `oauth` block, and the broker then sends that server a bearer token it gets
//! itself, so kernel code calls OAuth-protected MCP servers with no token in a file it can
//! read, its environment, a log line, an error or `mcp.explain`.
//!
//! - [`block`]: the block as written and resolved (`authorization_code` or
//!   `client_credentials`).
//! - [`store`]: where an authorization-code credential lives (0600 in a private directory,
//!   links refused).
//! - [`source`]: a server's tokens (discovery, refresh, client credentials), over rmcp's OAuth
//!   client, which is built on the `oauth2` crate.
//! - [`client`]: the streamable-HTTP client that puts the token on each request and retries
//!   a 401 once with a new one.
//! - [`login`]: `kernel-mcp broker login SERVER`, the authorization-code flow (PKCE, a
//!   loopback redirect).

pub mod block;
pub mod client;
pub mod login;
pub mod source;
pub mod store;

use serde_json::{Value, json};

pub use block::{OAuthBlock, OAuthGrant, Secret};

/// What `mcp.explain` says of the `oauth` block of `server`: the grant, whether a credential
/// is ready (never what it is), and what to do when it is not. `grant` is the resolved block
/// (`None` when the entry did not resolve) of the server at `url`.
pub fn explain(server: &str, url: &str, written: &OAuthBlock, grant: Option<&OAuthGrant>) -> Value {
    let login = format!("run `kernel-mcp broker login {server}`");
    match grant {
        None => json!({
            "grant": written.grant_type(),
            "ready": false,
            "hint": "fix the entry first (see errors)",
        }),
        Some(OAuthGrant::AuthorizationCode {
            credential_file, ..
        }) => {
            let store = store::FileStore::new(credential_file.clone(), url);
            let (ready, hint) = match store.readiness() {
                store::Readiness::Ready => (true, None),
                store::Readiness::NotReady(why) => (false, Some(format!("{why}: {login}"))),
                store::Readiness::Refused(why) => (false, Some(why)),
            };
            let mut v = json!({
                "grant": "authorization_code",
                "ready": ready,
                "credential_file": credential_file,
            });
            if let Some(h) = hint {
                v["hint"] = json!(h);
            }
            v
        }
        Some(OAuthGrant::ClientCredentials { client_id, .. }) => json!({
            "grant": "client_credentials",
            "ready": true,
            "client_id": client_id,
            "token": "fetched by the broker on first use, kept in memory",
        }),
    }
}

/// A server's [`source::TokenSource`], made on first need and kept; one that needs a new
/// sign-in is dropped, so the next call starts from what `broker login` stored since.
#[derive(Default)]
pub struct Sources(tokio::sync::Mutex<Option<std::sync::Arc<source::TokenSource>>>);

impl Sources {
    /// The source of `server` (at `url`, with `grant`), holding a current token. Errors: see
    /// [`source::OAuthError`].
    pub async fn ready(
        &self,
        server: &str,
        url: &str,
        grant: &OAuthGrant,
    ) -> Result<std::sync::Arc<source::TokenSource>, source::OAuthError> {
        let mut slot = self.0.lock().await;
        let source = match slot.as_ref() {
            Some(s) => s.clone(),
            None => {
                let s = std::sync::Arc::new(source::TokenSource::new(server, url, grant).await?);
                *slot = Some(s.clone());
                s
            }
        };
        match source.token().await {
            Ok(_) => Ok(source),
            Err(e) => {
                if matches!(
                    e,
                    source::OAuthError::LoginNeeded { .. } | source::OAuthError::Refused { .. }
                ) {
                    *slot = None;
                }
                Err(e)
            }
        }
    }
}
