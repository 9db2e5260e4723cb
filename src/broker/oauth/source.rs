//! Where a downstream server's access token comes from: a [`TokenSource`] per OAuth server of
//! a project, over rmcp's OAuth client (`rmcp::transport::auth`, itself on the `oauth2` crate):
//! discovery as the MCP authorization spec says (the server's protected resource metadata,
//! RFC 9728, then its authorization server's metadata, RFC 8414), the server URL as the
//! resource indicator (RFC 8707).
//!
//! - `authorization_code`: the credential `kernel-mcp broker login` stored ([`super::store`]);
//!   an access token about to expire is refreshed on use and the new one written back. A
//!   refresh the authorization server refuses (revoked, expired) is [`OAuthError::LoginNeeded`].
//! - `client_credentials`: fetched on first use, kept in memory only, fetched again when it
//!   expires or the server answers 401.
//!
//! Token fetches of one source are serialized (one refresh at a time). No error carries a
//! token; what the authorization server said is kept.

use rmcp::transport::auth::{AuthError, AuthorizationManager, ClientCredentialsConfig};

use super::block::OAuthGrant;
use super::store::FileStore;

/// Why a server's token cannot be had. Every message names the server and what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    #[error(
        "server \"{server}\" needs a sign-in: {reason}. Run `kernel-mcp broker login {server}`"
    )]
    LoginNeeded { server: String, reason: String },
    #[error("server \"{server}\": its OAuth credential file is refused: {reason}")]
    Refused { server: String, reason: String },
    #[error(
        "server \"{server}\": OAuth discovery failed ({reason}); check its url, and that it names an authorization server in its protected resource metadata"
    )]
    Discovery { server: String, reason: String },
    #[error(
        "server \"{server}\": the authorization server refused the client credentials ({reason}); check oauth.clientId and oauth.clientSecret"
    )]
    ClientRefused { server: String, reason: String },
    #[error("server \"{server}\": OAuth failed: {reason}")]
    Other { server: String, reason: String },
}

enum Kind {
    Stored,
    Client(ClientCredentialsConfig),
}

/// A server's tokens (see the module docs).
pub struct TokenSource {
    server: String,
    kind: Kind,
    manager: AuthorizationManager,
    /// One fetch or refresh at a time.
    lock: tokio::sync::Mutex<()>,
}

/// An authorization manager for the server at `url`, with its authorization server's
/// metadata discovered. Errors: nothing discovered (no OAuth there), or the network.
pub async fn discovered(server: &str, url: &str) -> Result<AuthorizationManager, OAuthError> {
    crate::tls::install_provider();
    let discovery = |reason: String| OAuthError::Discovery {
        server: server.to_string(),
        reason,
    };
    // The registry is the user's own file: an authorization server on a private address
    // (a company's) is as legitimate as the server itself.
    let mut manager = AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(|e| discovery(e.to_string()))?;
    let resolution = manager
        .resolve_metadata()
        .await
        .map_err(|e| discovery(e.to_string()))?;
    if !resolution.source.is_discovered() {
        return Err(discovery(format!(
            "{url} publishes no OAuth metadata (no /.well-known/oauth-protected-resource)"
        )));
    }
    manager.set_metadata(resolution.metadata);
    Ok(manager)
}

impl TokenSource {
    /// The source of `server` (at `url`) for `grant`: discovery, then the stored credential or
    /// the client's configuration (nothing is fetched yet). Errors: discovery failed, no
    /// credential stored (`LoginNeeded`), the file refused, a client the server cannot use.
    pub async fn new(
        server: &str,
        url: &str,
        grant: &OAuthGrant,
    ) -> Result<TokenSource, OAuthError> {
        let mut manager = discovered(server, url).await?;
        let kind = match grant {
            OAuthGrant::AuthorizationCode {
                credential_file, ..
            } => {
                manager.set_credential_store(FileStore::new(credential_file.clone(), url));
                match manager.initialize_from_store().await {
                    Ok(true) => Kind::Stored,
                    Ok(false) => {
                        return Err(OAuthError::LoginNeeded {
                            server: server.to_string(),
                            reason: format!("no credential in {}", credential_file.display()),
                        });
                    }
                    Err(e) => return Err(classify(server, e)),
                }
            }
            OAuthGrant::ClientCredentials {
                client_id,
                client_secret,
                scopes,
            } => {
                let config = ClientCredentialsConfig::ClientSecret {
                    client_id: client_id.clone(),
                    client_secret: client_secret.0.clone(),
                    scopes: scopes.clone(),
                    resource: Some(url.to_string()),
                };
                manager
                    .validate_client_credentials_metadata(&config)
                    .and_then(|()| manager.configure_client_credentials(&config))
                    .map_err(|e| classify(server, e))?;
                Kind::Client(config)
            }
        };
        Ok(TokenSource {
            server: server.to_string(),
            kind,
            manager,
            lock: tokio::sync::Mutex::new(()),
        })
    }

    /// A current access token: the one held, refreshed or fetched again when it is about to
    /// expire. Errors: see [`OAuthError`].
    pub async fn token(&self) -> Result<String, OAuthError> {
        let _one = self.lock.lock().await;
        match self.manager.get_access_token().await {
            Ok(t) => Ok(t),
            Err(AuthError::AuthorizationRequired) => match &self.kind {
                Kind::Client(c) => self.fetch(c).await,
                Kind::Stored => Err(self.login_needed(
                    "the access token expired and the authorization server refused to refresh it (revoked, or the sign-in expired)",
                )),
            },
            Err(e) => Err(classify(&self.server, e)),
        }
    }

    /// The server refused `sent` (401): a new token (refreshed, or fetched again), or `None`
    /// when there is no other to try. Errors: the refresh was refused (`LoginNeeded`), or the
    /// fetch failed.
    pub async fn rejected(&self, sent: &str) -> Result<Option<String>, OAuthError> {
        let _one = self.lock.lock().await;
        // Another request may have replaced it already.
        if let Ok(t) = self.manager.get_access_token().await
            && t != sent
        {
            return Ok(Some(t));
        }
        let fresh = match &self.kind {
            Kind::Client(c) => self.fetch(c).await?,
            Kind::Stored => match self.manager.refresh_token().await {
                Ok(r) => {
                    use oauth2::TokenResponse;
                    r.access_token().secret().clone()
                }
                Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => {
                    return Err(self.login_needed(
                        "the server refused the access token and the authorization server refused to refresh it (revoked?)",
                    ));
                }
                Err(e) => return Err(classify(&self.server, e)),
            },
        };
        Ok((fresh != sent).then_some(fresh))
    }

    async fn fetch(&self, config: &ClientCredentialsConfig) -> Result<String, OAuthError> {
        use oauth2::TokenResponse;
        match self.manager.exchange_client_credentials(config).await {
            Ok(r) => {
                tracing::debug!(server = %self.server, "fetched an OAuth access token (client credentials)");
                Ok(r.access_token().secret().clone())
            }
            Err(e) => Err(OAuthError::ClientRefused {
                server: self.server.clone(),
                reason: e.to_string(),
            }),
        }
    }

    fn login_needed(&self, reason: &str) -> OAuthError {
        OAuthError::LoginNeeded {
            server: self.server.clone(),
            reason: reason.to_string(),
        }
    }
}

/// An rmcp error as one of ours.
fn classify(server: &str, e: AuthError) -> OAuthError {
    let server = server.to_string();
    match e {
        AuthError::CredentialStoreError(reason) => OAuthError::Refused { server, reason },
        AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_) => {
            OAuthError::LoginNeeded {
                server,
                reason: e.to_string(),
            }
        }
        AuthError::ClientCredentialsError(reason) => OAuthError::ClientRefused { server, reason },
        e => OAuthError::Other {
            server,
            reason: e.to_string(),
        },
    }
}
