//! The run's trace context as `TRACEPARENT`, `TRACESTATE` and `BAGGAGE` in a Python kernel's
//! environment (docs/telemetry.md, "Context in and out"). When traces are exported, each
//! new kernel of a session whose language is Python (the first start, a restart, a recovery,
//! a kernel taken from the pool) gets one silent `execute_request` that registers an IPython
//! `pre_run_cell` callback ([`HOOK_PY`]): before each cell it copies the `traceparent`,
//! `tracestate` and `baggage` that kernel-mcp put in the run's execute_request metadata into
//! `os.environ`, so code that traces itself, and the processes it starts, join the run's trace.
//!
//! The request is sent before the kernel is handed to the session's actor, and not waited
//! for: a kernel handles shell requests in order, so the callback is in place before the first
//! run's code, and no run waits for it (the execute hot path gains no round trip). Its reply
//! and status messages come from the session's own client session with a parent no run has,
//! which the actor ignores. With export off nothing is sent; other languages get nothing (the
//! metadata alone carries their run's context).

use std::time::Duration;

use crate::kernel::{Channel, KernelIo};
use crate::wire::Execute;

/// The Python the silent request runs (in a private dict: no name reaches the user).
const HOOK_PY: &str = include_str!("trace_env.py");

/// How long handing the request to the kernel's transport may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `kernel` gets the callback: traces are exported and its language is Python.
pub fn wanted(kernel: &dyn KernelIo) -> bool {
    crate::telemetry::settings().exports_traces()
        && kernel.info()["language_info"]["name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case("python"))
}

/// The code of the silent request.
pub fn hook_code() -> String {
    // A JSON string literal is a valid Python string literal.
    let literal = serde_json::to_string(HOOK_PY).unwrap_or_default();
    format!("exec({literal}, {{}})")
}

/// Send the callback's silent request to a new `kernel` when [`wanted`]; a kernel that cannot
/// take it (a transport error, more than [`SEND_TIMEOUT`]) is left as it is, with a debug log:
/// its runs still carry their context in the execute_request metadata.
pub async fn install(kernel: &mut dyn KernelIo) {
    if !wanted(kernel) {
        return;
    }
    let code = hook_code();
    let msg = kernel.request("execute_request", Execute::hidden(&code).content());
    match tokio::time::timeout(SEND_TIMEOUT, kernel.send(Channel::Shell, &msg)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("TRACEPARENT callback not sent to the kernel: {e}"),
        Err(_) => tracing::debug!("TRACEPARENT callback not taken by the kernel's transport"),
    }
}
