//! The REST half of a Jupyter server's kernel API, as Jupyter Server, Kernel Gateway and
//! Enterprise Gateway serve it: kernelspecs, start, status, interrupt, restart and delete.
//!
//! Every request carries `Authorization: token …` (a header marked sensitive, so it is never
//! printed) and skips the XSRF check that way. Failures are a [`GatewayError`] whose text
//! names the gateway and its URL but never the token: a refused token (401/403) is
//! [`GatewayError::Unauthorized`], a server that cannot be reached (refused, reset, DNS,
//! timeout) [`GatewayError::Unavailable`], both at once, never at a timeout of ours.
//!
//! Spec: <https://jupyter-server.readthedocs.io/en/latest/developers/rest-api.html>

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::Gateway;
use super::config::ConfigError;

/// How long connecting to a gateway may take before it counts as unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request other than a kernel start may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of one REST answer that is read (bytes). The largest real answers, kernelspec
/// lists and kernel lists, are kilobytes; anything past this is not a Jupyter server's.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Why a gateway request failed. The texts never hold the token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    #[error("gateway '{gateway}' ({url}) cannot be reached: {detail}")]
    Unavailable {
        gateway: String,
        url: String,
        detail: String,
    },
    #[error("gateway '{gateway}' ({url}) refused the token (HTTP {status})")]
    Unauthorized {
        gateway: String,
        url: String,
        status: u16,
    },
    /// The kernel (or kernelspec) does not exist there.
    #[error("gateway '{gateway}' has no {what}")]
    NotFound { gateway: String, what: String },
    /// An answer over [`MAX_BODY_BYTES`]: reading stopped there.
    #[error(
        "gateway '{gateway}' ({url}) sent more than {limit_mib} MiB for {what}, far more than a Jupyter server answers; kernel-mcp stopped reading. Check that the URL is a Jupyter server's and that the server is healthy."
    )]
    TooLarge {
        gateway: String,
        url: String,
        what: String,
        limit_mib: usize,
    },
    /// Any other answer we cannot use.
    #[error("gateway '{gateway}' answered {what}: HTTP {status} {body}")]
    Http {
        gateway: String,
        what: String,
        status: u16,
        body: String,
    },
}

/// One kernel as `GET /api/kernels/{id}` describes it.
#[derive(Debug, Clone)]
pub struct KernelModel {
    pub id: String,
    pub name: String,
    /// `idle`, `busy`, `starting`, `restarting`, `dead`…
    pub execution_state: String,
}

/// A REST client for one gateway (cheap to clone).
#[derive(Clone)]
pub struct Rest {
    gateway: Gateway,
    http: reqwest::Client,
}

impl Rest {
    /// A client for `gateway`. Errors: [`ConfigError::HttpClient`] when the HTTP client cannot
    /// be built.
    pub fn new(gateway: Gateway) -> Result<Rest, ConfigError> {
        // Before the first TLS client (this one, or a kernel's websocket after it) is made.
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(ConfigError::HttpClient)?;
        Ok(Rest { gateway, http })
    }

    /// The gateway this client talks to.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// `GET /api/kernelspecs`: the `default` name and the `kernelspecs` map.
    pub async fn kernelspecs(&self) -> Result<Value, GatewayError> {
        self.call(
            Method::GET,
            "api/kernelspecs",
            None,
            REQUEST_TIMEOUT,
            "kernelspecs",
        )
        .await
    }

    /// `GET /api/kernels`: the running kernels.
    pub async fn kernels(&self) -> Result<Vec<KernelModel>, GatewayError> {
        let v = self
            .call(
                Method::GET,
                "api/kernels",
                None,
                REQUEST_TIMEOUT,
                "the kernel list",
            )
            .await?;
        Ok(v.as_array()
            .map(|a| a.iter().filter_map(kernel_model).collect())
            .unwrap_or_default())
    }

    /// The id of the kernel of the notebook at `path` on this server (`GET /api/sessions`,
    /// Jupyter Server's map of open documents to kernels; Kernel Gateway has none). Paths
    /// compare without leading or trailing `/`. `Ok(None)`: no session has that path.
    /// Errors: [`GatewayError`] (a server without `/api/sessions` answers 404:
    /// [`GatewayError::NotFound`] naming it).
    pub async fn notebook_kernel(&self, path: &str) -> Result<Option<String>, GatewayError> {
        let v = self
            .call(
                Method::GET,
                "api/sessions",
                None,
                REQUEST_TIMEOUT,
                "the session list (/api/sessions)",
            )
            .await?;
        Ok(session_kernel(&v, path))
    }

    /// `POST /api/kernels` `{"name", "env"}`: start a kernel, waiting up to `timeout`.
    pub async fn start(
        &self,
        name: &str,
        env: &std::collections::BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<KernelModel, GatewayError> {
        let body = json!({"name": name, "env": env});
        let v = self
            .call(
                Method::POST,
                "api/kernels",
                Some(body),
                timeout,
                "the kernel start",
            )
            .await?;
        kernel_model(&v).ok_or_else(|| self.http_err("the kernel start", 200, "no kernel id"))
    }

    /// `GET /api/kernels/{id}`. A kernel that is gone is [`GatewayError::NotFound`].
    pub async fn kernel(&self, id: &str) -> Result<KernelModel, GatewayError> {
        let v = self
            .call(
                Method::GET,
                &kernel_path(id, ""),
                None,
                REQUEST_TIMEOUT,
                &format!("kernel {id}"),
            )
            .await?;
        kernel_model(&v).ok_or_else(|| self.http_err("a kernel", 200, "no kernel id"))
    }

    /// `POST /api/kernels/{id}/interrupt`.
    pub async fn interrupt(&self, id: &str) -> Result<(), GatewayError> {
        self.post_to_kernel(id, "/interrupt", REQUEST_TIMEOUT).await
    }

    /// `POST /api/kernels/{id}/restart`, waiting up to `timeout`.
    pub async fn restart(&self, id: &str, timeout: Duration) -> Result<(), GatewayError> {
        self.post_to_kernel(id, "/restart", timeout).await
    }

    /// `POST /api/kernels/{id}{action}` with an empty body, waiting up to `timeout`.
    async fn post_to_kernel(
        &self,
        id: &str,
        action: &str,
        timeout: Duration,
    ) -> Result<(), GatewayError> {
        let what = format!("kernel {id}");
        self.call(
            Method::POST,
            &kernel_path(id, action),
            Some(json!({})),
            timeout,
            &what,
        )
        .await
        .map(drop)
    }

    /// `DELETE /api/kernels/{id}`: shut the kernel down. A kernel already gone is `Ok`.
    pub async fn delete(&self, id: &str, timeout: Duration) -> Result<(), GatewayError> {
        let what = format!("kernel {id}");
        match self
            .call(Method::DELETE, &kernel_path(id, ""), None, timeout, &what)
            .await
        {
            Ok(_) | Err(GatewayError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One request in its telemetry span (a client span named by the route: `{id}` for the
    /// kernel id); `what` names the resource in errors.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
        what: &str,
    ) -> Result<Value, GatewayError> {
        use tracing::Instrument;
        let span =
            crate::telemetry::spans::gateway(method.as_str(), &route(path), &self.gateway.name);
        let url = self.gateway.join(path);
        let mut req = self.http.request(method, url).timeout(timeout);
        if let Some(h) = self.gateway.auth_header() {
            req = req.header(reqwest::header::AUTHORIZATION, h);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let out = self.send(req, what).instrument(span.clone()).await;
        if out.is_err() {
            crate::telemetry::spans::failed(&span, "gateway_error");
        }
        out
    }

    /// Send `req` and read its answer: JSON (`Null` for an empty body), or the error its
    /// status or body is; `what` names the resource in errors.
    async fn send(&self, req: reqwest::RequestBuilder, what: &str) -> Result<Value, GatewayError> {
        let resp = req.send().await.map_err(|e| self.unavailable(&e))?;
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(GatewayError::Unauthorized {
                gateway: self.gateway.name.clone(),
                url: self.gateway.url.clone(),
                status: status.as_u16(),
            });
        }
        if status == StatusCode::NOT_FOUND {
            return Err(GatewayError::NotFound {
                gateway: self.gateway.name.clone(),
                what: what.to_string(),
            });
        }
        let body = self.read_body(resp, what).await?;
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let body = super::redact(&self.gateway, &super::first_chars(&reason(&text), 300));
            return Err(self.http_err(what, status.as_u16(), &body));
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|e| self.http_err(what, status.as_u16(), &format!("not JSON: {e}")))
    }

    /// The body of `resp` as it streams, refused past [`MAX_BODY_BYTES`] (at once when the
    /// announced length is already over it). Dropping the response closes the connection.
    async fn read_body(
        &self,
        mut resp: reqwest::Response,
        what: &str,
    ) -> Result<Vec<u8>, GatewayError> {
        let too_large = || GatewayError::TooLarge {
            gateway: self.gateway.name.clone(),
            url: self.gateway.url.clone(),
            what: what.to_string(),
            limit_mib: MAX_BODY_BYTES >> 20,
        };
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.unavailable(&e))? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                tracing::warn!(gateway = %self.gateway.name, %what, "a REST answer passed {MAX_BODY_BYTES} bytes; stopped reading");
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn unavailable(&self, e: &reqwest::Error) -> GatewayError {
        // reqwest's text carries the URL, which holds no token; the chain says why.
        let mut detail = if e.is_timeout() {
            "timed out".to_string()
        } else if e.is_connect() {
            "connection failed".to_string()
        } else {
            "request failed".to_string()
        };
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail.push_str(": ");
            detail.push_str(&s.to_string());
            source = s.source();
        }
        GatewayError::Unavailable {
            gateway: self.gateway.name.clone(),
            url: self.gateway.url.clone(),
            detail: super::redact(&self.gateway, &detail),
        }
    }

    fn http_err(&self, what: &str, status: u16, body: &str) -> GatewayError {
        GatewayError::Http {
            gateway: self.gateway.name.clone(),
            what: what.to_string(),
            status,
            body: body.to_string(),
        }
    }
}

/// `api/kernels/{id}{tail}` with the id percent-safe (ids are UUIDs; anything else is escaped).
/// `path` with the kernel id of `api/kernels/<id>/…` as `{id}`: a span name of few values.
fn route(path: &str) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    if parts.len() > 2 && parts[..2] == ["api", "kernels"] {
        parts[2] = "{id}";
    }
    format!("/{}", parts.join("/"))
}

fn kernel_path(id: &str, tail: &str) -> String {
    let safe: String = id
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("api/kernels/{safe}{tail}")
}

/// In a `GET /api/sessions` answer, the kernel id of the session whose `path` is `path`
/// (compared without leading or trailing `/`).
fn session_kernel(sessions: &Value, path: &str) -> Option<String> {
    let want = path.trim_matches('/');
    sessions.as_array()?.iter().find_map(|s| {
        let p = s["path"].as_str()?.trim_matches('/');
        (p == want)
            .then(|| s["kernel"]["id"].as_str().map(String::from))
            .flatten()
    })
}

fn kernel_model(v: &Value) -> Option<KernelModel> {
    Some(KernelModel {
        id: v["id"].as_str()?.to_string(),
        name: v["name"].as_str().unwrap_or_default().to_string(),
        execution_state: v["execution_state"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    })
}

/// The `reason`/`message` of a Jupyter error body, else the body.
fn reason(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v["reason"]
                .as_str()
                .or(v["message"].as_str())
                .filter(|s| !s.is_empty())
                .map(String::from)
        })
        .unwrap_or_else(|| text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_paths_escape_anything_but_id_characters() {
        assert_eq!(
            kernel_path("ab-12_x", "/interrupt"),
            "api/kernels/ab-12_x/interrupt"
        );
        assert_eq!(kernel_path("../x?y", ""), "api/kernels/%2E%2E%2Fx%3Fy");
    }

    #[test]
    fn a_notebook_path_finds_its_sessions_kernel() {
        let sessions = json!([
            {"id": "s1", "path": "a/b.ipynb", "kernel": {"id": "k1"}},
            {"id": "s2", "path": "/c.ipynb", "kernel": {"id": "k2"}},
            {"id": "s3", "path": "d.ipynb", "kernel": null},
        ]);
        assert_eq!(
            session_kernel(&sessions, "/a/b.ipynb").as_deref(),
            Some("k1")
        );
        assert_eq!(session_kernel(&sessions, "c.ipynb").as_deref(), Some("k2"));
        assert_eq!(session_kernel(&sessions, "d.ipynb"), None);
        assert_eq!(session_kernel(&sessions, "e.ipynb"), None);
        assert_eq!(session_kernel(&json!({"x": 1}), "a/b.ipynb"), None);
    }

    #[test]
    fn error_bodies_give_their_reason() {
        assert_eq!(
            reason(r#"{"reason": "No such kernel", "message": ""}"#),
            "No such kernel"
        );
        assert_eq!(reason(r#"{"message": "boom"}"#), "boom");
        assert_eq!(reason(" plain "), "plain");
        assert_eq!(super::super::first_chars("abcdef", 3), "abc…");
    }
}
