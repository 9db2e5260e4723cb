//! Door 4 of the attacker's checklist (docs/sandbox.md): floors are floors everywhere. A
//! service started without a sandbox by one client, then reached by a relay
//! `kernel-mcp --shared --sandbox workspace --max-memory-mib 300` (or a CLI command with
//! `KERNEL_MCP_SANDBOX=workspace`): every session that client creates is boxed and capped
//! (Python, bash and R), it may not use a session boxed less, `server_info` shows the floors
//! in force; the first client's sessions are as before. A relay whose service cannot take its
//! floors is refused with the reason, never silently less.

use std::path::Path;
use std::process::Stdio;

use crate::common::cli;
use crate::common::service::TestService;
use crate::common::*;
use serde_json::json;

/// A relay to `svc` with these extra arguments.
async fn relay_with(svc: &TestService, args: &[&str]) -> Server {
    let env = svc.env();
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let mut all = vec!["serve", "--shared"];
    all.extend_from_slice(args);
    Server::start_with(&env, &all).await
}

/// Code for `kernel` printing the planted file's contents, or `denied`.
fn read(kernel: &str, path: &Path) -> String {
    let p = path.display();
    match kernel {
        "bash" => format!("cat '{p}' 2>/dev/null || echo denied"),
        "ir" => format!(
            "tryCatch(cat(readLines('{p}', warn = FALSE), sep='\\n'), error = function(e) cat('denied\\n'), warning = function(w) cat('denied\\n'))"
        ),
        _ => super::denied(&format!("print(open('{p}').read())")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stricter_client_of_a_service_without_a_sandbox_gets_its_sessions_boxed() {
    let svc = TestService::new();
    let planted = super::Planted::new();
    let first = svc.relay().await;
    let project = tempfile::tempdir().unwrap();
    let r = first
        .call(
            "create_session",
            json!({"session_id": "open", "cwd": project.path()}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert_eq!(
        structured(&r).get("sandbox"),
        None,
        "the service has no floor"
    );

    let boxed = relay_with(&svc, &["--sandbox", "workspace", "--max-memory-mib", "300"]).await;
    let info = structured(&boxed.call("server_info", json!({})).await);
    let floors = &info["sandbox"]["floors"];
    assert_eq!(floors["sandbox"]["policy"], "workspace", "{info}");
    assert_eq!(floors["max_memory_mib"], 300, "{info}");
    assert_eq!(
        info["sandbox"]["server_floors"]["sandbox"]["policy"], "none",
        "{info}"
    );
    assert_eq!(info["sandbox"]["default_policy"], "workspace", "{info}");

    for kernel in ["python3", "bash", "ir"] {
        if kernel != "python3" {
            crate::common::kernels::require_kernel(&boxed, kernel).await;
        }
        let r = boxed
            .call(
                "create_session",
                json!({"session_id": kernel, "kernel": kernel, "cwd": project.path()}),
            )
            .await;
        assert!(!is_error(&r), "{kernel}: {}", dump(&r));
        let s = structured(&r);
        assert_eq!(s["sandbox"]["policy"], "workspace", "{kernel}: {s}");
        let v = boxed.exec(kernel, &read(kernel, &planted.0)).await;
        let seen = crate::common::kernels::rendered(&v);
        assert!(
            seen.contains("denied") && !seen.contains("top secret"),
            "{kernel} read the planted file: {v}"
        );
        boxed.destroy(kernel).await;
    }
    for weaker in [
        json!({"sandbox": "none"}),
        json!({"max_memory_mib": 1000}),
        json!({"max_memory_mib": 0}),
    ] {
        let mut args = json!({"session_id": "weak", "cwd": project.path()});
        args.as_object_mut()
            .unwrap()
            .extend(weaker.as_object().unwrap().clone());
        let r = boxed.call("create_session", args).await;
        assert_eq!(
            structured(&r)["error_code"],
            "INVALID_ARGUMENT",
            "{weaker}: {}",
            dump(&r)
        );
    }
    // The first client's unsandboxed session is out of the boxed client's reach.
    let r = boxed
        .call("execute", json!({"session_id": "open", "code": "print(1)"}))
        .await;
    assert_eq!(
        structured(&r)["error_code"],
        "INVALID_ARGUMENT",
        "{}",
        dump(&r)
    );
    assert!(text(&r).contains("sandbox"), "{}", text(&r));

    // A person's command asks the same through its environment.
    let out = cli::command(&svc, project.path())
        .env("KERNEL_MCP_SANDBOX", "workspace")
        .args(["exec", "-s", "cli", "--create", "--cwd"])
        .arg(project.path())
        .args(["-c", &read("python3", &planted.0)])
        .stdin(Stdio::null())
        .output()
        .expect("run kernel-mcp exec");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("denied"),
        "exec under KERNEL_MCP_SANDBOX=workspace: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli::command(&svc, project.path())
        .env("KERNEL_MCP_SANDBOX", "workspace")
        .args(["exec", "-s", "open", "-c", "print(1)"])
        .stdin(Stdio::null())
        .output()
        .expect("run kernel-mcp exec");
    assert_eq!(out.status.code(), Some(4), "{out:?}");

    // The first client is as it was: its sessions are not boxed.
    let v = first.exec("open", &read("python3", &planted.0)).await;
    assert!(
        v["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("top secret"),
        "{v}"
    );
    boxed
        .call("destroy_session", json!({"session_id": "cli"}))
        .await;
    boxed.shutdown().await;
    first.destroy("open").await;
    first.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_whose_service_cannot_take_its_floors_refuses_with_the_reason() {
    // A listener that answers like a service that knows no hello (an MCP error line).
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let answering = std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(
                &mut std::io::BufReader::new(conn.try_clone().unwrap()),
                &mut line,
            );
            let _ = std::io::Write::write_all(
                &mut conn,
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse error\"}}\n",
            );
        }
    });
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["serve", "--shared", "--sandbox", "workspace"])
        .env("KERNEL_MCP_SOCKET", &socket)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
        .wait_with_output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .expect("the relay ends")
        .unwrap();
    answering.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing reached the client");
    assert!(
        stderr.contains("does not take a client's floors"),
        "{stderr}"
    );
}
