//! Door 1 of the attacker's checklist (docs/sandbox.md): a sandboxed session's grants are
//! checked as one set, whatever their source. A cwd of the home, `/tmp`, kernel-mcp's runtime
//! or state directory, a credential store, a hidden directory of the home, a symlink to the
//! home — or no cwd at all on a server started in `~` — is `INVALID_ARGUMENT` naming the
//! rule and the fix, for Python, bash and R alike, and nothing is started; so is an `env`
//! path entry that names a credential store.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{Value, json};

fn home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME"))
}

/// Assert `create_session(args)` is refused with `INVALID_ARGUMENT`, its message naming the
/// fix (a project directory) and containing `says`.
async fn refused(server: &Server, args: Value, says: &str) {
    let r = server.call("create_session", args.clone()).await;
    assert!(is_error(&r), "{args} was accepted: {}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["error_code"], "INVALID_ARGUMENT", "{args}: {v}");
    let message = text(&r);
    assert!(message.contains(says), "{args}: {message}");
    assert!(
        message.contains("project directory") || message.contains("inside the project"),
        "{args} names the fix: {message}"
    );
}

/// The runtime directory kernel-mcp keeps connection files in, as an unsandboxed kernel sees
/// it (its broker endpoint file sits beside its connection file).
async fn runtime_dir(server: &Server) -> PathBuf {
    server.create_session("plain").await;
    let v = server
        .exec(
            "plain",
            "import os; print(os.path.dirname(os.environ['KERNEL_MCP_ENDPOINT']))",
        )
        .await;
    server.destroy("plain").await;
    PathBuf::from(v["stdout"].as_str().unwrap_or_default().trim())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cwd_that_reaches_secrets_or_kernel_mcps_files_is_refused_for_every_kernel() {
    let server = Server::start().await;
    let runtime = runtime_dir(&server).await;
    assert!(runtime.is_dir(), "{runtime:?}");
    let project = tempfile::tempdir().unwrap();
    let to_home = project.path().join("innocent");
    std::os::unix::fs::symlink(home(), &to_home).unwrap();
    let hidden = home().join(format!(
        ".kernel-mcp-test-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir(&hidden).unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        (home(), "home directory"),
        (to_home.clone(), "home directory"),
        ("/tmp".into(), "shared by every user"),
        (runtime.clone(), "kernel-mcp's own directory"),
        (server.workdir().join("state"), "kernel-mcp's own directory"),
        (server.workdir().to_path_buf(), "kernel-mcp's own directory"),
        (hidden.clone(), "hidden directory of the home"),
        ("/etc".into(), "system directory"),
    ];
    for kernel in ["python3", "bash", "ir"] {
        if kernel != "python3" {
            crate::common::kernels::require_kernel(&server, kernel).await;
        }
        for (cwd, says) in &cases {
            for policy in ["workspace", "read-only"] {
                refused(
                    &server,
                    json!({"session_id": "box", "kernel": kernel, "sandbox": policy, "cwd": cwd}),
                    says,
                )
                .await;
            }
        }
    }
    // The credential store exists or not: it is refused either way, as a cwd or an env path.
    std::fs::create_dir_all(home().join(".ssh")).ok();
    refused(
        &server,
        json!({"session_id": "box", "sandbox": "read-only", "cwd": home().join(".ssh")}),
        "credentials",
    )
    .await;
    refused(
        &server,
        json!({"session_id": "box", "sandbox": "workspace", "cwd": project.path(),
               "env": {"PYTHONPATH": format!("/usr/lib:{}", home().join(".ssh").display())}}),
        "credentials",
    )
    .await;
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "nothing was started");
    // The same project is fine, and an unsandboxed session may still work anywhere.
    let ok = server
        .call(
            "create_session",
            json!({"session_id": "ok", "sandbox": "workspace", "cwd": project.path()}),
        )
        .await;
    assert!(!is_error(&ok), "{}", dump(&ok));
    server.destroy("ok").await;
    std::fs::remove_dir(&hidden).ok();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_started_in_the_home_refuses_a_sandboxed_session_without_a_cwd() {
    let home = home();
    let spawned = spawn_server_in(&home, &[], &["--sandbox", "workspace"]);
    let server = Server::start_spawned(spawned).await;
    for kernel in ["python3", "bash"] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": "here", "kernel": kernel}),
            )
            .await;
        let v = structured(&r);
        assert_eq!(v["error_code"], "INVALID_ARGUMENT", "{kernel}: {v}");
        let m = text(&r);
        assert!(
            m.contains("server's working directory") && m.contains("home directory"),
            "{m}"
        );
        assert!(m.contains("Give a project directory as cwd"), "{m}");
    }
    // Given a project, the same server boxes the session there.
    let project = tempfile::tempdir().unwrap();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "p", "cwd": project.path()}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert_eq!(structured(&r)["sandbox"]["policy"], "workspace");
    server.destroy("p").await;
    server.shutdown().await;
}

/// The supervisor applies the same rules to what it derives: a kernel whose `PATH` names the
/// home still starts, without the home (it says so on its stderr), and cannot read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_entry_of_the_home_in_the_servers_environment_is_not_granted() {
    let planted = super::Planted::new();
    let path = format!(
        "{}:{}",
        std::env::var("PATH").unwrap_or_default(),
        home().display()
    );
    let server = Server::start_with(&[("PATH", std::ffi::OsStr::new(&path))], &[]).await;
    let project = tempfile::tempdir().unwrap();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "k", "sandbox": "workspace", "cwd": project.path()}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let secret = planted.0.display().to_string();
    let v = server
        .exec("k", &super::denied(&format!("open({secret:?}).read()")))
        .await;
    assert_eq!(
        v["stdout"].as_str().unwrap_or_default().trim(),
        "denied",
        "{v}"
    );
    // The supervisor says what it left out (in shared mode, in the service's log).
    if !shared_mode() {
        assert!(
            wait_until(std::time::Duration::from_secs(10), || server
                .stderr()
                .contains("not granted to the sandboxed kernel"))
            .await,
            "{}",
            server.stderr_tail()
        );
    }
    server.destroy("k").await;
    server.shutdown().await;
    assert!(Path::new(&secret).exists());
}
