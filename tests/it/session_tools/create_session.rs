//! What `create_session` starts, and what it refuses before starting anything: the
//! interpreter (`python=` a venv without ipykernel fails with the install command, a cwd
//! `.venv` is preferred when neither `python` nor `kernel` is given) and the `env` values a
//! process cannot have or kernel-mcp sets itself.

use std::path::Path;

use crate::common::history::*;
use crate::common::*;
use serde_json::json;

/// `create_session(env=…)` values a process cannot have, and variables kernel-mcp sets
/// itself, are refused before any kernel starts, naming the variable (not a start failure
/// with a bare system error, nor a value silently replaced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_values_a_process_cannot_have_or_that_kernel_mcp_sets_are_invalid_arguments() {
    let server = Server::start().await;
    let huge = "x".repeat(200 * 1024);
    for (name, value, says) in [
        ("HAS_NUL", "a\u{0}b", "NUL byte"),
        ("HUGE", huge.as_str(), "bytes"),
        // Set by kernel-mcp itself: the caller's value would be replaced without a word.
        ("KERNEL_MCP_ENDPOINT", "/tmp/x", "set by kernel-mcp"),
        ("JPY_PARENT_PID", "1", "set by kernel-mcp"),
    ] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": "e", "env": {name: value}}),
            )
            .await;
        assert!(is_error(&r), "{name}: {}", dump(&r));
        assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
        assert!(
            text(&r).contains(name) && text(&r).contains(says),
            "{}",
            text(&r)
        );
    }
    let listed = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(
        listed["sessions"],
        json!([]),
        "no session was made: {listed}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_venv_without_ipykernel_fails_with_the_install_command() {
    let dir = tmpdir();
    let venv = dir.path().join("bare");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv --without-pip failed");

    let state = StateHome::new();
    let server = state.start_server().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "bare", "python": venv}),
        )
        .await;
    assert_eq!(error_code(&r), "KERNEL_START_FAILED", "{}", dump(&r));
    let want = format!(
        "{} -m pip install ipykernel",
        venv.join("bin").join("python").display()
    );
    let msg = structured(&r)["message"].as_str().unwrap_or("").to_string();
    assert!(
        msg.contains(&want),
        "message should contain `{want}`: {msg}"
    );
    // No silent fallback: no session was created.
    let list = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_dot_venv_with_ipykernel_is_preferred_without_python_or_kernel() {
    let cwd = tmpdir();
    let link = cwd.path().join(".venv");
    std::os::unix::fs::symlink(venv(), &link).expect("symlink .venv");

    let state = StateHome::new();
    let server = state.start_server().await;
    let info = create_session_with(&server, json!({"session_id": "v", "cwd": cwd.path()})).await;
    let v = exec_ok(
        &server,
        "v",
        "import sys, json; print(json.dumps([sys.prefix, sys.executable]))",
    )
    .await;
    let seen: Vec<String> =
        serde_json::from_str(v["stdout"].as_str().unwrap_or("").trim()).expect("json line");
    eprintln!(
        "cwd .venv session: display_name={} sys.prefix={} sys.executable={} (link {} -> {})",
        info["display_name"],
        seen[0],
        seen[1],
        link.display(),
        venv().display()
    );
    let resolved = std::fs::canonicalize(venv()).unwrap();
    let prefix_ok = Path::new(&seen[0]) == link || Path::new(&seen[0]) == resolved;
    assert!(
        prefix_ok,
        "sys.prefix {} is neither {} nor {}",
        seen[0],
        link.display(),
        resolved.display()
    );
    // The interpreter is the one under the cwd's .venv (the default python3 kernelspec would
    // also have the project .venv as prefix, so this is what tells them apart).
    assert!(
        Path::new(&seen[1]).starts_with(&link)
            || info["display_name"]
                .as_str()
                .unwrap_or("")
                .contains(&link.display().to_string()),
        "the kernel does not run {}/bin/python: sys.executable={} display_name={}",
        link.display(),
        seen[1],
        info["display_name"]
    );

    server.destroy("v").await;
    server.shutdown().await;
}
