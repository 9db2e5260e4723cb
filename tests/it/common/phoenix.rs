//! Arize Phoenix, the trace backend of the telemetry tests: `phoenix serve` from
//! `.venv-phoenix` (`make phoenix`, pinned in `tests/phoenix/requirements.txt`) on loopback
//! ports of its own, with its database in a temp dir; it receives OTLP/HTTP on its UI port
//! (`/v1/traces`), and its REST API (`/v1/projects/default/spans`) gives the spans back.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::gateways::free_port;

/// A running Phoenix; killed (with its process group) on drop.
pub struct Phoenix {
    child: tokio::process::Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

/// `.venv-phoenix/bin/phoenix` of this checkout; panics with what to run when it is missing.
pub fn binary() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-phoenix/bin/phoenix");
    assert!(
        bin.exists(),
        "{} is missing: run `make phoenix` (part of `make test`)",
        bin.display()
    );
    bin
}

impl Phoenix {
    /// Start Phoenix and wait (up to 180 s: its first start migrates its database) until it
    /// answers `/healthz`.
    pub async fn start() -> Phoenix {
        kernel_mcp::tls::install_provider();
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = tokio::process::Command::new(binary())
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("DO_NOT_TRACK", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start phoenix");
        let p = Phoenix {
            child,
            port,
            _dir: dir,
        };
        let url = format!("{}/healthz", p.url());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        while !reqwest::get(&url)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "Phoenix did not answer {url} within 180 s"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        p
    }

    /// Its base URL (the UI, the REST API and the OTLP/HTTP endpoint).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment that makes kernel-mcp export its spans here (no metrics: Phoenix
    /// takes traces only), in batches 100 ms apart.
    pub fn otel_env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.url().into()),
            ("OTEL_METRICS_EXPORTER", "none".into()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ]
    }

    /// Every span Phoenix holds (newest first), as its REST API gives them.
    pub async fn spans(&self) -> Vec<Value> {
        let url = format!("{}/v1/projects/default/spans?limit=1000", self.url());
        let Ok(r) = reqwest::get(&url).await else {
            return Vec::new();
        };
        let v: Value = r.json().await.unwrap_or(Value::Null);
        v["data"].as_array().cloned().unwrap_or_default()
    }

    /// Poll until `done` holds for the spans (up to 60 s); returns the spans last seen.
    pub async fn spans_until(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.spans().await;
            if done(&spans) || tokio::time::Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Stop it (SIGTERM to its process group, then kill).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The span named `name` (and matching `with`) in `spans`.
pub fn find<'a>(
    spans: &'a [Value],
    name: &str,
    with: impl Fn(&Value) -> bool,
) -> Option<&'a Value> {
    spans.iter().find(|s| s["name"] == name && with(s))
}

/// A span's trace id, span id, parent id.
pub fn ids(span: &Value) -> (&str, &str, &str) {
    (
        span["context"]["trace_id"].as_str().unwrap_or_default(),
        span["context"]["span_id"].as_str().unwrap_or_default(),
        span["parent_id"].as_str().unwrap_or_default(),
    )
}

/// Attribute `key` of a span, as text.
pub fn attr(span: &Value, key: &str) -> String {
    match &span["attributes"][key] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}
