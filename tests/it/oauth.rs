//! kernel-mcp as an OAuth 2.1 resource server (docs/auth.md), through the real binary
//! (`serve --transport http --oauth-issuer … --oauth-audience …`) and a real authorization
//! server (oidc-provider, `tests/oauth/provider.mjs`): the RFC 9728 metadata; 401 with
//! `resource_metadata` without a token; 401 `invalid_token` for every kind of bad token, which
//! leaves no session, no kernel and no log line with the token behind; 403
//! `insufficient_scope` for a read-only token that runs code; key rotation; refresh; the
//! static token beside OAuth; and the MCP Python SDK's OAuth flow end to end.
//!
//! Tokens named `real_…` come from the provider's own authorization code flow; `minted_…` are
//! signed by the test harness (provider.mjs `/harness/mint`) for cases no real server issues.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::oauth::{AuthServer, OAuthServe, call_2026, mcp_python, request, structured_of};

const RW: &str = "kernel-mcp:read kernel-mcp:execute";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served_at_both_well_known_paths_without_a_token() {
    let auth = AuthServer::start().await;
    let server = OAuthServe::start(&auth.issuer, &[], &[]).await;
    for path in ["", "/mcp"] {
        let url = format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource{path}",
            server.port
        );
        let r = request(Method::GET, &url, None, &[], None).await;
        assert_eq!(r.status, 200, "{url}: {}", r.body);
        let doc: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(doc["resource"], server.url());
        assert_eq!(doc["authorization_servers"], json!([auth.issuer]));
        assert_eq!(
            doc["scopes_supported"],
            json!(["kernel-mcp:read", "kernel-mcp:execute", "kernel-mcp:admin"])
        );
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
    server.stop().await;
}

#[tokio::test]
async fn a_call_without_a_token_is_401_pointing_at_the_resource_metadata() {
    let auth = AuthServer::start().await;
    let server = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let r = call_2026(&server.url(), None, "list_sessions", json!({})).await;
    assert_eq!(r.status, 401, "{}", r.body);
    let challenge = r.challenge();
    let metadata = format!(
        "resource_metadata=\"http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp\"",
        server.port
    );
    assert!(
        challenge.starts_with("Bearer ") && challenge.contains(&metadata),
        "{challenge}"
    );
    assert!(
        !challenge.contains("error="),
        "no token, no error: {challenge}"
    );
    server.stop().await;
}

/// The bad tokens, each with words its `error_description` must hold.
async fn bad_tokens(
    auth: &AuthServer,
    other: &AuthServer,
    audience: &str,
) -> Vec<(&'static str, String, &'static str)> {
    let t = now();
    let good = json!({"sub": "alice", "aud": audience, "scope": RW});
    let with = |extra: Value| {
        let mut c = good.clone();
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let real = auth.token("alice", RW, audience).await;
    // One character in the middle of the signature changed.
    let at = real.len() - 20;
    let swapped = if &real[at..=at] == "A" { "B" } else { "A" };
    let tampered = format!("{}{swapped}{}", &real[..at], &real[at + 1..]);
    vec![
        (
            "real_token_for_another_audience",
            auth.token("alice", RW, "http://127.0.0.1:1/another").await,
            "another resource",
        ),
        (
            "real_token_of_another_issuer_with_the_same_keys",
            other.token("alice", RW, audience).await,
            "another authorization server",
        ),
        (
            "real_token_with_a_tampered_signature",
            tampered,
            "signature",
        ),
        (
            "minted_expired_token",
            auth.mint("issuer", with(json!({"exp": t - 3600, "iat": t - 7200})))
                .await,
            "expired",
        ),
        (
            "minted_not_yet_valid_token",
            auth.mint("issuer", with(json!({"nbf": t + 3600}))).await,
            "not valid yet",
        ),
        (
            "minted_token_signed_by_an_unknown_key",
            auth.mint("foreign", good.clone()).await,
            "does not publish",
        ),
        (
            "minted_unsigned_alg_none_token",
            auth.mint("none", good.clone()).await,
            "algorithm",
        ),
        (
            "minted_hs256_token",
            auth.mint("hs256", good.clone()).await,
            "algorithm",
        ),
        (
            "minted_token_without_sub",
            auth.mint("issuer", json!({"aud": audience, "scope": RW}))
                .await,
            "sub",
        ),
        (
            "not_a_jwt",
            "not-a-jwt-at-all".to_string(),
            "not a signed JWT",
        ),
    ]
}

#[tokio::test]
async fn every_kind_of_bad_token_is_401_invalid_token_and_leaves_nothing_behind() {
    let auth = AuthServer::start().await;
    let other = auth.sharing_keys().await;
    let server = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let tokens = bad_tokens(&auth, &other, &server.url()).await;
    for (kind, token, words) in &tokens {
        let r = call_2026(
            &server.url(),
            Some(token),
            "create_session",
            json!({"session_id": kind}),
        )
        .await;
        assert_eq!(r.status, 401, "{kind}: {}", r.body);
        let challenge = r.challenge();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{kind}: {challenge}"
        );
        assert!(
            challenge.contains("resource_metadata="),
            "{kind}: {challenge}"
        );
        assert!(challenge.contains(words), "{kind}: {challenge}");
        assert!(
            !r.body.contains(token.as_str()) && !challenge.contains(token.as_str()),
            "{kind}"
        );
    }
    // Nothing behind: no session (an admin sees every one), no kernel, no token in the log.
    let admin = auth.token("alice", "kernel-mcp:admin", &server.url()).await;
    let listed =
        structured_of(&call_2026(&server.url(), Some(&admin), "list_sessions", json!({})).await);
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert!(
        crate::common::descendants(server.pid()).is_empty(),
        "a process was started"
    );
    let log = server.stderr();
    assert!(
        log.contains("refused an HTTP request"),
        "the refusals are logged:\n{log}"
    );
    for (kind, token, _) in &tokens {
        assert!(
            !log.contains(token.as_str()),
            "{kind}: the token is in the log:\n{log}"
        );
    }
    assert!(!log.contains(&admin));
    server.stop().await;
}

#[tokio::test]
async fn a_read_only_token_may_list_but_running_code_is_403_insufficient_scope() {
    let auth = AuthServer::start().await;
    let server = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let read = auth.token("bob", "kernel-mcp:read", &server.url()).await;
    let listed = call_2026(&server.url(), Some(&read), "list_sessions", json!({})).await;
    assert_eq!(structured_of(&listed)["sessions"], json!([]));
    for tool in ["execute", "create_session"] {
        let r = call_2026(&server.url(), Some(&read), tool, json!({"code": "1"})).await;
        assert_eq!(r.status, 403, "{tool}: {}", r.body);
        let challenge = r.challenge();
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(
            challenge.contains("scope=\"kernel-mcp:execute\""),
            "{challenge}"
        );
    }
    // A header naming a read-only tool does not get a call to `execute` through.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "1"}}});
    let headers = [("mcp-method", "tools/call"), ("mcp-name", "list_sessions")];
    let r = request(
        Method::POST,
        &server.url(),
        Some(&read),
        &headers,
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // A token with none of kernel-mcp's scopes may not even list.
    let none = auth.token("bob", "openid", &server.url()).await;
    let r = call_2026(&server.url(), Some(&none), "list_sessions", json!({})).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        r.challenge().contains("scope=\"kernel-mcp:read\""),
        "{}",
        r.challenge()
    );
    let principal = format!("principal=oauth:{}#bob", auth.issuer);
    assert!(
        server.stderr().contains(&principal),
        "the refusal names the token's subject:\n{}",
        server.stderr()
    );
    // bob may not have admin: asking for it gets him read and execute only.
    let granted = auth
        .token_response(
            "bob",
            "kernel-mcp:read kernel-mcp:execute kernel-mcp:admin",
            &server.url(),
        )
        .await;
    assert_eq!(granted["scope"], RW, "{granted}");
    server.stop().await;
}

#[tokio::test]
async fn a_valid_token_runs_code_statelessly_and_the_static_token_still_works_beside_it() {
    let auth = AuthServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "static-s3cret\n").unwrap();
    let file = token_file.to_str().unwrap();
    let server = OAuthServe::start(&auth.issuer, &["--token-file", file], &[]).await;
    let url = server.url();
    let alice = auth.token("alice", RW, &url).await;
    let created = structured_of(
        &call_2026(
            &url,
            Some(&alice),
            "create_session",
            json!({"session_id": "w"}),
        )
        .await,
    );
    assert_eq!(created["session_id"], "w");
    let ran = structured_of(
        &call_2026(
            &url,
            Some(&alice),
            "execute",
            json!({"session_id": "w", "code": "6 * 7"}),
        )
        .await,
    );
    assert_eq!(ran["result"], "42", "{ran}");
    // The static token is the owner, an admin: it sees alice's session, as hers.
    let listed =
        structured_of(&call_2026(&url, Some("static-s3cret"), "list_sessions", json!({})).await);
    let id = listed["sessions"][0]["session_id"]
        .as_str()
        .unwrap_or_default();
    assert!(
        id.starts_with("oauth:") && id.ends_with("#alice/w"),
        "{listed}"
    );
    let wrong = call_2026(&url, Some("static-wrong"), "list_sessions", json!({})).await;
    assert_eq!(wrong.status, 401);
    assert!(
        wrong.challenge().contains("invalid_token"),
        "{}",
        wrong.challenge()
    );
    // A refreshed token works too.
    let first = auth.token_response("alice", RW, &url).await;
    let refreshed = auth
        .refresh(
            first["refresh_token"].as_str().expect("a refresh token"),
            &url,
        )
        .await;
    let renewed = refreshed["access_token"].as_str().expect("an access token");
    assert_ne!(renewed, first["access_token"].as_str().unwrap());
    let done = structured_of(
        &call_2026(
            &url,
            Some(renewed),
            "destroy_session",
            json!({"session_id": "w"}),
        )
        .await,
    );
    assert_eq!(done["session_id"], "w");
    let log = server.stderr();
    for t in [alice.as_str(), renewed, "static-s3cret"] {
        assert!(!log.contains(t), "a token is in the log:\n{log}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_and_unknown_kids_refetch_at_most_once_a_minute() {
    let mut auth = AuthServer::start().await;
    let server = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let url = server.url();
    let before = auth.token("alice", RW, &url).await;
    assert_eq!(
        call_2026(&url, Some(&before), "list_sessions", json!({}))
            .await
            .status,
        200
    );
    auth.rotate().await;
    let after = auth.token("alice", RW, &url).await;
    let kid = |t: &str| {
        use base64::Engine as _;
        let h = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(t.split('.').next().unwrap())
            .unwrap();
        serde_json::from_slice::<Value>(&h).unwrap()["kid"].clone()
    };
    assert_ne!(
        kid(&before),
        kid(&after),
        "the provider signs with its new key"
    );
    let r = call_2026(&url, Some(&after), "list_sessions", json!({})).await;
    assert_eq!(r.status, 200, "a token of the new key: {}", r.body);
    let r = call_2026(&url, Some(&before), "list_sessions", json!({})).await;
    assert_eq!(r.status, 200, "the old key is still published: {}", r.body);
    // Made-up kids within the minute: refused, and no further fetch.
    for _ in 0..3 {
        let forged = auth
            .mint("foreign", json!({"sub": "alice", "aud": url, "scope": RW}))
            .await;
        let r = call_2026(&url, Some(&forged), "list_sessions", json!({})).await;
        assert_eq!(r.status, 401);
    }
    let fetches = server
        .stderr()
        .matches("fetched the OAuth issuer's signing keys")
        .count();
    assert_eq!(
        fetches,
        2,
        "at start and once for the new kid:\n{}",
        server.stderr()
    );
    server.stop().await;
}

#[tokio::test]
async fn the_mcp_python_sdk_discovers_signs_in_and_calls_tools_through_oauth() {
    let auth = AuthServer::start().await;
    let server = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let out = tokio::process::Command::new(mcp_python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth/mcp_client.py"))
        .args([server.url().as_str(), "alice", "alice-password", "sdk"])
        .output()
        .await
        .expect("run the MCP Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}\n--- server ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.stderr()
    );
    let r: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(r["registered"], true, "the client registered itself: {r}");
    assert_eq!(r["scope"], RW, "{r}");
    assert!(
        r["tools"].as_array().unwrap().contains(&json!("execute")),
        "{r}"
    );
    let calls = &r["calls"];
    for name in [
        "create_session",
        "execute",
        "list_sessions",
        "destroy_session",
    ] {
        assert_eq!(calls[name]["is_error"], false, "{name}: {r}");
    }
    assert_eq!(calls["execute"]["structured"]["result"], "42", "{r}");
    let token = r["token"].as_str().expect("the token the SDK used");
    assert!(!server.stderr().contains(token), "the token is in the log");
    server.stop().await;
}

/// Run `kernel-mcp ARGS` with `env` and no input; its exit code and stderr.
async fn run_binary(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(args)
        .envs(env.iter().copied())
        .env("VIRTUAL_ENV", crate::common::venv())
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .expect("kernel-mcp exits within 60 s")
        .expect("run kernel-mcp");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn oauth_settings_are_checked_at_start_on_http_and_ignored_on_stdio() {
    let http = ["serve", "--transport", "http", "--port", "0"];
    let aud = "http://127.0.0.1:1/mcp";
    for (extra, words) in [
        (
            vec!["--oauth-issuer", "https://id.example"],
            "--oauth-audience",
        ),
        (
            vec![
                "--oauth-issuer",
                "http://id.example",
                "--oauth-audience",
                aud,
            ],
            "https://",
        ),
        (
            vec![
                "--oauth-issuer",
                "https://id.example",
                "--oauth-audience",
                "kernels",
            ],
            "absolute URL",
        ),
    ] {
        let args: Vec<&str> = http.iter().copied().chain(extra.iter().copied()).collect();
        let (code, stderr) = run_binary(&args, &[]).await;
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    }
    let sse = [
        "serve",
        "--transport",
        "sse",
        "--port",
        "0",
        "--oauth-issuer",
        "https://id.example",
        "--oauth-audience",
        aud,
    ];
    let (code, stderr) = run_binary(&sse, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("SSE"), "{stderr}");
    // stdio has no HTTP face: OAuth settings in the environment (even broken ones) do not stop it.
    let (code, stderr) = run_binary(
        &["serve"],
        &[("KERNEL_MCP_OAUTH_ISSUER", "http://id.example")],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
}
