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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::challenge::text_body;
    use crate::auth::token::Token;

    /// A route that answers with the Authenticated the gate put in the request.
    async fn whoami(request: Request) -> String {
        match request.extensions().get::<Authenticated>() {
            Some(a) => format!("{} {}", a.principal, a.access),
            None => "nobody".into(),
        }
    }

    #[tokio::test]
    async fn the_route_reads_who_the_gate_admitted_and_a_refusal_never_reaches_it() {
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let token = Token::new("t0ken", "--token").unwrap();
        let gate = Gate {
            access: HttpAccess::new(addr, Some(token), None, &[]).unwrap(),
            need: crate::auth::Need::Route(|_, _| Access::Execute),
            face: super::super::Face {
                name: "test",
                body: text_body,
                scheme: "Bearer",
                hint: "send the token",
            },
        };
        let app = axum::Router::new()
            .route("/x", axum::routing::get(whoami))
            .layer(axum::middleware::from_fn_with_state(gate, super::gate));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        crate::tls::install_provider();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let url = format!("http://127.0.0.1:{port}/x");
        let ok = http.get(&url).bearer_auth("t0ken").send().await.unwrap();
        assert_eq!(ok.text().await.unwrap(), "owner admin");
        let refused = http.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), 401);
        assert_eq!(refused.headers()["www-authenticate"], "Bearer");
        let wrong = http.get(&url).bearer_auth("nope").send().await.unwrap();
        assert_eq!(
            wrong.headers()["www-authenticate"],
            "Bearer error=\"invalid_token\""
        );
        server.abort();
    }
}
