//! Authentication under the faces (docs/auth.md): who a request comes from and how far it may
//! go, decided once per request where it arrives, the same way for MCP (`/mcp`), the Jupyter
//! API (`/api`) and the service's socket.
//!
//! - [`token`]: the static token of an HTTP face and the ways a request presents a token.
//! - [`http`]: [`HttpAccess`], who may reach an HTTP face (bind rules, `Host`/`Origin`
//!   allow-lists) and [`HttpAccess::authenticate`], who a request comes from.
//! - [`oauth`]: OAuth 2.1 access tokens (JWT, the issuer's JWKS), scopes, and the RFC 9728
//!   protected resource metadata.
//! - [`need`]: what access a request needs (a JSON-RPC body's method and tool, or a route).
//! - [`gate`]: the middleware each HTTP face puts in front of its routes; it puts the
//!   request's [`Authenticated`] into the request's extensions.
//! - [`challenge`]: 401 / 403 / 503 answers with their `WWW-Authenticate` headers.
//! - [`peer`]: the socket face (`SO_PEERCRED`); [`stamp`]: the connection transports (stdio,
//!   socket), whose messages carry their connection's [`Authenticated`].
//!
//! [`authenticated`] is how whoever serves a request reads who it comes from.

pub mod challenge;
pub mod gate;
pub mod http;
pub mod need;
pub mod oauth;
pub mod peer;
pub mod stamp;
pub mod token;

pub use challenge::{Face, Rejection};
pub use gate::{Gate, gate};
pub use http::{AccessError, HttpAccess};
pub use need::Need;
pub use token::{Presentation, Token, TokenError};

use crate::principal::Authenticated;

/// Who an MCP request comes from, as its face stamped it: in the message's extensions
/// (stdio, socket) or in the HTTP request's (`http::request::Parts`, which rmcp puts in the
/// message's). `None` for a request no face stamped (a handler serving an in-process test).
pub fn authenticated(extensions: &rmcp::model::Extensions) -> Option<&Authenticated> {
    extensions.get::<Authenticated>().or_else(|| {
        extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Authenticated>())
    })
}
