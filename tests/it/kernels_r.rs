//! Real-kernel acceptance for R through IRkernel (Debian r-cran-irkernel; issue 5).
//! IRkernel sends results as `display_data`, ignores `interrupt_request`, answers an
//! interrupted request with status `abort`, and skips heartbeats while busy.

use std::time::Duration;

use crate::common::kernels::*;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ir_conformance() {
    conformance(&Lang {
        kernel: "ir",
        set_state: "x <- 31337",
        read_state: "x",
        print: "cat('hello-stdout\\n')",
        raise: "stop('boom-r')",
        error_marker: "boom-r",
        long_loop: "while (TRUE) { i <- 1 }",
        may_die_on_interrupt: false,
    })
    .await;
}

/// `1+1` → `[1] 2` as the run's `result` (IRkernel sends it as display_data, not
/// execute_result).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ir_one_plus_one_is_the_result() {
    let server = Server::start().await;
    require_kernel(&server, "ir").await;
    create_kernel_session(&server, "r", "ir").await;
    let (r, _) = exec_args(&server, "r", "1+1", json!({})).await;
    assert_eq!(status(&r), "ok", "{r}");
    let shown = rendered(&r);
    assert!(
        shown.contains("[1] 2"),
        "'[1] 2' appears nowhere in the result: {r}"
    );
    assert_eq!(
        r["result"], "[1] 2",
        "'[1] 2' is in the rendered text but not in `result` (display_data not promoted): {r}"
    );
    server.destroy("r").await;
    server.shutdown().await;
}

/// A loop printing a million lines with `timeout_s=5` ends `timeout`, and the session
/// works on the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ir_print_loop_times_out_and_the_next_call_works() {
    let server = Server::start().await;
    require_kernel(&server, "ir").await;
    create_kernel_session(&server, "r", "ir").await;
    let (r, took) = exec_args(
        &server,
        "r",
        "for (i in 1:1000000) print(i)",
        json!({"timeout_s": 5, "wait_s": 40}),
    )
    .await;
    assert_eq!(status(&r), "timeout", "took {took:?}: {}", short(&r));
    assert!(
        took < Duration::from_secs(20),
        "timeout_s=5 took {took:?} to report"
    );
    let (next, took) = exec_args(&server, "r", "1+1", json!({"wait_s": 30})).await;
    assert_eq!(
        status(&next),
        "ok",
        "next call after the timeout (took {took:?}): {}",
        short(&next)
    );
    assert!(
        rendered(&next).contains("[1] 2"),
        "next call: {}",
        short(&next)
    );
    server.destroy("r").await;
    server.shutdown().await;
}

/// The result without its (huge) stdout, for messages.
fn short(r: &serde_json::Value) -> serde_json::Value {
    let mut r = r.clone();
    for k in ["stdout", "stderr"] {
        if let Some(s) = r[k].as_str() {
            let n = s.len();
            let tail: String = s
                .chars()
                .rev()
                .take(200)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            r[k] = json!(format!("<{n} bytes> …{tail}"));
        }
    }
    r
}
