//! Real-kernel acceptance for bash_kernel (issue 5): a pty-based kernel that merges stderr
//! into stdout, passes raw bytes through, and ignores stdin (`read` blocks on the pty).

use std::time::Duration;

use crate::common::kernels::*;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_conformance() {
    conformance(&Lang {
        kernel: "bash",
        set_state: "x=31337",
        read_state: "echo \"x=$x\"",
        print: "echo hello-stdout",
        raise: "ls /nonexistent-kernel-mcp-test",
        error_marker: "No such file",
        long_loop: "while true; do :; done",
        may_die_on_interrupt: false,
    })
    .await;
}

/// Invalid UTF-8 from the kernel is decoded leniently: `\xff` becomes U+FFFD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_invalid_utf8_becomes_replacement_character() {
    let server = Server::start().await;
    require_kernel(&server, "bash").await;
    create_kernel_session(&server, "sh", "bash").await;
    let (r, _) = exec_args(&server, "sh", "printf 'a-\\xff-b\\n'", json!({})).await;
    assert_eq!(status(&r), "ok", "{r}");
    assert!(
        r["stdout"].as_str().unwrap_or("").contains("a-\u{FFFD}-b"),
        "expected a-\u{FFFD}-b in stdout: {r}"
    );
    server.destroy("sh").await;
    server.shutdown().await;
}

/// `read x` must not hang the session: within a bounded time the run is `awaiting_input`
/// (or an error), and after an interrupt the session runs the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_read_does_not_hang_the_session() {
    let server = Server::start().await;
    require_kernel(&server, "bash").await;
    create_kernel_session(&server, "sh", "bash").await;
    let (r, took) = exec_args(&server, "sh", "read x", json!({"wait_s": 10})).await;
    let st = status(&r).to_string();
    let bounded = st == "awaiting_input" || st == "error";
    if let Some(run_id) = r["run_id"].as_str()
        && (st == "running" || st == "awaiting_input")
    {
        let i = server
            .call("interrupt_session", json!({"session_id": "sh"}))
            .await;
        assert!(!is_error(&i), "interrupt_session: {}", dump(&i));
        let done = structured(
            &server
                .call("get_execution", json!({"run_id": run_id, "wait_s": 10}))
                .await,
        );
        eprintln!("after interrupt: {done}");
    }
    let (next, took_next) =
        exec_args(&server, "sh", "echo after-read", json!({"wait_s": 15})).await;
    assert!(
        bounded,
        "`read x` came back '{st}' after {took:?} (want awaiting_input or error within wait_s=10): {r}\n\
         next call: {next}"
    );
    assert!(
        took < Duration::from_secs(12),
        "`read x` took {took:?}: {r}"
    );
    assert!(
        status(&next) == "ok" && next["stdout"].as_str().unwrap_or("").contains("after-read"),
        "the next call after `read x` (took {took_next:?}): {next}"
    );
    server.destroy("sh").await;
    server.shutdown().await;
}
