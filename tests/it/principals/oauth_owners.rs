//! Two OAuth principals on one service: neither lists, reads, runs in, interrupts, exports,
//! forks or destroys the other's sessions, by MCP or by the Jupyter API (not-found codes,
//! never "forbidden"), each may use the same names; an admin sees both, with owners; and
//! the audit log names who called what, never code or tokens.

use reqwest::Method;
use serde_json::{Value, json};

use super::{error_code, structured};
use crate::common::oauth::{AuthServer, OAuthServe, call_2026, request};
use crate::common::service::TestService;

const RW: &str = "kernel-mcp:read kernel-mcp:execute";
const ADMIN: &str = "kernel-mcp:read kernel-mcp:execute kernel-mcp:admin";

#[tokio::test]
async fn two_principals_reach_only_their_own_sessions_and_an_admin_sees_both_with_owners() {
    let auth = AuthServer::start().await;
    let svc = TestService::new();
    let service = OAuthServe::service(&svc, &auth.issuer).await;
    let url = service.url();
    let alice = auth.token("alice", RW, &url).await;
    let bob = auth.token("bob", RW, &url).await;
    let call = |token: &str, tool: &'static str, args: Value| {
        let (url, token) = (url.clone(), token.to_string());
        async move { call_2026(&url, Some(&token), tool, args).await }
    };

    let made = structured(&call(&alice, "create_session", json!({"session_id": "analysis"})).await);
    let kernel_id = made["kernel_id"].as_str().unwrap().to_string();
    let ran = structured(
        &call(
            &alice,
            "execute",
            json!({"session_id": "analysis", "code": "secret = 7"}),
        )
        .await,
    );
    let run_id = ran["run_id"].as_str().unwrap().to_string();

    // Bob: alice's session and run do not exist for him, whatever he tries.
    let listed = structured(&call(&bob, "list_sessions", json!({})).await);
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    let named = json!({"session_id": "analysis"});
    for (tool, args, code) in [
        ("get_session", named.clone(), "SESSION_NOT_FOUND"),
        (
            "execute",
            json!({"session_id": "analysis", "code": "secret"}),
            "SESSION_NOT_FOUND",
        ),
        ("interrupt_session", named.clone(), "SESSION_NOT_FOUND"),
        ("get_history", named.clone(), "SESSION_NOT_FOUND"),
        (
            "export_history",
            json!({"session_id": "analysis", "path": "/tmp/x.py", "format": "script"}),
            "SESSION_NOT_FOUND",
        ),
        (
            "fork_session",
            json!({"session_id": "analysis", "new_session_id": "mine"}),
            "SESSION_NOT_FOUND",
        ),
        ("destroy_session", named.clone(), "SESSION_NOT_FOUND"),
        (
            "get_execution",
            json!({"run_id": run_id}),
            "EXECUTION_NOT_FOUND",
        ),
        (
            "cancel_execution",
            json!({"run_id": run_id}),
            "EXECUTION_NOT_FOUND",
        ),
    ] {
        let r = call(&bob, tool, args).await;
        assert_eq!(error_code(&r), code, "bob's {tool}: {}", r.body);
        assert!(
            !r.body.contains("forbidden") && !r.body.contains("belongs"),
            "{}",
            r.body
        );
    }
    // The same name is bob's own, a session of his.
    structured(&call(&bob, "create_session", json!({"session_id": "analysis"})).await);
    let his = structured(
        &call(
            &bob,
            "execute",
            json!({"session_id": "analysis", "code": "'secret' in dir()"}),
        )
        .await,
    );
    assert_eq!(his["result"], "False", "{his}");
    // The Jupyter API shows bob his kernel only.
    let api = format!("http://127.0.0.1:{}/api/kernels", service.port);
    let kernels: Value =
        serde_json::from_str(&request(Method::GET, &api, Some(&bob), &[], None).await.body)
            .unwrap();
    assert_eq!(kernels.as_array().map(Vec::len), Some(1), "{kernels}");
    assert_ne!(kernels[0]["id"], kernel_id.as_str());
    let theirs = request(
        Method::GET,
        &format!("{api}/{kernel_id}"),
        Some(&bob),
        &[],
        None,
    )
    .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    let del = request(
        Method::DELETE,
        &format!("{api}/{kernel_id}"),
        Some(&bob),
        &[],
        None,
    )
    .await;
    assert_eq!(del.status, 404, "{}", del.body);

    // Alice's session is untouched; an admin sees both, each with its owner.
    let still = structured(
        &call(
            &alice,
            "execute",
            json!({"session_id": "analysis", "code": "secret"}),
        )
        .await,
    );
    assert_eq!(still["result"], "7", "{still}");
    let root = auth.token("alice", ADMIN, &url).await;
    let all = structured(&call(&root, "list_sessions", json!({})).await);
    let owners: Vec<String> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}|{}", s["session_id"], s["owner"]))
        .collect();
    assert_eq!(owners.len(), 2, "{all}");
    let bobs = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["owner"].as_str().is_some_and(|o| o.ends_with("#bob")))
        .unwrap_or_else(|| panic!("bob's session with its owner: {all}"));
    let qualified = bobs["session_id"].as_str().unwrap().to_string();
    assert!(qualified.ends_with("/analysis"), "{qualified}");
    let seen = structured(&call(&root, "get_session", json!({"session_id": qualified})).await);
    assert_eq!(seen["status"], "idle", "{seen}");
    for token in [&alice, &bob] {
        structured(&call(token, "destroy_session", json!({"session_id": "analysis"})).await);
    }

    // The audit trail: a line per call, who and what, never code or tokens.
    let cwd = tempfile::tempdir().unwrap();
    let out = crate::common::cli::run(
        &svc,
        cwd.path(),
        &["log", "--audit", "--json", "--lines", "0"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let by = |who: &str, tool: &str, outcome: &str| {
        lines.iter().any(|l| {
            l["principal"].as_str().is_some_and(|p| p.ends_with(who))
                && l["tool"] == tool
                && l["outcome"] == outcome
        })
    };
    assert!(by("#alice", "execute", "ok"), "{}", out.stdout);
    assert!(
        by("#bob", "get_session", "SESSION_NOT_FOUND"),
        "{}",
        out.stdout
    );
    assert!(
        lines.iter().any(|l| l["run"] == run_id.as_str()),
        "{}",
        out.stdout
    );
    let log = format!("{}\n{}", service.stderr(), svc.log_text());
    for secret in [alice.as_str(), bob.as_str(), root.as_str(), "secret = 7"] {
        assert!(!log.contains(secret), "{secret} is in the service's log");
    }
    service.stop().await;
}
