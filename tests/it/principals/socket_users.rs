//! Two users of the service's socket (root and `nobody`, allowed by `--allow-uid`): each
//! reaches only the sessions of its own uid, the owner sees both, and only the service's
//! own user may see its status or stop it.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::service::TestService;

/// `kernel-mcp ARGS` run as uid 65534 (`nobody`) against the service of `svc`, which runs as
/// root: `KERNEL_MCP_SERVICE_UID=0` says whom that client trusts.
async fn as_nobody(svc: &TestService, home: &Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_STATE_HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env("KERNEL_MCP_SOCKET", svc.socket())
        .env("KERNEL_MCP_SERVICE_UID", "0")
        .uid(65534)
        .gid(65534)
        .output()
        .await
        .expect("run kernel-mcp as nobody")
}

#[tokio::test]
async fn two_socket_users_keep_their_sessions_apart_and_the_owner_sees_both() {
    if !nix::unistd::getuid().is_root() {
        crate::common::skip("needs root to run a client as another uid (nobody)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let svc = TestService::new();
    let root_dir = svc
        .socket()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::set_permissions(&root_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut service = svc.start(&["--pool", "python3=0", "--allow-uid", "65534"]);
    let socket = svc.socket();
    assert!(crate::common::wait_until(Duration::from_secs(30), || socket.exists()).await);
    let owner = svc.relay().await;
    owner.create_session("analysis").await;
    owner
        .call(
            "execute",
            json!({"session_id": "analysis", "code": "secret = 1"}),
        )
        .await;

    let home = tempfile::tempdir().unwrap();
    nix::unistd::chown(home.path(), Some(65534.into()), Some(65534.into())).unwrap();
    let out = as_nobody(
        &svc,
        home.path(),
        &["exec", "-s", "analysis", "-c", "secret"],
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "nobody reaches no session of root's: {err}"
    );
    assert!(
        err.contains("SESSION_NOT_FOUND") || err.contains("not found"),
        "{err}"
    );
    let out = as_nobody(
        &svc,
        home.path(),
        &[
            "exec",
            "-s",
            "analysis",
            "--create",
            "-c",
            "'secret' in dir()",
        ],
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "False",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The owner (an admin) sees both, nobody's as uid:65534/analysis.
    let listed = crate::common::structured(&owner.call("list_sessions", json!({})).await);
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert!(
        ids.contains(&"analysis") && ids.contains(&"uid:65534/analysis"),
        "{listed}"
    );
    // Only the service's own user may see its status or stop it.
    for cmd in [&["service", "stop"][..], &["service", "status", "--json"]] {
        let out = as_nobody(&svc, home.path(), cmd).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(err.contains("only the service's own user"), "{err}");
        assert!(out.stdout.is_empty(), "{cmd:?}");
    }
    assert!(svc.pid().is_some(), "the service still runs");
    owner.shutdown().await;
    if let Some(pid) = service.id() {
        crate::common::terminate(pid, Duration::from_secs(30));
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), service.wait()).await;
}
