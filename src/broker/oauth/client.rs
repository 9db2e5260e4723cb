//! The streamable-HTTP client of an OAuth server: rmcp's own (reqwest) client with a bearer
//! token from the server's [`TokenSource`] on every request. A request the server answers with
//! 401 is sent once more with a new token (refreshed, or fetched again); a token that cannot
//! be had fails the request with a message that says what to do (never the token).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::source::{OAuthError, TokenSource};

type Sse = sse_stream::Sse;
type SseError = sse_stream::Error;
type Headers = HashMap<HeaderName, HeaderValue>;

/// `inner` with the tokens of `source` (see the module docs).
#[derive(Clone)]
pub struct Authorized<C> {
    inner: C,
    source: Arc<TokenSource>,
}

impl<C> Authorized<C> {
    pub fn new(inner: C, source: Arc<TokenSource>) -> Authorized<C> {
        Authorized { inner, source }
    }
}

fn failed<E: std::error::Error + Send + Sync + 'static>(e: OAuthError) -> StreamableHttpError<E> {
    StreamableHttpError::Auth(AuthError::AuthorizationFailed(e.to_string()))
}

impl<C: StreamableHttpClient + Sync> Authorized<C> {
    /// `call` with the current token; on 401, once more with a new one.
    async fn with_token<T, F, Fut>(&self, call: F) -> Result<T, StreamableHttpError<C::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<C::Error>>>,
    {
        let token = self.source.token().await.map_err(failed)?;
        match call(Some(token.clone())).await {
            Err(StreamableHttpError::AuthRequired(challenge)) => {
                match self.source.rejected(&token).await {
                    Ok(Some(fresh)) => call(Some(fresh)).await,
                    Ok(None) => Err(StreamableHttpError::AuthRequired(challenge)),
                    Err(e) => Err(failed(e)),
                }
            }
            other => other,
        }
    }
}

/// The trait's methods, each a call of the same method of `inner` under
/// [`Authorized::with_token`]: the arguments before the auth header are cloned for each try,
/// the ones after it are `Copy`, and the caller's auth header is replaced by the token.
macro_rules! with_token {
    ($(fn $name:ident($($arg:ident: $ty:ty),*; $($extra:ident: $xty:ty),*) -> $out:ty;)*) => {$(
        async fn $name(
            &self,
            $($arg: $ty,)*
            _auth: Option<String>,
            headers: Headers,
            $($extra: $xty,)*
        ) -> Result<$out, StreamableHttpError<Self::Error>> {
            self.with_token(|t| {
                let ($($arg,)* headers) = ($($arg.clone(),)* headers.clone());
                async move { self.inner.$name($($arg,)* t, headers, $($extra,)*).await }
            })
            .await
        }
    )*};
}

type Stream = BoxStream<'static, Result<Sse, SseError>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Authorized<C> {
    type Error = C::Error;

    with_token! {
        fn post_message(uri: Arc<str>, message: ClientJsonRpcMessage, session_id: Option<Arc<str>>;)
            -> StreamableHttpPostResponse;
        fn post_message_with_max_sse_event_size(
            uri: Arc<str>, message: ClientJsonRpcMessage, session_id: Option<Arc<str>>; max: usize
        ) -> StreamableHttpPostResponse;
        fn post_message_with_response_limits(
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>;
            limits: StreamableHttpResponseLimits
        ) -> StreamableHttpPostResponse;
        fn delete_session(uri: Arc<str>, session_id: Arc<str>;) -> ();
        fn get_stream(uri: Arc<str>, session_id: Option<Arc<str>>, last_event_id: Option<String>;)
            -> Stream;
        fn get_stream_with_max_sse_event_size(
            uri: Arc<str>, session_id: Option<Arc<str>>, last_event_id: Option<String>; max: usize
        ) -> Stream;
    }
}
