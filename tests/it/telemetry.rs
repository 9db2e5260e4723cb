//! OpenTelemetry export (docs/telemetry.md) into a real trace backend, Arize
//! Phoenix (`common::phoenix`): a 2026-07-28 client's trace continues through kernel-mcp down
//! to the kernel and the broker's call out; an interrupt that escalates, and a killed kernel,
//! leave their spans in the run's trace; nothing exported carries code, output or a token;
//! and a collector that is down or hangs costs no latency, bounded memory and one warning.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::broker::{everything_entry, write_registry};
use crate::common::phoenix::{Phoenix, attr, find, ids};
use crate::common::raw::{RawClient, stateless_call_line};
use crate::common::{Server, structured};

/// The caller's span: trace `…c0ffee…`, span `b7ad6b7169203331`, sampled.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0c0ffee1";
const CALLER: &str = "b7ad6b7169203331";

fn traceparent(trace: &str) -> Value {
    json!({"traceparent": format!("00-{trace}-{CALLER}-01"), "tracestate": "vendor=1"})
}

/// `env` as the harness takes it.
fn os_env<'a>(env: &'a [(&'static str, OsString)]) -> Vec<(&'static str, &'a std::ffi::OsStr)> {
    env.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
}

/// A span's duration in seconds.
fn seconds(span: &Value) -> f64 {
    let t = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(span[k].as_str().unwrap_or_default())
            .map(|d| d.timestamp_micros() as f64 / 1e6)
            .unwrap_or(0.0)
    };
    t("end_time") - t("start_time")
}

/// The structured result of a raw `tools/call` response.
fn result_of(response: &Value) -> &Value {
    &response["result"]["structuredContent"]
}

fn in_trace<'a>(spans: &'a [Value], trace: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| ids(s).0 == trace).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_trace_runs_through_the_queue_the_run_and_a_brokered_call_and_carries_no_content()
{
    let phoenix = Phoenix::start().await;
    let mut env = phoenix.otel_env();
    env.push(("KERNEL_MCP_TOKEN", "tok-NEVER-EXPORTED-91".into()));
    let mut client = RawClient::spawn(&os_env(&env), &[]);
    write_registry(
        client.workdir(),
        json!({"everything": everything_entry(json!({}))}),
    );
    let none = json!({});
    let create = json!({"session_id": "s"});
    client
        .write(&stateless_call_line(
            1,
            "create_session",
            create,
            none.clone(),
        ))
        .await;
    assert!(result_of(&client.read(1).await)["session_id"] == "s");
    // A run that holds the kernel, then the traced call that queues behind it.
    let first = json!({"session_id": "s", "code": "import time; time.sleep(3)", "wait_s": 60});
    client
        .write(&stateless_call_line(2, "execute", first, none))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let code = "# CODE_MARK_7q\nprint('OUT' + 'PUT_MARK_3z')\n\
                import matplotlib; matplotlib.use('agg'); import matplotlib.pyplot as plt\n\
                plt.plot([1, 3, 2]); plt.show()\n\
                from kernel_mcp import mcp\n\
                print(mcp.text(mcp.call('everything', 'echo', message='via the broker')))";
    let traced = json!({"session_id": "s", "code": code, "wait_s": 120});
    client
        .write(&stateless_call_line(
            3,
            "execute",
            traced,
            traceparent(TRACE),
        ))
        .await;
    assert_eq!(result_of(&client.read(2).await)["status"], "ok");
    let r = client.read(3).await;
    let r = result_of(&r);
    assert_eq!(r["status"], "ok", "{r:#}");
    assert!(
        r["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("Echo: via the broker"),
        "{r:#}"
    );

    let spans = phoenix
        .spans_until(|s| find(s, "tools/call echo", |x| ids(x).0 == TRACE).is_some())
        .await;
    let trace = in_trace(&spans, TRACE);
    let names: Vec<&str> = trace.iter().filter_map(|s| s["name"].as_str()).collect();
    let server = find(&spans, "tools/call execute", |s| ids(s).0 == TRACE)
        .unwrap_or_else(|| panic!("no server span in the caller's trace: {names:?}"));
    assert_eq!(
        ids(server).2,
        CALLER,
        "the server span's parent is the caller's"
    );
    assert_eq!(attr(server, "mcp.method.name"), "tools/call");
    assert_eq!(attr(server, "gen_ai.tool.name"), "execute");
    assert_eq!(attr(server, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attr(server, "kernel_mcp.session"), "s");
    assert_eq!(attr(server, "kernel_mcp.principal"), "owner");
    let run = find(&spans, "kernel_mcp.run", |s| ids(s).2 == ids(server).1)
        .unwrap_or_else(|| panic!("no run span under the request: {names:?}"));
    assert_eq!(attr(run, "kernel_mcp.run.status"), "ok");
    assert_eq!(
        attr(run, "kernel_mcp.run.id"),
        r["run_id"].as_str().unwrap()
    );
    assert!(
        attr(run, "kernel_mcp.run.output_bytes")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let child = |name: &str| {
        find(&spans, name, |s| ids(s).2 == ids(run).1)
            .unwrap_or_else(|| panic!("no {name} under the run: {names:?}"))
    };
    let queued = child("queue.wait");
    assert!(
        seconds(queued) > 1.0,
        "it queued behind the 3 s run: {queued:#}"
    );
    child("kernel.execute");
    let call = child("tools/call echo");
    assert_eq!(attr(call, "kernel_mcp.broker.server"), "everything");

    // Nothing exported holds the code, its output or the server's token.
    let all = serde_json::to_string(&phoenix.spans().await).unwrap();
    for secret in [
        "CODE_MARK_7q",
        "OUTPUT_MARK_3z",
        "tok-NEVER-EXPORTED-91",
        "via the broker",
    ] {
        assert!(!all.contains(secret), "{secret} was exported");
    }
    if std::env::var_os("KERNEL_MCP_PHOENIX_SHOT").is_some() {
        screenshot(&phoenix, TRACE).await;
    }
    assert!(client.close().await, "the server exits");
    phoenix.stop().await;
}

/// The trace in Phoenix's UI, in headless Chromium: `target/telemetry/phoenix-trace.png`
/// (`make phoenix-shot` copies it to docs/).
async fn screenshot(phoenix: &Phoenix, trace: &str) {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = here.join("target/telemetry/phoenix-trace.png");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let run = tokio::process::Command::new("node")
        .current_dir(here.join("tests/jupyterlab"))
        .arg(here.join("tests/phoenix/screenshot.mjs"))
        .args([&phoenix.url(), phoenix.project(), trace])
        .arg(&out)
        .output()
        .await
        .expect("run node");
    assert!(
        run.status.success() && out.exists(),
        "the screenshot failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_that_does_not_stop_the_code_escalates_to_a_restart_in_the_runs_trace() {
    let phoenix = Phoenix::start().await;
    let trace_id = "4bf92f3577b34da6a3ce929d0c0ffee2";
    let mut client = RawClient::spawn(&os_env(&phoenix.otel_env()), &[]);
    let code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n\
                while True:\n    time.sleep(0.05)";
    let args = json!({"session_id": "b", "code": code, "timeout_s": 1, "wait_s": 60});
    client
        .write(&stateless_call_line(
            1,
            "create_session",
            json!({"session_id": "b"}),
            json!({}),
        ))
        .await;
    client.read(1).await;
    client
        .write(&stateless_call_line(
            2,
            "execute",
            args,
            traceparent(trace_id),
        ))
        .await;
    let r = client.read(2).await;
    assert_eq!(result_of(&r)["status"], "timeout", "{r:#}");
    let spans = phoenix
        .spans_until(|s| {
            find(s, "kernel.restart", |x| ids(x).0 == trace_id).is_some()
                && find(s, "kernel.start", |x| {
                    attr(x, "kernel_mcp.start.reason") == "recover"
                })
                .is_some()
        })
        .await;
    let run = find(&spans, "kernel_mcp.run", |s| ids(s).0 == trace_id).expect("the run's span");
    assert_eq!(attr(run, "kernel_mcp.run.status"), "timeout");
    let under_run = |name: &str| find(&spans, name, |s| ids(s).2 == ids(run).1);
    assert!(
        under_run("kernel.interrupt").is_some(),
        "the interrupt is a child of the run"
    );
    let restart = under_run("kernel.restart").expect("the escalation under the run");
    assert_eq!(
        attr(restart, "kernel_mcp.restart.why"),
        "interrupt_not_taken"
    );
    let start = find(&spans, "kernel.start", |s| {
        attr(s, "kernel_mcp.start.reason") == "recover" && attr(s, "kernel_mcp.session") == "b"
    });
    assert!(start.is_some(), "the replacement kernel's start");
    assert!(client.close().await, "the server exits");
    phoenix.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_kernel_ends_its_run_kernel_died_and_the_recovery_start_is_exported() {
    let phoenix = Phoenix::start().await;
    let trace_id = "4bf92f3577b34da6a3ce929d0c0ffee3";
    let mut client = RawClient::spawn(&os_env(&phoenix.otel_env()), &[]);
    client
        .write(&stateless_call_line(
            1,
            "create_session",
            json!({"session_id": "k"}),
            json!({}),
        ))
        .await;
    client.read(1).await;
    let kill =
        json!({"session_id": "k", "code": "import os; os.kill(os.getpid(), 9)", "wait_s": 60});
    client
        .write(&stateless_call_line(
            2,
            "execute",
            kill,
            traceparent(trace_id),
        ))
        .await;
    assert_eq!(result_of(&client.read(2).await)["status"], "kernel_died");
    let spans = phoenix
        .spans_until(|s| {
            find(s, "kernel.start", |x| {
                attr(x, "kernel_mcp.start.reason") == "recover"
            })
            .is_some()
                && find(s, "kernel.restart", |x| ids(x).0 == trace_id).is_some()
        })
        .await;
    let run = find(&spans, "kernel_mcp.run", |s| ids(s).0 == trace_id).expect("the run's span");
    assert_eq!(attr(run, "kernel_mcp.run.status"), "kernel_died");
    assert_eq!(attr(run, "error.type"), "kernel_died");
    let restart = find(&spans, "kernel.restart", |s| ids(s).2 == ids(run).1)
        .expect("why the kernel is replaced, under the run");
    assert_eq!(attr(restart, "kernel_mcp.restart.why"), "kernel_died");
    let start = find(&spans, "kernel.start", |s| {
        attr(s, "kernel_mcp.start.reason") == "recover"
    })
    .unwrap();
    assert_eq!(attr(start, "kernel_mcp.session"), "k");
    assert_eq!(attr(start, "kernel_mcp.kernel.source"), "local");
    assert!(client.close().await, "the server exits");
    phoenix.stop().await;
}

/// p50 of `n` calls of `execute 1+1`, in seconds.
async fn p50(server: &Server, n: usize) -> f64 {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let r = server
            .call("execute", json!({"session_id": "p", "code": "1+1"}))
            .await;
        times.push(t0.elapsed().as_secs_f64());
        assert_eq!(structured(&r)["status"], "ok");
    }
    times.sort_by(f64::total_cmp);
    times[n / 2]
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A collector that accepts connections and never answers.
async fn hanging_collector() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (port, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_down_or_hanging_costs_no_latency_bounded_memory_and_one_warning() {
    let down = crate::common::gateways::free_port();
    let (hang, collector) = hanging_collector().await;
    let mut p50s = Vec::new();
    for endpoint in [None, Some(down), Some(hang)] {
        let env: Vec<(&str, OsString)> = match endpoint {
            None => vec![],
            Some(port) => vec![
                (
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    format!("http://127.0.0.1:{port}").into(),
                ),
                ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
                ("OTEL_METRIC_EXPORT_INTERVAL", "500".into()),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000".into()),
            ],
        };
        let server = Server::start_with(&os_env(&env), &[]).await;
        server.create_session("p").await;
        p50(&server, 5).await;
        p50s.push(p50(&server, 40).await);
        if endpoint.is_some() {
            // Many more spans than the queue holds: memory stays bounded.
            let before = rss_kib(server.pid());
            p50(&server, 300).await;
            let grown = rss_kib(server.pid()).saturating_sub(before) / 1024;
            assert!(
                grown < 64,
                "the server grew {grown} MiB with the collector at {endpoint:?}"
            );
            let warned = crate::common::wait_until(Duration::from_secs(30), || {
                server.stderr().contains("OpenTelemetry export of")
            })
            .await;
            assert!(warned, "a warning says the export fails");
            tokio::time::sleep(Duration::from_secs(2)).await;
            let stderr = server.stderr();
            let warnings = stderr
                .lines()
                .filter(|l| l.contains(" WARN ") && l.contains("OpenTelemetry export of"))
                .count();
            assert_eq!(warnings, 1, "one warning, not one per batch");
        }
        server.shutdown().await;
    }
    eprintln!(
        "execute 1+1 p50: off {:.2} ms, collector down {:.2} ms, hanging {:.2} ms",
        p50s[0] * 1e3,
        p50s[1] * 1e3,
        p50s[2] * 1e3
    );
    for (what, p) in [("down", p50s[1]), ("hanging", p50s[2])] {
        assert!(
            p < p50s[0] * 1.5 + 0.005,
            "with the collector {what}, p50 {p:.4} s against {:.4} s without export",
            p50s[0]
        );
    }
    collector.abort();
}

/// `kernel-mcp doctor` (text and `--json`) in an environment with `env` set.
fn doctor(env: &[(&str, &str)]) -> (String, Value) {
    let home = tempfile::tempdir().unwrap();
    let run = |json: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
        cmd.arg("doctor")
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("VIRTUAL_ENV", crate::common::venv())
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_SDK_DISABLED");
        if json {
            cmd.arg("--json");
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run doctor")
    };
    let text = String::from_utf8_lossy(&run(false).stdout).into_owned();
    let report: Value = serde_json::from_slice(&run(true).stdout).expect("doctor --json");
    (text, report["telemetry"].clone())
}

#[test]
fn doctor_says_whether_export_is_on_and_where_to() {
    let (text, off) = doctor(&[]);
    assert_eq!(off["on"], false, "{off:#}");
    assert_eq!(off["traces"], Value::Null);
    assert!(
        text.contains("telemetry: off (set OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{text}"
    );

    let (text, on) = doctor(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_SERVICE_NAME", "agents-a"),
    ]);
    assert_eq!(on["on"], true, "{on:#}");
    assert_eq!(on["traces"], "http://127.0.0.1:4318/v1/traces");
    assert_eq!(on["metrics"], Value::Null, "OTEL_METRICS_EXPORTER=none");
    assert_eq!(on["content_capture"], false);
    assert!(
        text.contains("telemetry: on: traces to http://127.0.0.1:4318/v1/traces")
            && text.contains("service agents-a"),
        "{text}"
    );

    let (text, grpc) = doctor(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ]);
    assert_eq!(grpc["on"], false, "{grpc:#}");
    assert!(
        grpc["why_off"]
            .as_str()
            .unwrap_or_default()
            .contains("http/protobuf"),
        "{grpc:#}"
    );
    assert!(
        text.contains("telemetry: off (OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        "{text}"
    );
}
