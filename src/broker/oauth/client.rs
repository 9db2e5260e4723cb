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

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Authorized<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        headers: Headers,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.with_token(|t| {
            let (uri, message, session_id, headers) = (
                uri.clone(),
                message.clone(),
                session_id.clone(),
                headers.clone(),
            );
            async move {
                self.inner
                    .post_message(uri, message, session_id, t, headers)
                    .await
            }
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        headers: Headers,
        max: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.with_token(|t| {
            let (uri, message, session_id, headers) = (
                uri.clone(),
                message.clone(),
                session_id.clone(),
                headers.clone(),
            );
            async move {
                self.inner
                    .post_message_with_max_sse_event_size(uri, message, session_id, t, headers, max)
                    .await
            }
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.with_token(|t| {
            let (uri, message, session_id, headers) = (
                uri.clone(),
                message.clone(),
                session_id.clone(),
                headers.clone(),
            );
            async move {
                self.inner
                    .post_message_with_response_limits(uri, message, session_id, t, headers, limits)
                    .await
            }
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth: Option<String>,
        headers: Headers,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.with_token(|t| {
            let (uri, session_id, headers) = (uri.clone(), session_id.clone(), headers.clone());
            async move { self.inner.delete_session(uri, session_id, t, headers).await }
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        headers: Headers,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.with_token(|t| {
            let (uri, session_id, last, headers) = (
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                headers.clone(),
            );
            async move {
                self.inner
                    .get_stream(uri, session_id, last, t, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        headers: Headers,
        max: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.with_token(|t| {
            let (uri, session_id, last, headers) = (
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                headers.clone(),
            );
            async move {
                self.inner
                    .get_stream_with_max_sse_event_size(uri, session_id, last, t, headers, max)
                    .await
            }
        })
        .await
    }
}
