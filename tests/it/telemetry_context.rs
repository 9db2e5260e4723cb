//! Trace context out of kernel-mcp (docs/telemetry.md, "Context in and out"), against a
//! real Arize Phoenix (`common::phoenix`) and real ipykernels: with export on, a Python run's
//! code and the processes it starts see the run's context as `TRACEPARENT` (and `TRACESTATE`,
//! `BAGGAGE`), the one of the run's span Phoenix received, in a pool kernel and after a
//! restart alike, and no name is left in the user's namespace; the caller's `tracestate` and
//! `baggage` from `_meta` reach the execute_request metadata, and the broker passes the
//! context on in the `_meta` of its calls; with export off the kernel gets nothing.

use std::ffi::OsString;

use serde_json::{Value, json};

use crate::common::broker::write_registry;
use crate::common::phoenix::{Phoenix, attr, find, ids};
use crate::common::raw::{RawClient, stateless_call_line};
use crate::common::{Server, structured, venv};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0c0ffee5";
const AFTER_RESTART: &str = "4bf92f3577b34da6a3ce929d0c0ffee6";
const BROKERED: &str = "4bf92f3577b34da6a3ce929d0c0ffee7";
const CALLER: &str = "b7ad6b7169203331";

/// A caller's context with a `tracestate` and a `baggage`.
fn caller_meta(trace: &str) -> Value {
    json!({
        "traceparent": format!("00-{trace}-{CALLER}-01"),
        "tracestate": "vendor=1",
        "baggage": "tenant=blue",
    })
}

/// Code that prints, as one JSON line, what the run sees of its context: the variables, a
/// subprocess's `TRACEPARENT`, the execute_request metadata, whether the callback is
/// registered, and which of the callback's own names reached the user's namespace.
const PROBE: &str = r#"import json, os, subprocess, sys
from IPython import get_ipython
_md = get_ipython().kernel.get_parent()["metadata"]
_sub = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('TRACEPARENT', ''))"],
                      capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "env": os.environ.get("TRACEPARENT"), "state": os.environ.get("TRACESTATE"),
    "baggage": os.environ.get("BAGGAGE"), "sub": _sub,
    "meta": {k: _md.get(k) for k in ("traceparent", "tracestate", "baggage")},
    "hooked": any(getattr(c, "kernel_mcp_trace_env", False)
                  for c in get_ipython().events.callbacks["pre_run_cell"]),
    "leaked": [n for n in ("_install", "pre_run_cell", "_VARS", "launched") if n in globals()],
}))"#;

/// The JSON line [`PROBE`] printed, from a structured execute result.
fn probed(result: &Value) -> Value {
    assert_eq!(result["status"], "ok", "{result:#}");
    let out = result["stdout"].as_str().unwrap_or_default();
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `(trace id, span id)` of a `traceparent`.
fn parts(traceparent: &Value) -> (String, String) {
    let text = traceparent.as_str().unwrap_or_default();
    let fields: Vec<&str> = text.split('-').collect();
    assert_eq!(fields.len(), 4, "a W3C traceparent: {text}");
    (fields[1].to_string(), fields[2].to_string())
}

fn os_env<'a>(env: &'a [(&'static str, OsString)]) -> Vec<(&'static str, &'a std::ffi::OsStr)> {
    env.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
}

/// A raw client's structured result for request `id`.
async fn call(client: &mut RawClient, id: i64, tool: &str, args: Value, meta: Value) -> Value {
    client
        .write(&stateless_call_line(id, tool, args, meta))
        .await;
    client.read(id).await["result"]["structuredContent"].clone()
}

/// Wait (up to 120 s) until the pool holds a ready python3 kernel.
async fn pool_ready(client: &mut RawClient) {
    for id in 1000..2200 {
        let info = call(client, id, "server_info", json!({}), json!({})).await;
        if info["pool"]["python3"]["ready"].as_u64() >= Some(1) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the pool never had a ready python3 kernel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_run_and_its_subprocesses_see_the_runs_traceparent_in_a_pool_kernel_and_after_a_restart()
 {
    let phoenix = Phoenix::start().await;
    let mut client = RawClient::spawn(&os_env(&phoenix.otel_env()), &["--pool", "python3=1"]);
    pool_ready(&mut client).await;
    let created = call(
        &mut client,
        1,
        "create_session",
        json!({"session_id": "t"}),
        json!({}),
    );
    assert_eq!(created.await["session_id"], "t");
    let probe = json!({"session_id": "t", "code": PROBE, "wait_s": 60});
    let first = call(&mut client, 2, "execute", probe.clone(), caller_meta(TRACE)).await;
    let seen = probed(&first);
    let (trace, span) = parts(&seen["env"]);
    assert_eq!(trace, TRACE, "the caller's trace: {seen:#}");
    assert_eq!(
        seen["sub"], seen["env"],
        "a subprocess inherits it: {seen:#}"
    );
    assert_eq!(seen["env"], seen["meta"]["traceparent"], "{seen:#}");
    assert_eq!(seen["state"], "vendor=1", "TRACESTATE: {seen:#}");
    assert_eq!(seen["meta"]["tracestate"], "vendor=1", "{seen:#}");
    assert_eq!(seen["meta"]["baggage"], "tenant=blue", "{seen:#}");
    assert_eq!(seen["baggage"], "tenant=blue", "BAGGAGE: {seen:#}");
    assert_eq!(seen["hooked"], true);
    assert_eq!(seen["leaked"], json!([]), "no name in the user's namespace");

    // A run without a caller's context: a trace of its own, not the previous run's.
    let second = call(&mut client, 3, "execute", probe.clone(), json!({})).await;
    let own = probed(&second);
    let (own_trace, own_span) = parts(&own["env"]);
    assert_ne!(own_trace, TRACE, "{own:#}");
    assert_eq!(own["state"], Value::Null, "{own:#}");
    assert_eq!(own["baggage"], Value::Null, "{own:#}");

    let restarted = call(
        &mut client,
        4,
        "restart_session",
        json!({"session_id": "t"}),
        json!({}),
    );
    restarted.await;
    let third = call(&mut client, 5, "execute", probe, caller_meta(AFTER_RESTART)).await;
    let again = probed(&third);
    assert_eq!(parts(&again["env"]).0, AFTER_RESTART, "{again:#}");
    assert_eq!(again["sub"], again["env"]);

    // Each is the context of its run's span, which Phoenix received with its kernel.execute.
    let run_ids = [&first, &second, &third].map(|r| r["run_id"].as_str().unwrap().to_string());
    let spans = phoenix
        .spans_until(|s| {
            [TRACE, own_trace.as_str(), AFTER_RESTART]
                .iter()
                .all(|t| find(s, "kernel.execute", |x| ids(x).0 == *t).is_some())
                && run_ids.iter().all(|id| {
                    find(s, "kernel_mcp.run", |x| attr(x, "kernel_mcp.run.id") == *id).is_some()
                })
        })
        .await;
    for (result, trace, span) in [
        (&first, TRACE, &span),
        (&second, own_trace.as_str(), &own_span),
    ] {
        let run = find(&spans, "kernel_mcp.run", |s| {
            attr(s, "kernel_mcp.run.id") == result["run_id"].as_str().unwrap()
        })
        .expect("the run's span");
        assert_eq!(ids(run).0, trace);
        assert_eq!(ids(run).1, span, "TRACEPARENT names the run's span");
        let execute = find(&spans, "kernel.execute", |s| ids(s).2 == ids(run).1)
            .expect("kernel.execute under the run");
        assert_eq!(ids(execute).0, trace);
    }
    let start = find(&spans, "kernel.start", |s| {
        attr(s, "kernel_mcp.start.reason") == "create" && attr(s, "kernel_mcp.session") == "t"
    })
    .expect("the session's first kernel start");
    assert_eq!(attr(start, "kernel_mcp.pool.hit"), "true", "a pool kernel");
    assert!(client.close().await, "the server exits");
    phoenix.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_passes_the_runs_traceparent_and_tracestate_on_in_the_calls_meta() {
    let phoenix = Phoenix::start().await;
    let mut client = RawClient::spawn(&os_env(&phoenix.otel_env()), &[]);
    let server =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/broker/meta_server.py");
    let python = venv().join("bin/python");
    write_registry(
        client.workdir(),
        json!({"meta": {"command": python, "args": [server]}}),
    );
    call(
        &mut client,
        1,
        "create_session",
        json!({"session_id": "m"}),
        json!({}),
    )
    .await;
    let code = "from kernel_mcp import mcp\nprint(mcp.text(mcp.call('meta', 'meta')))";
    let args = json!({"session_id": "m", "code": code, "wait_s": 60});
    let r = call(&mut client, 2, "execute", args, caller_meta(BROKERED)).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let text = r["stdout"].as_str().unwrap_or_default();
    let meta: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let (trace, parent) = parts(&meta["traceparent"]);
    assert_eq!(trace, BROKERED, "{meta:#}");
    assert_eq!(meta["tracestate"], "vendor=1", "{meta:#}");
    assert_eq!(
        meta.get("baggage"),
        None,
        "the helper passes no baggage on: {meta:#}"
    );
    let spans = phoenix
        .spans_until(|s| find(s, "tools/call meta", |x| ids(x).0 == BROKERED).is_some())
        .await;
    let call_span = find(&spans, "tools/call meta", |s| ids(s).0 == BROKERED).expect("the call");
    assert_eq!(
        ids(call_span).1,
        parent,
        "the server's parent is the broker's client span"
    );
    assert!(client.close().await, "the server exits");
    phoenix.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_export_off_a_python_kernel_gets_no_callback_and_no_traceparent() {
    let server = Server::start().await;
    server.create_session("off").await;
    let r = server
        .call(
            "execute",
            json!({"session_id": "off", "code": PROBE, "wait_s": 60}),
        )
        .await;
    let seen = probed(&structured(&r));
    assert_eq!(seen["hooked"], false, "{seen:#}");
    assert_eq!(seen["env"], Value::Null, "{seen:#}");
    assert_eq!(
        seen["meta"],
        json!({"traceparent": null, "tracestate": null, "baggage": null})
    );
    server.shutdown().await;
}
