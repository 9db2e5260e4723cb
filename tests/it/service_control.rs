//! `kernel-mcp service status | stop | restart` through the real binary, against a service of
//! the test's own (its socket and state dir in a temp dir): status shows names of the
//! environment and never a value, stop tells clients and leaves no kernel, socket or token
//! file, restart takes the caller's environment and keeps the service's arguments, and the
//! exit statuses (0 done, 1 not running, 2 usage).

use std::time::Duration;

use crate::common::raw::RawClient;
use crate::common::service::TestService;
use crate::common::{pid_alive, wait_until};
use serde_json::{Value, json};

/// Run `kernel-mcp ARGS` against `svc` with `extra` environment variables.
async fn ctl(svc: &TestService, args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
    cmd.args(args).envs(svc.env());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.output().await.expect("run kernel-mcp")
}

/// `service status --json` of `svc`, parsed (panics unless it exits 0).
async fn status(svc: &TestService) -> Value {
    let out = ctl(svc, &["service", "status", "--json"], &[]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status --json is JSON")
}

/// Start `svc`'s service through a relay with `extra` in its environment, and a client on it.
async fn relay_with(svc: &TestService, extra: &[(&str, &str)]) -> crate::common::Server {
    let mut env: Vec<(&str, std::ffi::OsString)> = svc.env();
    env.extend(extra.iter().map(|(k, v)| (*k, std::ffi::OsString::from(v))));
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    crate::common::Server::start_with(&env, &["serve", "--shared", "--max-memory-mib", "777"]).await
}

#[tokio::test]
async fn status_shows_pid_floors_environment_names_and_sessions_and_never_a_value() {
    let svc = TestService::new();
    let client = relay_with(&svc, &[("KERNEL_MCP_TEST_LICENSE", "hunter2-secret")]).await;
    client.create_session("analysis").await;
    let kernel = client.kernel_pid("analysis").await;
    let s = status(&svc).await;
    assert_eq!(s["pid"].as_u64(), svc.pid().map(u64::from), "{s}");
    assert_eq!(s["socket"], svc.socket().display().to_string());
    assert_eq!(s["floors"]["max_memory_mib"], 777, "{s}");
    let names: Vec<&str> = s["environment"]
        .as_array()
        .expect("environment[]")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(names.contains(&"KERNEL_MCP_TEST_LICENSE"), "{names:?}");
    let analysis = s["sessions"]
        .as_array()
        .expect("sessions[]")
        .iter()
        .find(|x| x["session_id"] == "analysis")
        .unwrap_or_else(|| panic!("analysis in {s}"));
    assert_eq!(analysis["pid"].as_u64(), Some(u64::from(kernel)));
    let text = ctl(&svc, &["service", "status"], &[]).await;
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(
        shown.contains("analysis") && shown.contains("memory ceiling 777 MiB"),
        "{shown}"
    );
    for out in [s.to_string(), shown.to_string()] {
        assert!(!out.contains("hunter2"), "a value leaked: {out}");
    }
    client.shutdown().await;
    let out = ctl(&svc, &["service", "stop"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
}

#[tokio::test]
async fn stop_tells_clients_and_leaves_no_kernel_socket_or_token_file() {
    let svc = TestService::new();
    let mut service = svc.start(&["--pool", "python3=0", "--http", "127.0.0.1:0"]);
    let face = crate::common::service::http_face(&svc).await;
    let token_file = face.record["token_file"].as_str().unwrap().to_string();
    let env = svc.env();
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let mut raw = RawClient::start_with(&env, &["serve", "--shared"]).await;
    let create = crate::common::raw::call_line(1, "create_session", json!({"session_id": "s"}));
    raw.write(&create).await;
    let created = raw.read(1).await;
    let kernel = created["result"]["structuredContent"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("a kernel pid in {created}")) as u32;

    let out = ctl(&svc, &["service", "stop"], &[]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopped"));
    let told = raw
        .notification(Duration::from_secs(30), |n| {
            n["method"] == "notifications/message"
                && n["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("stopping"))
        })
        .await;
    assert!(told.is_some(), "the client was not told");
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(kernel)).await,
        "the kernel outlived the service"
    );
    let _ = tokio::time::timeout(Duration::from_secs(30), service.wait()).await;
    assert!(!svc.socket().exists(), "the socket is left");
    assert!(
        !std::path::Path::new(&token_file).exists(),
        "the token is left"
    );
    assert!(!svc.http_record().exists(), "the HTTP record is left");
    assert!(svc.processes().is_empty());
    let again = ctl(&svc, &["service", "stop"], &[]).await;
    assert_eq!(again.status.code(), Some(1), "nothing runs now");
    assert!(String::from_utf8_lossy(&again.stderr).contains("no kernel-mcp service runs"));
}

#[tokio::test]
async fn restart_starts_it_again_with_the_callers_environment_and_its_own_arguments() {
    let svc = TestService::new();
    let client = relay_with(&svc, &[("KERNEL_MCP_TEST_STALE", "1")]).await;
    client.shutdown().await;
    let before = status(&svc).await;
    let out = ctl(
        &svc,
        &["service", "restart"],
        &[("KERNEL_MCP_TEST_FRESH", "1")],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = status(&svc).await;
    assert_ne!(before["pid"], after["pid"], "a new process");
    let names = after["environment"].to_string();
    assert!(
        names.contains("KERNEL_MCP_TEST_FRESH") && !names.contains("KERNEL_MCP_TEST_STALE"),
        "{names}"
    );
    assert_eq!(after["floors"]["max_memory_mib"], 777, "its arguments kept");
    assert_eq!(svc.processes().len(), 1);
    let out = ctl(&svc, &["service", "stop"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
}

#[tokio::test]
async fn status_and_restart_without_a_service_exit_1_and_a_bad_command_exits_2() {
    let svc = TestService::new();
    for cmd in [&["service", "status"][..], &["service", "restart"]] {
        let out = ctl(&svc, cmd, &[]).await;
        assert_eq!(out.status.code(), Some(1), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no kernel-mcp service runs"),
            "{cmd:?}"
        );
    }
    assert!(svc.processes().is_empty(), "restart started nothing");
    let out = ctl(&svc, &["service", "reboot"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
}
