//! Arize Phoenix, the trace backend of the telemetry tests: `phoenix serve` from
//! `.venv-phoenix` (`make phoenix`, pinned in `tests/phoenix/requirements.txt`) on loopback
//! ports of its own, with its database in a temp dir; it receives OTLP/HTTP on its UI port
//! (`/v1/traces`), and its REST API (`/v1/projects/{project}/spans`) gives the spans back.
//!
//! One Phoenix per test process, not one per test (its start migrates a database and takes
//! seconds): the first test that asks starts it, each test exports into a project of its own
//! (`openinference.project.name` in `OTEL_RESOURCE_ATTRIBUTES`), and it stops 20 s after the
//! last test lets go, or when the test process ends, however it ends: a keeper thread that
//! lives as long as the process spawns it with `PR_SET_PDEATHSIG`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::gateways::free_port;

/// How long the shared Phoenix outlives its last user (the telemetry tests run one after the
/// other; a gap between two of them should not cost a restart).
const LINGER: Duration = Duration::from_secs(20);

/// A test's lease on the shared Phoenix and its own project there; let go on drop.
pub struct Phoenix {
    pub port: u16,
    project: String,
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

enum Ask {
    /// A lease: the port of the running Phoenix (started first when none runs).
    Acquire(mpsc::Sender<Result<u16, String>>),
    Release,
}

/// The keeper thread's end of the channel (started on first use).
fn keeper() -> &'static Mutex<mpsc::Sender<Ask>> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Ask>>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("phoenix-keeper".into())
            .spawn(move || keep(rx))
            .expect("start the phoenix keeper thread");
        Mutex::new(tx)
    })
}

/// The running Phoenix: its process, port and working dir.
struct Running {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

/// The keeper: starts Phoenix on the first lease, counts leases, and stops it [`LINGER`] after
/// the count drops to zero. Never returns, so the process's death is what kills Phoenix last.
fn keep(rx: mpsc::Receiver<Ask>) {
    let mut running: Option<Running> = None;
    let mut users = 0usize;
    let mut idle_since = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(Ask::Acquire(reply)) => {
                if running.is_none() {
                    match spawn() {
                        Ok(r) => running = Some(r),
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            continue;
                        }
                    }
                }
                users += 1;
                let _ = reply.send(Ok(running.as_ref().map_or(0, |r| r.port)));
            }
            Ok(Ask::Release) => {
                users = users.saturating_sub(1);
                idle_since = Instant::now();
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        if users == 0
            && idle_since.elapsed() > LINGER
            && let Some(r) = running.take()
        {
            stop(r);
        }
    }
}

fn spawn() -> Result<Running, String> {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = free_port();
    let mut cmd = Command::new(binary());
    cmd.arg("serve")
        .env("PHOENIX_WORKING_DIR", dir.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", free_port().to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("DO_NOT_TRACK", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: prctl is async-signal-safe. The keeper thread that forks lives as long as the
    // test process, so Phoenix gets SIGKILL when the process ends.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    let child = cmd.spawn().map_err(|e| format!("start phoenix: {e}"))?;
    Ok(Running {
        child,
        port,
        _dir: dir,
    })
}

/// SIGTERM to its process group, then (after 10 s) SIGKILL.
fn stop(mut r: Running) {
    let group = nix::unistd::Pid::from_raw(r.child.id() as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if matches!(r.child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = r.child.wait();
}

impl Phoenix {
    /// A lease on the shared Phoenix (started when none runs) with a project of this test's
    /// own; waits (up to 180 s: its first start migrates its database) until it answers
    /// `/healthz`.
    pub async fn start() -> Phoenix {
        static PROJECTS: AtomicU32 = AtomicU32::new(0);
        kernel_mcp::tls::install_provider();
        let (tx, rx) = mpsc::channel();
        keeper()
            .lock()
            .unwrap()
            .send(Ask::Acquire(tx))
            .expect("the phoenix keeper runs");
        let port = tokio::task::spawn_blocking(move || rx.recv())
            .await
            .unwrap()
            .expect("the phoenix keeper answers")
            .unwrap_or_else(|e| panic!("{e}"));
        let n = PROJECTS.fetch_add(1, Ordering::Relaxed);
        let p = Phoenix {
            port,
            project: format!("kernel-mcp-test-{}-{n}", std::process::id()),
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

    /// This test's project in Phoenix.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The environment that makes kernel-mcp export its spans here, into this test's project
    /// (no metrics: Phoenix takes traces only), in batches 100 ms apart.
    pub fn otel_env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.url().into()),
            ("OTEL_METRICS_EXPORTER", "none".into()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("openinference.project.name={}", self.project).into(),
            ),
        ]
    }

    /// Every span of this test's project (newest first), as Phoenix's REST API gives them.
    pub async fn spans(&self) -> Vec<Value> {
        let url = format!(
            "{}/v1/projects/{}/spans?limit=1000",
            self.url(),
            self.project
        );
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

    /// Let go of the lease (the keeper stops Phoenix once no test holds one).
    pub async fn stop(self) {
        drop(self);
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        if let Ok(k) = keeper().lock() {
            let _ = k.send(Ask::Release);
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
