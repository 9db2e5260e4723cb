//! What access a request needs, decided before it reaches its route.
//!
//! - [`Need::Route`]: from the method and path alone (the Jupyter API: reads are `GET`).
//! - [`Need::JsonRpc`]: from the JSON-RPC message in a `POST` body (MCP): its `method`, and
//!   for `tools/call` its tool (`params.name`), as the face's function rates them; the
//!   2026-07-28 `Mcp-Method` / `Mcp-Name` headers, when present, are rated too and the higher
//!   need wins (so a header that understates the call cannot lower it). A batch needs what its
//!   most demanding message needs. The body is read at most [`MAX_BODY`] bytes (rmcp's own
//!   limit) and handed on unchanged; one that does not parse needs `execute` (the route then
//!   refuses it as it would anyway). Other methods (`GET` for a stream, `DELETE` of a
//!   session) need `read`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method};
use serde::Deserialize;

use super::challenge::Rejection;
use crate::principal::Access;

/// Largest request body read to decide what it needs (rmcp's limit for a POST to `/mcp`).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// How a face rates what a request needs.
#[derive(Clone, Copy)]
pub enum Need {
    /// From the method and path alone.
    Route(fn(&Method, &str) -> Access),
    /// From the JSON-RPC method (and for `tools/call`, the tool name) of a POST body.
    JsonRpc(fn(&str, Option<&str>) -> Access),
}

impl Need {
    /// What `request` needs, and the request to hand on (its body read and put back for
    /// [`Need::JsonRpc`]). Errors: [`Rejection::TooLarge`] for a body over [`MAX_BODY`].
    pub async fn of(self, request: Request) -> Result<(Request, Access), Rejection> {
        match self {
            Need::Route(rate) => {
                let need = rate(request.method(), request.uri().path());
                Ok((request, need))
            }
            Need::JsonRpc(_) if request.method() != Method::POST => Ok((request, Access::Read)),
            Need::JsonRpc(rate) => {
                let (parts, body) = request.into_parts();
                let bytes = axum::body::to_bytes(body, MAX_BODY)
                    .await
                    .map_err(|_| Rejection::TooLarge { limit: MAX_BODY })?;
                let need = of_body(&bytes, rate).max(of_headers(&parts.headers, rate));
                Ok((Request::from_parts(parts, Body::from(bytes)), need))
            }
        }
    }
}

/// One JSON-RPC message, as far as the need goes.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
}

/// What the message (or batch) in `body` needs; `execute` when it does not parse.
fn of_body(body: &[u8], rate: fn(&str, Option<&str>) -> Access) -> Access {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return match serde_json::from_slice::<Vec<Message>>(body) {
            Ok(batch) => batch
                .iter()
                .map(|m| of_message(m, rate))
                .max()
                .unwrap_or(Access::Read),
            Err(_) => Access::Execute,
        };
    }
    match serde_json::from_slice::<Message>(body) {
        Ok(m) => of_message(&m, rate),
        Err(_) => Access::Execute,
    }
}

/// A message without a method is a response to the server (an elicitation's answer): `read`.
fn of_message(m: &Message, rate: fn(&str, Option<&str>) -> Access) -> Access {
    match &m.method {
        Some(method) => rate(method, m.params.as_ref().and_then(|p| p.name.as_deref())),
        None => Access::Read,
    }
}

/// What the `Mcp-Method` (and `Mcp-Name`) headers say the call is; `read` without them.
fn of_headers(headers: &HeaderMap, rate: fn(&str, Option<&str>) -> Access) -> Access {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match value("mcp-method") {
        Some(method) => rate(method, value("mcp-name")),
        None => Access::Read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(method: &str, name: Option<&str>) -> Access {
        match (method, name) {
            ("tools/call", Some("list_sessions")) => Access::Read,
            ("tools/call", _) => Access::Execute,
            ("tools/list", _) => Access::Read,
            _ => Access::Execute,
        }
    }

    fn post(body: &str, headers: &[(&str, &str)]) -> Request {
        let mut r = Request::post("/mcp");
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.body(Body::from(body.to_string())).unwrap()
    }

    async fn need(body: &str, headers: &[(&str, &str)]) -> Access {
        let (r, need) = Need::JsonRpc(rate).of(post(body, headers)).await.unwrap();
        let back = axum::body::to_bytes(r.into_body(), MAX_BODY).await.unwrap();
        assert_eq!(back, body.as_bytes(), "the body is handed on unchanged");
        need
    }

    #[tokio::test]
    async fn a_call_needs_what_its_method_and_tool_need_and_headers_never_lower_it() {
        let call = |tool: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
            )
        };
        assert_eq!(need(&call("list_sessions"), &[]).await, Access::Read);
        assert_eq!(need(&call("execute"), &[]).await, Access::Execute);
        assert_eq!(
            need(
                &call("execute"),
                &[("mcp-method", "tools/call"), ("mcp-name", "list_sessions")]
            )
            .await,
            Access::Execute,
            "a header naming a read-only tool does not lower what the body needs"
        );
        assert_eq!(
            need(
                &call("list_sessions"),
                &[("Mcp-Method", "tools/call"), ("Mcp-Name", "execute")]
            )
            .await,
            Access::Execute
        );
        let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert_eq!(need(list, &[]).await, Access::Read);
        let batch = format!("[{list}, {}]", call("execute"));
        assert_eq!(need(&batch, &[]).await, Access::Execute);
        assert_eq!(
            need(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &[]).await,
            Access::Read
        );
        assert_eq!(need("not json", &[]).await, Access::Execute);
        assert_eq!(
            need(r#"{"method":"tools/call","params":[1]}"#, &[]).await,
            Access::Execute
        );
    }

    #[tokio::test]
    async fn other_methods_need_read_and_a_huge_body_is_refused() {
        let get = Request::get("/mcp").body(Body::empty()).unwrap();
        assert_eq!(Need::JsonRpc(rate).of(get).await.unwrap().1, Access::Read);
        let big = "x".repeat(MAX_BODY + 1);
        assert!(matches!(
            Need::JsonRpc(rate).of(post(&big, &[])).await,
            Err(Rejection::TooLarge { .. })
        ));
        let route = |m: &Method, p: &str| {
            if m == Method::GET && !p.ends_with("/channels") {
                Access::Read
            } else {
                Access::Execute
            }
        };
        let ws = Request::get("/api/kernels/k/channels")
            .body(Body::empty())
            .unwrap();
        assert_eq!(Need::Route(route).of(ws).await.unwrap().1, Access::Execute);
    }
}
