//! The Kernel Gateway rows of the bench: one Jupyter Kernel Gateway from `./.venv-gw` (made by
//! `make gateways`) on a free 127.0.0.1 port, then, one after the other on that gateway,
//! kernel-mcp (`--gateway kg=URL`, the token in `KERNEL_MCP_GATEWAY_TOKEN`) and a plain Python
//! client (bench/gateway_ref.py: urllib + `websockets`). Both time cold start → ready and
//! `execute 1+1` round trips. The gateway's process group is stopped at the end, kernels
//! included. Without `.venv-gw` the rows are skipped with a note.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_side::{call, check_tool, close, execute_1p1, spawn_with, wait_until_ready};
use crate::stats::{ms, summary};
use crate::{Opts, Res, run_json_child};

/// What both sides measured on the gateway.
pub struct Figures {
    /// kernel-mcp: create_session(gateway, kernel) until ready.
    pub create_ms: Vec<f64>,
    /// kernel-mcp: execute 1+1 over MCP stdio on the gateway kernel.
    pub exec_ms: Vec<f64>,
    /// The Python websockets client's JSON (bench/gateway_ref.py).
    pub reference: Value,
    pub versions: String,
}

impl Figures {
    pub fn raw_json(&self) -> Value {
        json!({
            "kernel_mcp": {"create_ms": summary(&self.create_ms), "execute_ms": summary(&self.exec_ms)},
            "websockets_client": self.reference,
            "gateway": self.versions,
        })
    }
}

fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-gw")
}

/// A running Kernel Gateway; dropping it stops its whole process group.
struct Gateway {
    url: String,
    token: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    /// SIGTERM to the group (the gateway shuts its kernels down), up to 5 s for the gateway to
    /// exit, then SIGKILL to whatever of the group is left.
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        let pg = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(pg, Signal::SIGTERM);
        for _ in 0..50 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = killpg(pg, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

async fn start_gateway() -> Res<Gateway> {
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let token = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let bin = venv().join("bin");
    let log = std::fs::File::create(dir.path().join("gateway.log"))?;
    let child = std::process::Command::new(bin.join("jupyter-kernelgateway"))
        .args([
            "--ip=127.0.0.1".to_string(),
            format!("--port={port}"),
            format!("--KernelGatewayApp.auth_token={token}"),
            "--ZMQChannelsWebsocketConnection.iopub_data_rate_limit=1e12".into(),
            "--ZMQChannelsWebsocketConnection.iopub_msg_rate_limit=1e9".into(),
        ])
        .current_dir(dir.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("VIRTUAL_ENV", venv())
        .env("JUPYTER_CONFIG_DIR", dir.path().join("config"))
        .env("JUPYTER_DATA_DIR", dir.path().join("data"))
        .env("JUPYTER_RUNTIME_DIR", dir.path().join("runtime"))
        .env("HOME", dir.path())
        .env_remove("JUPYTER_PATH")
        .env_remove("PYTHONPATH")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let gw = Gateway {
        url: format!("http://127.0.0.1:{port}"),
        token,
        child,
        _dir: dir,
    };
    // The build's one rustls provider (as kernel-mcp installs it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        let answer = http
            .get(format!("{}/api/kernelspecs", gw.url))
            .header("Authorization", format!("token {}", gw.token))
            .send()
            .await;
        if answer.is_ok_and(|r| r.status().is_success()) {
            return Ok(gw);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err("Kernel Gateway did not answer /api/kernelspecs within 90 s".into())
}

/// Both sides on one gateway, or `None` (with a note) when `.venv-gw` is missing.
pub async fn measure(bin: &Path, o: &Opts) -> Res<Option<Figures>> {
    let python = venv().join("bin/python");
    if !python.exists() {
        eprintln!(
            "bench: {} is missing (`make gateways`): no Kernel Gateway rows",
            venv().display()
        );
        return Ok(None);
    }
    let gw = start_gateway().await?;
    let versions = std::process::Command::new(&python)
        .args([
            "-c",
            "import kernel_gateway, jupyter_server; print(f'Kernel Gateway {kernel_gateway.__version__}, jupyter_server {jupyter_server.__version__}')",
        ])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_default();
    let (create_ms, exec_ms) = ours(bin, o, &gw).await?;
    eprintln!("bench: kernel-mcp on Kernel Gateway done; running the websockets client");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gateway_ref.py");
    let args: Vec<String> = vec![
        script.display().to_string(),
        "--url".into(),
        gw.url.clone(),
        "--token".into(),
        gw.token.clone(),
        "--kernel".into(),
        o.kernel.clone(),
        "--n".into(),
        o.n.to_string(),
        "--warmup".into(),
        o.warmup.to_string(),
        "--starts".into(),
        o.starts.to_string(),
    ];
    let reference = run_json_child(&python, &args, "websockets gateway client").await?;
    drop(gw);
    Ok(Some(Figures {
        create_ms,
        exec_ms,
        reference,
        versions,
    }))
}

/// kernel-mcp on the gateway: `--starts` cold creates (the first session also runs the
/// executes), each destroyed after.
async fn ours(bin: &Path, o: &Opts, gw: &Gateway) -> Res<(Vec<f64>, Vec<f64>)> {
    let spec = format!("kg={}", gw.url);
    let env = [("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new(&gw.token))];
    let (client, pid) = spawn_with(bin, &["serve", "--gateway", &spec], &env).await?;
    let (mut create_ms, mut exec_ms) = (Vec::new(), Vec::with_capacity(o.n));
    let result = async {
        for i in 0..o.starts {
            let id = format!("bench-gw-{i}");
            let t0 = Instant::now();
            let r = call(
                &client,
                "create_session",
                json!({"session_id": id, "gateway": "kg", "kernel": o.kernel}),
            )
            .await?;
            check_tool(&r, "create_session on the gateway")?;
            wait_until_ready(&client, &id, &r).await?;
            create_ms.push(ms(t0));
            if i == 0 {
                for _ in 0..o.warmup {
                    execute_1p1(&client, &id).await?;
                }
                for _ in 0..o.n {
                    let t1 = Instant::now();
                    execute_1p1(&client, &id).await?;
                    exec_ms.push(ms(t1));
                }
            }
            let r = call(&client, "destroy_session", json!({"session_id": id})).await?;
            check_tool(&r, "destroy_session on the gateway")?;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    close(client, pid).await;
    result.map(|()| (create_ms, exec_ms))
}
