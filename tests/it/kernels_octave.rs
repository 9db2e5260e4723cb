//! Real-kernel acceptance for Octave through octave_kernel (metakernel + Debian's Octave
//! 7.3; issue 5). octave_kernel reports errors as stdout text with reply status `ok`, and
//! waits for more input when the code is incomplete; one-line blocks, which its
//! `is_complete` calls incomplete, run as typed (issue 44).

use std::time::Duration;

use crate::common::kernels::*;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octave_conformance() {
    conformance(&Lang {
        kernel: "octave",
        set_state: "x = 31337;",
        read_state: "x",
        print: "disp('hello-stdout')",
        raise: "error('boom-octave')",
        error_marker: "boom-octave",
        long_loop: "while true\n  y = 1;\nend",
        may_die_on_interrupt: false,
    })
    .await;
}

/// `x = [1 2 3` is incomplete: it returns an error quickly, and does not swallow the next
/// call (`disp(42)` prints 42).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octave_incomplete_code_errors_quickly_and_the_next_call_works() {
    let server = Server::start().await;
    require_kernel(&server, "octave").await;
    create_kernel_session(&server, "oct", "octave").await;
    let (r, took) = exec_args(&server, "oct", "x = [1 2 3", json!({"wait_s": 15})).await;
    eprintln!("`x = [1 2 3` after {took:?}: {r}");
    assert_eq!(status(&r), "error", "`x = [1 2 3` after {took:?}: {r}");
    assert!(
        took < Duration::from_secs(10),
        "`x = [1 2 3` took {took:?}: {r}"
    );
    let (next, took) = exec_args(&server, "oct", "disp(42)", json!({"wait_s": 15})).await;
    assert_eq!(status(&next), "ok", "`disp(42)` after {took:?}: {next}");
    assert_eq!(
        next["stdout"].as_str().unwrap_or("").trim(),
        "42",
        "`disp(42)` should print exactly 42: {next}"
    );
    server.destroy("oct").await;
    server.shutdown().await;
}

/// One-line blocks are complete Octave (`octave-cli` runs them as typed): they run, and
/// print what they print, instead of being refused as incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octave_one_line_blocks_run_as_typed() {
    let server = Server::start().await;
    require_kernel(&server, "octave").await;
    create_kernel_session(&server, "oct1", "octave").await;
    let cases = [
        ("for i=1:3 disp(i); end", "1\n2\n3"),
        ("for i=1:3, disp(i), end", "1\n2\n3"),
        ("if true disp(7); end", "7"),
        ("x = [5 6 7]; disp(x(end)); while false, end", "7"),
        (
            "s = 'end for if'; if numel(s) > 3, disp(s), end",
            "end for if",
        ),
        ("k = 0; do k++; until k == 2\ndisp(k)", "2"),
    ];
    for (code, out) in cases {
        let (r, took) = exec_args(&server, "oct1", code, json!({"wait_s": 30})).await;
        assert_eq!(status(&r), "ok", "{code:?} after {took:?}: {r}");
        let stdout = r["stdout"].as_str().unwrap_or("").replace("\r\n", "\n");
        assert_eq!(stdout.trim(), out, "{code:?}: {r}");
    }
    // A block left open is still refused quickly, without swallowing the next call.
    let (r, took) = exec_args(&server, "oct1", "for i=1:3 disp(i);", json!({"wait_s": 15})).await;
    assert_eq!(status(&r), "error", "an open block after {took:?}: {r}");
    let (next, _) = exec_args(&server, "oct1", "disp(42)", json!({"wait_s": 15})).await;
    assert_eq!(next["stdout"].as_str().unwrap_or("").trim(), "42", "{next}");
    server.destroy("oct1").await;
    server.shutdown().await;
}
