//! `kernel-mcp broker login SERVER`: the authorization-code flow of an `authorization_code`
//! entry, run once by a person (docs/broker.md "Signing in"), with rmcp's OAuth client:
//!
//! 1. a loopback listener on `127.0.0.1` (the entry's `redirectPort`, or one the OS picks),
//!    whose `http://127.0.0.1:PORT/callback` is the redirect URI (RFC 8252);
//! 2. discovery (the server's protected resource metadata, then its authorization server's),
//!    the client: the entry's `clientId`, else dynamic client registration;
//! 3. the authorization URL (PKCE S256, `state`, the server URL as `resource`), handed to the
//!    caller to show the person;
//! 4. the redirect: a request whose `state` is not this login's is answered 400 and the wait
//!    goes on; the right one's code is exchanged (with the PKCE verifier) and the credential
//!    written to its file ([`super::store`]), and the browser told it may close the tab.
//!
//! Bounded: the wait ([`LoginArgs::timeout`]), the requests answered, the body of none read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession};
use tokio::sync::{mpsc, oneshot};

use super::source::{OAuthError, discovered};
use super::store::FileStore;

/// Requests the loopback listener answers before the login gives up (a browser asks for a
/// favicon; a stray client may knock).
const MAX_REQUESTS: usize = 64;

/// What a login needs: the entry's server, URL and settings.
#[derive(Debug, Clone)]
pub struct LoginArgs {
    pub server: String,
    pub url: String,
    pub credential_file: PathBuf,
    /// 0: a port the OS picks.
    pub redirect_port: u16,
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
    /// How long to wait for the person to come back through the redirect.
    pub timeout: Duration,
}

/// Why a login did not store a credential. No variant carries a code or a token.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(
        "cannot listen on 127.0.0.1:{port} for the redirect ({reason}); set oauth.redirectPort to a free port, or 0 for any"
    )]
    Listen { port: u16, reason: String },
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    #[error("the credential cannot be stored: {0}")]
    Store(#[from] super::store::StoreError),
    #[error("could not start the sign-in with the authorization server: {0}")]
    Start(String),
    #[error("no sign-in came back within {0} s; run the command again (--timeout-s for longer)")]
    Timeout(u64),
    #[error("the authorization server answered the sign-in with an error: {0}")]
    Denied(String),
    #[error("the sign-in came back, but the code could not be exchanged for a token: {0}")]
    Exchange(String),
}

/// One redirect request: its URL, and where to send the page for the browser.
type Arrival = (String, oneshot::Sender<(u16, String)>);

/// Run the flow for `args`; `show` gets the authorization URL (to print). Returns the
/// credential file written. Errors: see [`LoginError`].
pub async fn login(args: &LoginArgs, show: &mut dyn FnMut(&str)) -> Result<PathBuf, LoginError> {
    let store = FileStore::new(args.credential_file.clone(), &args.url);
    store.check_writable()?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.redirect_port))
        .await
        .map_err(|e| LoginError::Listen {
            port: args.redirect_port,
            reason: e.to_string(),
        })?;
    let port = listener.local_addr().map_or(0, |a| a.port());
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let mut manager = discovered(&args.server, &args.url).await?;
    manager.set_credential_store(store);
    let mut request =
        AuthorizationRequest::new(&redirect_uri).with_client_name("kernel-mcp broker");
    if let Some(id) = &args.client_id {
        request = request.with_preregistered_client(id);
    }
    if !args.scopes.is_empty() {
        request = request.with_scopes(args.scopes.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| LoginError::Start(e.to_string()))?;
    let url = session.get_authorization_url().to_string();
    let state = reqwest::Url::parse(&url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| LoginError::Start("the authorization URL has no state".into()))?;
    show(&url);
    let (tx, rx) = mpsc::channel::<Arrival>(8);
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(listen(listener, port, tx, stop.clone()));
    let waited = tokio::time::timeout(args.timeout, redirected(&session, &state, rx)).await;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    match waited {
        Ok(r) => r.map(|()| args.credential_file.clone()),
        Err(_) => Err(LoginError::Timeout(args.timeout.as_secs())),
    }
}

/// Serve `/callback` on `listener` until `stop`, handing each request to `tx`.
async fn listen(
    listener: tokio::net::TcpListener,
    port: u16,
    tx: mpsc::Sender<Arrival>,
    stop: tokio_util::sync::CancellationToken,
) {
    let tx = Arc::new(tx);
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::get(move |uri: http::Uri| {
            let tx = tx.clone();
            async move {
                let (reply, page) = oneshot::channel();
                let full = format!("http://127.0.0.1:{port}{uri}");
                if tx.send((full, reply)).await.is_err() {
                    return (http::StatusCode::GONE, "This sign-in is over.".to_string());
                }
                let (status, text) = page
                    .await
                    .unwrap_or((410, "This sign-in is over.".to_string()));
                (
                    http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK),
                    text,
                )
            }
        }),
    );
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
}

/// Wait for the redirect that carries `state`, and exchange its code.
async fn redirected(
    session: &AuthorizationSession,
    state: &str,
    mut rx: mpsc::Receiver<Arrival>,
) -> Result<(), LoginError> {
    for _ in 0..MAX_REQUESTS {
        let Some((url, reply)) = rx.recv().await else {
            break;
        };
        let params: Vec<(String, String)> = reqwest::Url::parse(&url)
            .map(|u| u.query_pairs().into_owned().collect())
            .unwrap_or_default();
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if get("state").as_deref() != Some(state) {
            let _ = reply.send((
                400,
                "Not this sign-in's redirect (its state does not match).".into(),
            ));
            continue;
        }
        if let Some(error) = get("error") {
            let said = match get("error_description") {
                Some(d) => format!("{error}: {d}"),
                None => error,
            };
            let _ = reply.send((
                400,
                format!("The sign-in failed: {said}. You may close this tab."),
            ));
            return Err(LoginError::Denied(said));
        }
        return match session.handle_callback_url(&url).await {
            Ok(_) => {
                let _ = reply.send((
                    200,
                    "Signed in: kernel-mcp has the credential. You may close this tab.".into(),
                ));
                Ok(())
            }
            Err(e) => {
                let _ = reply.send((
                    400,
                    "The sign-in could not be completed; see the terminal.".into(),
                ));
                Err(LoginError::Exchange(e.to_string()))
            }
        };
    }
    Err(LoginError::Start(
        "the redirect listener stopped before a sign-in came back".into(),
    ))
}
