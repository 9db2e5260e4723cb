//! What the Jupyter-face tests drive: `kernel-mcp service --http` with a known token
//! ([`FaceService`]), a real Jupyter Server from `./.venv-gw` whose kernels are the service's
//! (`--gateway-url`, [`JupyterOnFace`]), a person's websocket client
//! (`tests/it/jupyter_client.py`, [`person_runs`]) and plain REST calls ([`rest`]).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::gateways::free_port;
use super::http::HttpClient;
use super::require_venv;
use super::service::TestService;

/// The `.venv-gw` interpreter (Jupyter Server, websockets, nbformat).
pub fn gw_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-gw/bin/python")
}

/// A running `kernel-mcp service --http 127.0.0.1:PORT` with token `token`.
pub struct FaceService {
    pub svc: TestService,
    pub port: u16,
    pub token: String,
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl FaceService {
    /// Start the service (extra arguments and environment after the defaults) and wait
    /// until its HTTP face answers.
    pub async fn start(extra: &[&str], env: &[(&str, &str)]) -> FaceService {
        require_venv();
        let svc = TestService::new();
        let dir = tempfile::tempdir().unwrap();
        let token = format!("face-{}", uuid::Uuid::new_v4().simple());
        let file = dir.path().join("token");
        std::fs::write(&file, format!("{token}\n")).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let port = free_port();
        let mut cmd = svc.command(&["--http", &format!("127.0.0.1:{port}")]);
        cmd.args(["--pool", "python3=0", "--token-file"])
            .arg(&file)
            .args(extra)
            .envs(env.iter().copied());
        let child = cmd.spawn().expect("spawn the service");
        let face = FaceService {
            svc,
            port,
            token,
            child,
            _dir: dir,
        };
        let url = face.url("/api");
        let up = async {
            loop {
                if answers(&url, &face.token).await {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), up)
            .await
            .unwrap_or_else(|_| panic!("the Jupyter face never answered\n{}", face.svc.log_text()));
        face
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// An MCP client of the service over its `/mcp`.
    pub async fn agent(&self) -> HttpClient {
        HttpClient::connect_as(self.port, Some(&self.token)).await
    }

    /// An agent whose client asks for the `default` tools plus the named set `tools`.
    pub async fn agent_with(&self, tools: &str) -> HttpClient {
        let ask = serde_json::json!({"experimental": {"kernel-mcp": {"tools": tools}}});
        HttpClient::connect_asking(self.port, Some(&self.token), ask).await
    }

    /// SIGTERM, and wait for the service to exit.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

/// A real Jupyter Server (`jupyter server`, with JupyterLab's extension when installed) whose
/// kernels are a kernel-mcp service's: `--gateway-url` pointed at its Jupyter face, the
/// token in `JUPYTER_GATEWAY_AUTH_TOKEN`. Its whole process group is stopped when dropped.
pub struct JupyterOnFace {
    pub port: u16,
    pub token: String,
    /// The server's root directory (where notebooks are).
    pub root: PathBuf,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl JupyterOnFace {
    /// Start it (`app`: `jupyter-server` or `jupyter-lab`) on `face` and wait (up to 90 s)
    /// for its REST API.
    pub async fn start(face: &FaceService, app: &str) -> JupyterOnFace {
        let bin = gw_python().parent().unwrap().to_path_buf();
        assert!(
            bin.join(app).exists(),
            "{} is missing: run `make gateways`",
            bin.join(app).display()
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let port = free_port();
        let token = format!("js-{}", uuid::Uuid::new_v4().simple());
        let log = dir.path().join("server.log");
        let logfile = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new(bin.join(app))
            .args([
                "--ip=127.0.0.1",
                &format!("--port={port}"),
                "--ServerApp.port_retries=0",
                &format!("--IdentityProvider.token={token}"),
                "--ServerApp.open_browser=False",
                "--ServerApp.allow_root=True",
                &format!("--ServerApp.root_dir={}", root.display()),
                &format!("--gateway-url={}", face.url("")),
                "--GatewayClient.request_timeout=60",
            ])
            .current_dir(&root)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("JUPYTER_GATEWAY_AUTH_TOKEN", &face.token)
            .env("JUPYTER_CONFIG_DIR", dir.path().join("config"))
            .env("JUPYTER_DATA_DIR", dir.path().join("data"))
            .env("JUPYTER_RUNTIME_DIR", dir.path().join("runtime"))
            .env("JUPYTER_PLATFORM_DIRS", "1")
            .env("HOME", dir.path())
            .env_remove("JUPYTER_PATH")
            .env_remove("PYTHONPATH")
            .stdin(Stdio::null())
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .process_group(0)
            .spawn()
            .expect("start Jupyter Server");
        let js = JupyterOnFace {
            port,
            token,
            root,
            child,
            log,
            _dir: dir,
        };
        let url = js.url("/api/kernelspecs");
        let up = async {
            loop {
                if answers(&url, &js.token).await {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(90), up)
            .await
            .is_err()
        {
            panic!("Jupyter Server did not come up:\n{}", js.log_text());
        }
        js
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The websocket URL of kernel `id`'s channels on this server.
    pub fn channels(&self, id: &str) -> String {
        format!("ws://127.0.0.1:{}/api/kernels/{id}/channels", self.port)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Open notebook `path` on kernel `kernel` (`{"id": …}` attaches, `{"name": …}` starts
    /// one), as JupyterLab does (`POST /api/sessions`); returns the session model.
    pub async fn open_notebook(&self, path: &str, kernel: Value) -> Value {
        let body = json!({"path": path, "type": "notebook", "name": path, "kernel": kernel});
        let (status, v) = rest(
            "POST",
            &self.url("/api/sessions"),
            Some(&self.token),
            Some(body),
        )
        .await;
        assert_eq!(status, 201, "open {path}: {v}\n{}", self.log_text());
        v
    }

    /// SIGTERM to the group and wait; SIGKILL after 15 s.
    pub fn stop(&mut self) {
        let pg = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..150 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for JupyterOnFace {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- Jupyter Server log ---\n{}", self.log_text());
        }
    }
}

/// True when `GET url` with `token` answers 200 (a server not up yet answers nothing).
async fn answers(url: &str, token: &str) -> bool {
    kernel_mcp::tls::install_provider();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let req = client
        .get(url)
        .header("Authorization", format!("token {token}"));
    matches!(
        tokio::time::timeout(Duration::from_secs(10), req.send()).await,
        Ok(Ok(r)) if r.status() == 200
    )
}

/// A REST call with `Authorization: token TOKEN` (when given): (status, JSON body or null).
pub async fn rest(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    kernel_mcp::tls::install_provider();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut req = client.request(method.parse().unwrap(), url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("token {t}"));
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    match tokio::time::timeout(Duration::from_secs(120), req.send()).await {
        Ok(Ok(r)) => {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        other => panic!("{method} {url}: {other:?}"),
    }
}

/// A person runs `code` over the channels websocket at `ws_url` (`framing` `v1` or `json`):
/// the JSON `tests/it/jupyter_client.py` prints.
pub async fn person_runs(ws_url: &str, token: &str, framing: &str, code: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/jupyter_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(150),
        tokio::process::Command::new(gw_python())
            .arg(script)
            .args([ws_url, token, framing, code])
            .output(),
    )
    .await
    .expect("the person's client finished")
    .expect("run the person's client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "the person's client failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
