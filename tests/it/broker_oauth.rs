//! The broker's own OAuth (docs/broker.md, "OAuth") through the real binary: kernel code calls
//! a tool of an OAuth-protected MCP server — kernel-mcp itself with its resource server on
//! (`serve --transport http --oauth-issuer …`), trusting a real authorization server
//! (oidc-provider, `tests/oauth/provider.mjs`) — with the client credentials grant, and with
//! the authorization code grant after `kernel-mcp broker login` (the test plays the person: it
//! opens the printed URL, signs in over HTTP and lets the redirect reach the loopback
//! listener). A short access-token lifetime makes the broker refresh; a revoked refresh token
//! is an error that says to sign in again. No token reaches the kernel's environment, the
//! broker's log or `mcp.explain`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::common::Server;
use crate::common::broker::{run, stdout_of, write_registry};
use crate::common::oauth::{AuthServer, OAuthServe, form, http};

const RW: &str = "kernel-mcp:read kernel-mcp:execute";

/// A cell that calls `list_sessions` of the protected server `kernels` and prints the result's
/// `isError`, or the error it raised.
const CALL: &str = r#"
from kernel_mcp import mcp
try:
    r = mcp.call("kernels", "list_sessions")
    print("CALLED", r["isError"])
except Exception as e:
    print("RAISED", type(e).__name__, e)
"#;

/// A cell that says whether any environment variable of the kernel holds a JWT.
const ENV_CHECK: &str = r#"
import os
print("JWT_IN_ENV", any(v.startswith("eyJ") or " eyJ" in v for v in os.environ.values()))
"#;

fn credential(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("the credential file")).unwrap()
}

fn access_token(path: &Path) -> String {
    credential(path)["credentials"]["token_response"]["access_token"]
        .as_str()
        .expect("an access token in the credential")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_reach_a_protected_server_and_no_token_reaches_the_kernel_log_or_explain()
 {
    let auth = AuthServer::start().await;
    let protected = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let server = Server::start_with(
        &[(
            "BROKER_SECRET",
            std::ffi::OsStr::new("broker-service-secret"),
        )],
        &[],
    )
    .await;
    write_registry(
        server.workdir(),
        json!({"kernels": {"type": "http", "url": protected.url(), "oauth": {
            "grantType": "client_credentials", "clientId": "broker-service",
            "clientSecret": "${BROKER_SECRET}", "scope": RW}}}),
    );
    server.create_session("s").await;
    let out = stdout_of(&server, "s", CALL).await;
    assert!(
        out.contains("CALLED False"),
        "{out}\n{}",
        server.stderr_tail()
    );
    let out = stdout_of(
        &server,
        "s",
        "import json\nprint(json.dumps(mcp.explain('kernels')))",
    )
    .await;
    let explained: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(explained["oauth"]["grant"], "client_credentials", "{out}");
    assert_eq!(explained["oauth"]["ready"], true, "{out}");
    assert!(
        !out.contains("eyJ") && !out.contains("broker-service-secret"),
        "{out}"
    );
    let out = stdout_of(&server, "s", ENV_CHECK).await;
    assert!(out.contains("JWT_IN_ENV False"), "{out}");
    let log = server.stderr();
    assert!(
        !log.contains("eyJ") && !log.contains("broker-service-secret"),
        "{log}"
    );
    server.shutdown().await;
    protected.stop().await;
}

/// `kernel-mcp broker login kernels --mcp-config REGISTRY`, played through as `alice`: the
/// command's exit status and what it printed.
async fn login(auth: &AuthServer, registry: &Path) -> (i32, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args([
            "broker",
            "login",
            "kernels",
            "--timeout-s",
            "120",
            "--mcp-config",
        ])
        .arg(registry)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run kernel-mcp broker login");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the login prints a URL within 60 s")
            .expect("read its stdout");
        let Some(line) = line else {
            break None;
        };
        printed.push_str(&line);
        printed.push('\n');
        if let Some(u) = line.trim().strip_prefix("http") {
            break Some(format!("http{u}"));
        }
    };
    if let Some(url) = url {
        let back = auth.authorize(&url, "alice").await;
        let page = http()
            .get(&back)
            .send()
            .await
            .expect("the loopback redirect");
        assert_eq!(
            page.status(),
            200,
            "{}",
            page.text().await.unwrap_or_default()
        );
    }
    while let Ok(Some(line)) = lines.next_line().await {
        printed.push_str(&line);
        printed.push('\n');
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the login ends within 60 s")
        .unwrap();
    printed.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), printed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_login_stores_a_private_credential_the_broker_refreshes_and_a_revoked_one_says_to_sign_in_again()
 {
    let auth = AuthServer::start_with_access_ttl(5).await;
    let protected = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let server = Server::start().await;
    let creds = server.workdir().join("creds/kernels.json");
    write_registry(
        server.workdir(),
        json!({"kernels": {"type": "http", "url": protected.url(), "oauth": {
            "grantType": "authorization_code", "credentialFile": creds, "scope": RW}}}),
    );
    // Before the sign-in: explain says no credential is ready, and what to run.
    server.create_session("s").await;
    let out = stdout_of(
        &server,
        "s",
        "import json\nfrom kernel_mcp import mcp\nprint(json.dumps(mcp.explain('kernels')))",
    )
    .await;
    let explained: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(explained["oauth"]["ready"], false, "{out}");
    assert!(
        explained["fix"]
            .as_str()
            .is_some_and(|f| f.contains("kernel-mcp broker login kernels")),
        "{out}"
    );
    let (code, printed) = login(&auth, &server.workdir().join(".mcp.json")).await;
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("Signed in"), "{printed}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&creds), 0o600);
    assert_eq!(mode(creds.parent().unwrap()), 0o700);
    let first = access_token(&creds);

    let out = stdout_of(&server, "s", CALL).await;
    assert!(
        out.contains("CALLED False"),
        "{out}\n{}",
        server.stderr_tail()
    );
    let out = stdout_of(
        &server,
        "s",
        "import json\nprint(json.dumps(mcp.explain('kernels')))",
    )
    .await;
    let explained: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(explained["oauth"]["ready"], true, "{out}");
    assert!(!out.contains("eyJ"), "{out}");

    // The 5 s access token expires: the next calls go through on a refreshed one.
    let mut refreshed = false;
    for _ in 0..30 {
        let out = stdout_of(&server, "s", CALL).await;
        assert!(
            out.contains("CALLED False"),
            "{out}\n{}",
            server.stderr_tail()
        );
        if access_token(&creds) != first {
            refreshed = true;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(refreshed, "the broker never refreshed the access token");
    let out = stdout_of(&server, "s", ENV_CHECK).await;
    assert!(out.contains("JWT_IN_ENV False"), "{out}");

    // Revoked at the authorization server: once the access token expires, calls fail and
    // say to sign in again.
    let c = credential(&creds);
    let refresh = c["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap();
    let client_id = c["credentials"]["client_id"].as_str().unwrap();
    let revoked = http()
        .post(format!("{}/token/revocation", auth.issuer))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", refresh), ("client_id", client_id)]))
        .send()
        .await
        .unwrap();
    assert!(revoked.status().is_success(), "{}", revoked.status());
    let mut said = String::new();
    for _ in 0..30 {
        let r = run(&server, "s", CALL).await;
        said = r["stdout"].as_str().unwrap_or_default().to_string();
        if said.contains("RAISED") {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(said.contains("kernel-mcp broker login kernels"), "{said}");
    assert!(!said.contains("eyJ"), "{said}");
    let log = server.stderr();
    assert!(
        !log.contains(&first) && !log.contains(refresh),
        "a token in the log"
    );
    server.shutdown().await;
    protected.stop().await;
}

#[tokio::test]
async fn broker_login_refuses_a_symlinked_credential_path() {
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("creds");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let target = dir.path().join("elsewhere.json");
    std::fs::write(&target, "{}").unwrap();
    let link = private.join("kernels.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    write_registry(
        dir.path(),
        json!({"kernels": {"type": "http", "url": "http://127.0.0.1:9/mcp", "oauth": {
            "grantType": "authorization_code", "credentialFile": link}}}),
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["broker", "login", "kernels", "--mcp-config"])
        .arg(dir.path().join(".mcp.json"))
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "{}",
        "the link was followed"
    );
    // Not a server with a sign-in: usage.
    write_registry(
        dir.path(),
        json!({"plain": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}),
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["broker", "login", "plain", "--mcp-config"])
        .arg(dir.path().join(".mcp.json"))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_login_uses_a_preregistered_native_client_on_a_fixed_redirect_port() {
    let auth = AuthServer::start().await;
    let protected = OAuthServe::start(&auth.issuer, &[], &[]).await;
    let server = Server::start().await;
    let creds = server.workdir().join("creds/kernels.json");
    let port = crate::common::oauth::free_port();
    write_registry(
        server.workdir(),
        json!({"kernels": {"type": "http", "url": protected.url(), "oauth": {
            "grantType": "authorization_code", "credentialFile": creds, "scope": RW,
            "clientId": "broker-native", "redirectPort": port}}}),
    );
    let (code, printed) = login(&auth, &server.workdir().join(".mcp.json")).await;
    assert_eq!(code, 0, "{printed}");
    assert!(
        printed.contains(&format!("127.0.0.1%3A{port}%2Fcallback")),
        "{printed}"
    );
    assert_eq!(
        credential(&creds)["credentials"]["client_id"],
        "broker-native"
    );
    server.create_session("s").await;
    let out = stdout_of(&server, "s", CALL).await;
    assert!(
        out.contains("CALLED False"),
        "{out}\n{}",
        server.stderr_tail()
    );
    server.shutdown().await;
    protected.stop().await;
}
