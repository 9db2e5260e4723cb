//! Refusals at an HTTP face, worded per RFC 6750 and RFC 9728: what a client that sent no
//! token, a bad one, or one without the scope a call needs gets back.
//!
//! - No token: `401` with `WWW-Authenticate: Bearer resource_metadata="…"` (and the scopes to
//!   ask for) under OAuth; `Bearer` (MCP) or `token` (Jupyter) with the static token alone.
//! - A token that is not accepted: `401` with `error="invalid_token"` and an
//!   `error_description` that says why (expired, another audience…) and never quotes the
//!   token.
//! - A valid token without the scope: `403` with `error="insufficient_scope"` and
//!   `scope="…"`, the scope the call needs.
//! - The issuer's keys cannot be had right now: `503` with `Retry-After`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::oauth::{OAuth, TokenProblem};
use crate::principal::Access;

/// Why a request was refused before it reached its route.
#[derive(Debug)]
pub enum Rejection {
    /// No token in any accepted presentation.
    Missing,
    /// A token that is not the static one, where only the static token is accepted.
    WrongStaticToken,
    /// A token that is neither the static one nor a valid OAuth access token.
    Invalid(TokenProblem),
    /// A valid OAuth token without the scope the call needs.
    Scope { need: Access },
    /// A body larger than the face reads to decide what a call needs.
    TooLarge { limit: usize },
}

impl Rejection {
    /// A short word for the log line: never the token or anything from it.
    pub fn kind(&self) -> &'static str {
        match self {
            Rejection::Missing => "no token",
            Rejection::WrongStaticToken => "wrong token",
            Rejection::Invalid(p) => p.kind(),
            Rejection::Scope { .. } => "insufficient scope",
            Rejection::TooLarge { .. } => "body too large",
        }
    }
}

/// How a face words its refusals.
#[derive(Clone, Copy)]
pub struct Face {
    /// `MCP` or `Jupyter API`, for the log line.
    pub name: &'static str,
    /// The response with this status and message, in the face's format.
    pub body: fn(StatusCode, &str) -> Response,
    /// The `WWW-Authenticate` scheme of the static token without OAuth (`Bearer`, `token`).
    pub scheme: &'static str,
    /// What a client without the static token should send, and where it is.
    pub hint: &'static str,
}

/// The response for `rejection` at `face`, under `oauth` when configured.
pub fn respond(rejection: &Rejection, face: &Face, oauth: Option<&OAuth>) -> Response {
    let (status, message, challenge) = match (rejection, oauth) {
        (Rejection::TooLarge { limit }, _) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: a request body may have at most {limit} bytes"),
            None,
        ),
        (Rejection::Invalid(TokenProblem::KeysUnavailable(why)), _) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the authorization server's signing keys cannot be had ({why}); try again shortly"
            ),
            None,
        ),
        (Rejection::Missing | Rejection::WrongStaticToken, None) => {
            let challenge = match rejection {
                Rejection::Missing => face.scheme.to_string(),
                _ => format!("{} error=\"invalid_token\"", face.scheme),
            };
            (
                StatusCode::UNAUTHORIZED,
                format!("Unauthorized: {}", face.hint),
                Some(challenge),
            )
        }
        (Rejection::Missing | Rejection::WrongStaticToken, Some(o)) => (
            StatusCode::UNAUTHORIZED,
            format!(
                "Unauthorized: send `Authorization: Bearer <access token>` with a token of {} for the resource {} (its metadata: {}), or the server's static token",
                o.issuer(),
                o.audience(),
                o.metadata_url()
            ),
            Some(format!(
                "Bearer resource_metadata=\"{}\", scope=\"{} {}\"",
                o.metadata_url(),
                o.scopes().name(Access::Read),
                o.scopes().name(Access::Execute)
            )),
        ),
        (Rejection::Invalid(problem), o) => {
            let description = problem.description();
            let metadata = o
                .map(|o| format!("resource_metadata=\"{}\", ", o.metadata_url()))
                .unwrap_or_default();
            (
                StatusCode::UNAUTHORIZED,
                format!("Unauthorized: the bearer token was refused: {description}"),
                Some(format!(
                    "Bearer {metadata}error=\"invalid_token\", error_description=\"{description}\""
                )),
            )
        }
        (Rejection::Scope { need }, o) => {
            let scope = o
                .map(|o| o.scopes().name(*need).to_string())
                .unwrap_or_else(|| need.to_string());
            let metadata = o
                .map(|o| format!("resource_metadata=\"{}\", ", o.metadata_url()))
                .unwrap_or_default();
            let description = format!("this call needs the {scope} scope");
            (
                StatusCode::FORBIDDEN,
                format!("Forbidden: {description}; ask the authorization server for it"),
                Some(format!(
                    "Bearer {metadata}error=\"insufficient_scope\", scope=\"{scope}\", error_description=\"{description}\""
                )),
            )
        }
    };
    let mut response = (face.body)(status, &message);
    if let Some(value) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
    }
    response
}

/// A plain-text body (the MCP face's).
pub fn text_body(status: StatusCode, message: &str) -> Response {
    (status, message.to_string()).into_response()
}
