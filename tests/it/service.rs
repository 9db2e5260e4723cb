//! The per-user service through its real entry points: relays (`kernel-mcp serve --shared`)
//! that start it on demand, several MCP clients on one service, who owns which session, one
//! service for many simultaneous starts, replacement of a killed service, and refusal of a
//! peer with another uid. Each test has its own socket and state dir (never the user's) and
//! stops every service it started (see `common/service.rs`).

use std::time::{Duration, Instant};

use crate::common::service::TestService;
use crate::common::{is_error, pid_alive, structured, text, wait_until};
use serde_json::json;

/// The result text of running `code` in `session` (panics when the run is not `ok`).
async fn value(server: &crate::common::Server, session: &str, code: &str) -> String {
    let r = server.exec(session, code).await;
    assert_eq!(crate::common::status(&r), "ok", "{code}: {r}");
    r["result"].as_str().unwrap_or_default().to_string()
}

async fn session_ids(server: &crate::common::Server) -> Vec<String> {
    let r = server.call("list_sessions", json!({})).await;
    structured(&r)["sessions"]
        .as_array()
        .expect("sessions[]")
        .iter()
        .map(|s| s["session_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn two_clients_share_a_named_session_that_outlives_the_client_that_made_it() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let b = svc.relay().await;
    a.create_session("shared").await;
    assert_eq!(value(&a, "shared", "x = 42; x").await, "42");
    assert_eq!(session_ids(&b).await, vec!["shared".to_string()]);
    assert_eq!(value(&b, "shared", "x + 1").await, "43");
    a.shutdown().await;
    assert_eq!(value(&b, "shared", "x").await, "42");
    let c = svc.relay().await;
    assert_eq!(value(&c, "shared", "x * 2").await, "84");
    assert_eq!(svc.processes().len(), 1, "one service for every client");
    b.shutdown().await;
    c.shutdown().await;
}

#[tokio::test]
async fn a_connections_default_session_is_invisible_to_the_others_and_ends_with_it() {
    let svc = TestService::new();
    let a = svc.relay().await;
    let b = svc.relay().await;
    let r = a.call("execute", json!({"code": "mine = 'a'; mine"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(session_ids(&a).await, vec!["default".to_string()]);
    assert!(
        session_ids(&b).await.is_empty(),
        "b must not see a's default"
    );
    let r = b
        .call("get_session", json!({"session_id": "default"}))
        .await;
    assert_eq!(
        structured(&r)["error_code"],
        "SESSION_NOT_FOUND",
        "{}",
        text(&r)
    );
    // b's own default session is a different kernel.
    let r = structured(&b.call("execute", json!({"code": "mine"})).await);
    assert_eq!(crate::common::ename(&r), "NameError", "{r}");
    let a_kernel = a.kernel_pid("default").await;
    let b_kernel = b.kernel_pid("default").await;
    assert_ne!(a_kernel, b_kernel);
    a.shutdown().await;
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(a_kernel)).await,
        "a's default kernel outlived its connection"
    );
    assert!(pid_alive(b_kernel), "b's default must stay");
    assert_eq!(session_ids(&b).await, vec!["default".to_string()]);
    b.shutdown().await;
}

#[tokio::test]
async fn ten_relays_started_at_once_start_one_service() {
    let svc = TestService::new();
    let t0 = Instant::now();
    let relays = futures::future::join_all((0..10).map(|_| svc.relay())).await;
    let elapsed = t0.elapsed();
    eprintln!("ten relays connected in {elapsed:?}");
    for r in &relays {
        let info = r.call("server_info", json!({})).await;
        assert!(!is_error(&info), "{}", text(&info));
    }
    assert_eq!(svc.processes().len(), 1, "services: {:?}", svc.processes());
    for r in relays {
        r.shutdown().await;
    }
}

#[tokio::test]
async fn after_the_service_is_killed_the_relay_says_why_and_the_next_relay_starts_a_new_one() {
    let svc = TestService::new();
    let first = svc.relay().await;
    first.create_session("s").await;
    let old = svc.pid().expect("service pid");
    let kernel = first.kernel_pid("s").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the service");
    let relay_pid = first.pid();
    assert!(
        wait_until(Duration::from_secs(15), || !pid_alive(relay_pid)).await,
        "the relay must exit when its service is gone"
    );
    assert!(
        wait_until(Duration::from_secs(5), || first
            .stderr()
            .contains("closed the connection"))
        .await,
        "relay stderr: {}",
        first.stderr()
    );
    assert!(
        wait_until(Duration::from_secs(15), || !pid_alive(kernel)).await,
        "a killed service's kernel must die with it"
    );
    assert!(
        svc.socket().exists(),
        "the stale socket file is left behind"
    );
    let t0 = Instant::now();
    let second = svc.relay().await;
    eprintln!("relay with a new service connected in {:?}", t0.elapsed());
    let new = svc.pid().expect("a new service");
    assert_ne!(new, old);
    let r = structured(&second.call("execute", json!({"code": "1 + 1"})).await);
    assert_eq!(r["result"], "2", "{r}");
    second.shutdown().await;
    drop(first);
}

#[tokio::test]
async fn a_peer_with_another_uid_is_refused() {
    if !nix::unistd::getuid().is_root() {
        crate::common::skip("needs root to run a peer as another uid (nobody)");
        return;
    }
    let svc = TestService::new();
    let client = svc.relay().await;
    // Open the directory and socket to everyone, so only the peer-credential check stands
    // between `nobody` and the service.
    use std::os::unix::fs::PermissionsExt;
    let dir = svc.socket().parent().expect("dir").to_path_buf();
    let root = dir.parent().expect("temp root").to_path_buf();
    for p in [root.as_path(), dir.as_path(), svc.socket().as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(20)
# The service refuses at accept and may close before a request could be written: try to send,
# then read what it said either way.
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}\n')
except BrokenPipeError:
    pass
print(s.makefile().readline())
"#;
    // The system interpreter: `nobody` may not be allowed into the project's venv.
    let out = tokio::process::Command::new("python3")
        .args(["-c", script])
        .arg(svc.socket())
        .uid(65534)
        .gid(65534)
        .output()
        .await
        .expect("run the peer");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("refused") && !answer.contains("\"result\""),
        "peer got: {answer} / {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The service is still there for us.
    assert!(!is_error(&client.call("server_info", json!({})).await));
    client.shutdown().await;
}

#[tokio::test]
async fn the_service_exits_when_idle_but_not_while_a_session_lives() {
    let svc = TestService::new();
    let env = svc.env();
    let mut env: Vec<(&str, &std::ffi::OsStr)> =
        env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    env.push(("KERNEL_MCP_IDLE_EXIT_S", std::ffi::OsStr::new("2")));
    let a = crate::common::Server::start_with(&env, &["serve", "--shared"]).await;
    a.create_session("keep").await;
    let pid = svc.pid().expect("service pid");
    a.shutdown().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(pid_alive(pid), "a live session keeps the service");
    let b = crate::common::Server::start_with(&env, &["serve", "--shared"]).await;
    b.destroy("keep").await;
    b.shutdown().await;
    assert!(
        wait_until(Duration::from_secs(20), || !pid_alive(pid)).await,
        "idle service did not exit"
    );
    assert!(
        svc.log_text().contains("idle for 2 s"),
        "{}",
        svc.log_text()
    );
    assert!(!svc.socket().exists(), "socket removed on exit");
}

#[tokio::test]
async fn sigterm_shuts_every_kernel_down_and_the_relay_exits_non_zero() {
    let svc = TestService::new();
    let a = svc.relay().await;
    a.create_session("one").await;
    a.call("execute", json!({"code": "1"})).await;
    let kernels = [a.kernel_pid("one").await, a.kernel_pid("default").await];
    let pid = svc.pid().expect("service pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert!(wait_until(Duration::from_secs(30), || !pid_alive(pid)).await);
    for k in kernels {
        assert!(!pid_alive(k), "kernel {k} outlived the service");
    }
    let relay = a.pid();
    assert!(wait_until(Duration::from_secs(15), || !pid_alive(relay)).await);
    // The relay's stderr is drained by a task of the harness: give it a moment.
    assert!(
        wait_until(Duration::from_secs(5), || a
            .stderr()
            .contains("closed the connection"))
        .await,
        "{}",
        a.stderr()
    );
    drop(a);
}

#[tokio::test]
async fn an_http_client_and_a_socket_client_of_the_service_share_a_session() {
    let svc = TestService::new();
    let socket = svc.socket();
    let mut child = svc
        .command(&[
            "--http",
            "127.0.0.1:0",
            "--socket",
            socket.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the service");
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let face = crate::common::service::http_face(&svc).await;
    let socket_client = svc.relay().await;
    socket_client.create_session("both").await;
    assert_eq!(value(&socket_client, "both", "x = 5; x").await, "5");
    let web = crate::common::http::HttpClient::connect_as(face.port, Some(&face.token)).await;
    let r = web
        .call("execute", json!({"session_id": "both", "code": "x * 10"}))
        .await;
    assert_eq!(r["result"], "50", "{r}");
    let r = web.call("list_sessions", json!({})).await;
    assert_eq!(r["sessions"][0]["session_id"], "both", "{r}");
    socket_client.shutdown().await;
    let kernel = {
        let r = web.call("get_session", json!({"session_id": "both"})).await;
        r["pid"].as_u64().expect("pid") as u32
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the service exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
    assert!(!pid_alive(kernel), "kernel outlived the service");
}

#[tokio::test]
async fn a_second_service_on_the_same_socket_refuses_to_start_and_names_the_first() {
    let svc = TestService::new();
    let client = svc.relay().await;
    let first = svc.pid().expect("service pid");
    let socket = svc.socket();
    let out = svc
        .command(&["--socket", socket.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .output()
        .await
        .expect("run a second service");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("pid {first}")), "{err}");
    assert!(
        !is_error(&client.call("server_info", json!({})).await),
        "the first one still serves"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn a_service_whose_socket_is_removed_exits_once_no_client_is_connected() {
    let svc = TestService::new();
    let client = svc.relay().await;
    client.create_session("orphan").await;
    let kernel = client.kernel_pid("orphan").await;
    let pid = svc.pid().expect("service pid");
    std::fs::remove_file(svc.socket()).expect("remove the socket");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(pid_alive(pid), "a connected client keeps it");
    client.shutdown().await;
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(pid)).await,
        "an unreachable service must exit"
    );
    assert!(!pid_alive(kernel), "its kernels go with it");
    assert!(
        svc.log_text().contains("was removed or replaced"),
        "{}",
        svc.log_text()
    );
}
