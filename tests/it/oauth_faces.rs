//! OAuth on the service's HTTP faces (docs/auth.md, docs/jupyter.md), through the real service
//! (`service --http … --oauth-issuer …`) and a real authorization server: an access token works
//! on MCP (`/mcp`) and on the Jupyter API (`/api`), where `GET` needs the read scope and
//! starting a kernel or opening its channels needs execute; the service's static token keeps
//! working beside it on both; no token, and a bad one, are 401 with the RFC 9728 / RFC 6750
//! words; no token reaches the service's log. `kernel-mcp doctor` says whether OAuth is on, for
//! which issuer and audience, and whether the issuer's keys are reachable.

use std::io::{Read, Write};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::cli::run;
use crate::common::oauth::{AuthServer, OAuthServe, call_2026, free_port, request, structured_of};
use crate::common::service::{TestService, http_face};

const RW: &str = "kernel-mcp:read kernel-mcp:execute";

/// The status line of a websocket handshake for `path` with `authorization`.
async fn upgrade(port: u16, path: &str, authorization: &str) -> String {
    let (path, authorization) = (path.to_string(), authorization.to_string());
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {authorization}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        .unwrap();
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_string()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn an_access_token_works_on_mcp_and_the_jupyter_api_of_the_service_beside_its_static_token() {
    let auth = AuthServer::start().await;
    let svc = TestService::new();
    let service = OAuthServe::service(&svc, &auth.issuer).await;
    let face = http_face(&svc).await;
    assert_eq!(
        face.record["oauth_issuer"],
        auth.issuer.as_str(),
        "{}",
        face.record
    );
    let (url, api) = (
        service.url(),
        format!("http://127.0.0.1:{}/api/kernels", service.port),
    );
    let alice = auth.token("alice", RW, &url).await;
    let reader = auth.token("alice", "kernel-mcp:read", &url).await;

    // MCP: a session made with the access token, seen with the static token (the owner).
    let made = structured_of(
        &call_2026(
            &url,
            Some(&alice),
            "create_session",
            json!({"session_id": "j"}),
        )
        .await,
    );
    let kernel_id = made["kernel_id"].as_str().expect("a kernel id").to_string();
    // The owner (the static token, an admin) sees alice's session as hers: `OWNER/NAME`.
    let listed =
        structured_of(&call_2026(&url, Some(&face.token), "list_sessions", json!({})).await);
    let id = listed["sessions"][0]["session_id"]
        .as_str()
        .unwrap_or_default();
    assert!(id.starts_with("oauth:") && id.ends_with("/j"), "{listed}");
    assert_eq!(
        listed["sessions"][0]["owner"].as_str(),
        id.strip_suffix("/j")
    );

    // The Jupyter API: reading takes the read scope, changing kernels the execute scope.
    for token in [&alice, &reader] {
        let r = request(Method::GET, &api, Some(token), &[], None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let kernels: Value = serde_json::from_str(&r.body).unwrap();
        assert!(
            kernels
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["id"] == kernel_id.as_str()),
            "{kernels}"
        );
    }
    let r = request(
        Method::POST,
        &api,
        Some(&reader),
        &[],
        Some(&json!({"name": "python3"})),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        r.challenge()
            .contains("error=\"insufficient_scope\", scope=\"kernel-mcp:execute\""),
        "{}",
        r.challenge()
    );
    let channels = format!("/api/kernels/{kernel_id}/channels");
    let status = upgrade(service.port, &channels, &format!("Bearer {reader}")).await;
    assert!(
        status.contains(" 403 "),
        "a read-only token opens no channels: {status}"
    );
    let status = upgrade(service.port, &channels, &format!("Bearer {alice}")).await;
    assert!(status.contains(" 101 "), "{status}");
    let r = request(
        Method::POST,
        &api,
        Some(&alice),
        &[],
        Some(&json!({"name": "python3"})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let started: Value = serde_json::from_str(&r.body).unwrap();
    let gone = format!("{api}/{}", started["id"].as_str().unwrap());
    assert_eq!(
        request(Method::DELETE, &gone, Some(&alice), &[], None)
            .await
            .status,
        204
    );

    // Jupyter's own way with the static token still works; no token or a bad one is 401.
    let jupyter = [("authorization", format!("token {}", face.token))];
    let headers: Vec<(&str, &str)> = jupyter.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        request(Method::GET, &api, None, &headers, None)
            .await
            .status,
        200
    );
    let none = request(Method::GET, &api, None, &[], None).await;
    assert_eq!(none.status, 401);
    assert!(
        none.challenge().contains("resource_metadata=\""),
        "{}",
        none.challenge()
    );
    let other = auth
        .token("alice", RW, "http://127.0.0.1:1/elsewhere")
        .await;
    let bad = request(Method::GET, &api, Some(&other), &[], None).await;
    assert_eq!(bad.status, 401);
    assert!(
        bad.challenge().contains("error=\"invalid_token\""),
        "{}",
        bad.challenge()
    );

    let done = structured_of(
        &call_2026(
            &url,
            Some(&alice),
            "destroy_session",
            json!({"session_id": "j"}),
        )
        .await,
    );
    assert_eq!(done["session_id"], "j");
    let log = format!("{}\n{}", service.stderr(), svc.log_text());
    for t in [&alice, &reader, &other, &face.token] {
        assert!(
            !log.contains(t.as_str()),
            "a token is in the service's log:\n{log}"
        );
    }
    service.stop().await;
}

#[tokio::test]
async fn doctor_says_whether_oauth_is_on_for_which_issuer_and_whether_its_keys_are_reachable() {
    let auth = AuthServer::start().await;
    let svc = TestService::new();
    let cwd = tempfile::tempdir().unwrap();
    let audience = "http://127.0.0.1:1/mcp";
    let out = run(
        &svc,
        cwd.path(),
        &[
            "doctor",
            "--json",
            "--oauth-issuer",
            &auth.issuer,
            "--oauth-audience",
            audience,
        ],
    )
    .await;
    let report: Value = serde_json::from_str(&out.stdout).expect("doctor --json");
    let oauth = &report["oauth"];
    assert_eq!(oauth["issuer"], auth.issuer.as_str(), "{oauth}");
    assert_eq!(oauth["audience"], audience);
    assert_eq!(oauth["jwks_reachable"], true, "{oauth}");
    assert!(oauth["keys"].as_u64().unwrap() >= 1, "{oauth}");

    let gone = format!("http://127.0.0.1:{}", free_port());
    let out = run(
        &svc,
        cwd.path(),
        &[
            "doctor",
            "--oauth-issuer",
            &gone,
            "--oauth-audience",
            audience,
        ],
    )
    .await;
    assert!(
        out.stdout.contains("OAuth") && out.stdout.contains(&gone),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("FAIL"),
        "unreachable keys are a failure line:\n{}",
        out.stdout
    );

    let out = run(&svc, cwd.path(), &["doctor", "--json"]).await;
    let report: Value = serde_json::from_str(&out.stdout).expect("doctor --json");
    assert_eq!(
        report["oauth"],
        Value::Null,
        "off without options or a service with OAuth"
    );
}
