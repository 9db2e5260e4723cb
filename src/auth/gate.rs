//! The middleware every HTTP face puts in front of its routes: authenticate the request
//! ([`HttpAccess::authenticate`]), rate what it asks for ([`Need`]), refuse it when the caller
//! may not ([`respond`]), and otherwise hand it on with its [`Authenticated`] in the request's
//! extensions, where the route (and rmcp's `RequestContext`, through the request's
//! `http::request::Parts`) reads it.
//!
//! The owner (static token, or no token configured on loopback) may do everything, so its
//! requests are handed on without reading their bodies. A refusal is logged with the face, the
//! method, the path (never the query, which may hold a token) and the reason, never the
//! token.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::challenge::{Face, Rejection, respond};
use super::http::HttpAccess;
use super::need::Need;
use crate::principal::{Access, Authenticated};

/// What the middleware needs: who may come in, how the face rates requests, how it words
/// refusals.
#[derive(Clone)]
pub struct Gate {
    pub access: HttpAccess,
    pub need: Need,
    pub face: Face,
}

/// The middleware described in the module docs.
pub async fn gate(State(g): State<Gate>, request: Request, next: Next) -> Response {
    match admit(&g, request).await {
        Ok(request) => next.run(request).await,
        Err((rejection, method, path)) => {
            tracing::warn!(
                face = g.face.name,
                %method,
                path,
                reason = rejection.kind(),
                "refused an HTTP request"
            );
            respond(&rejection, &g.face, g.access.oauth().map(|o| o.as_ref()))
        }
    }
}

/// The request with its [`Authenticated`], or why not (with the method and path to log).
async fn admit(
    g: &Gate,
    request: Request,
) -> Result<Request, (Rejection, axum::http::Method, String)> {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let refuse = |r: Rejection| (r, method.clone(), path.clone());
    let caller = g
        .access
        .authenticate(request.headers(), request.uri())
        .await
        .map_err(refuse)?;
    let (mut request, access) = match caller.access {
        Some(Access::Admin) => (request, Access::Admin),
        granted => {
            let (request, need) = g.need.of(request).await.map_err(refuse)?;
            match granted {
                Some(access) if access >= need => (request, access),
                _ => {
                    tracing::info!(
                        principal = %caller.principal,
                        need = need.as_str(),
                        "the token lacks the scope this call needs"
                    );
                    return Err(refuse(Rejection::Scope { need }));
                }
            }
        }
    };
    request.extensions_mut().insert(Authenticated {
        principal: caller.principal,
        access,
    });
    Ok(request)
}
