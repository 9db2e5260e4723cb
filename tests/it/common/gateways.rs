//! Real Jupyter servers on loopback for the remote-kernel tests: Jupyter Kernel Gateway and
//! Jupyter Server from `./.venv-gw`, Jupyter Enterprise Gateway from `./.venv-eg` (both made
//! by `make gateways`). Each [`GatewayProc`] runs on a free 127.0.0.1 port with a fresh
//! token, IOPub rate limits raised and its Jupyter dirs in a temp dir; dropping it stops the
//! server's whole process group (SIGTERM, then SIGKILL), kernels included.
//!
//! [`Proxy`] is a loopback TCP proxy whose open connections can be cut, to drop a websocket
//! under a running execution.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// Which server to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    KernelGateway,
    JupyterServer,
    EnterpriseGateway,
}

impl Backend {
    /// The gateway name the tests configure it under.
    pub fn name(self) -> &'static str {
        match self {
            Backend::KernelGateway => "kg",
            Backend::JupyterServer => "js",
            Backend::EnterpriseGateway => "eg",
        }
    }

    fn venv(self) -> PathBuf {
        let dir = if self == Backend::EnterpriseGateway {
            ".venv-eg"
        } else {
            ".venv-gw"
        };
        Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
    }

    fn argv(self, port: u16, token: &str, root: &Path) -> Vec<String> {
        let bin = self.venv().join("bin");
        let p = format!("--port={port}");
        let rates = [
            "--ZMQChannelsWebsocketConnection.iopub_data_rate_limit=1e12",
            "--ZMQChannelsWebsocketConnection.iopub_msg_rate_limit=1e9",
        ];
        let mut v: Vec<String> = match self {
            Backend::KernelGateway => vec![
                bin.join("jupyter-kernelgateway").display().to_string(),
                "--ip=127.0.0.1".into(),
                p,
                format!("--KernelGatewayApp.auth_token={token}"),
                "--JupyterWebsocketPersonality.list_kernels=True".into(),
            ],
            Backend::JupyterServer => vec![
                bin.join("jupyter-server").display().to_string(),
                "--ip=127.0.0.1".into(),
                p,
                "--ServerApp.port_retries=0".into(),
                format!("--IdentityProvider.token={token}"),
                "--ServerApp.open_browser=False".into(),
                "--ServerApp.allow_root=True".into(),
                format!("--ServerApp.root_dir={}", root.display()),
            ],
            Backend::EnterpriseGateway => vec![
                bin.join("jupyter-enterprisegateway").display().to_string(),
                "--ip=127.0.0.1".into(),
                p,
                format!("--EnterpriseGatewayApp.auth_token={token}"),
                "--EnterpriseGatewayApp.unauthorized_users=set()".into(),
                "--EnterpriseGatewayApp.list_kernels=True".into(),
                // Enterprise Gateway sets no IOPub rate limits (jupyter_server 1.x then has none).
            ],
        };
        if self != Backend::EnterpriseGateway {
            v.extend(rates.iter().map(|s| s.to_string()));
        }
        v
    }
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running Jupyter server or gateway.
pub struct GatewayProc {
    pub backend: Backend,
    pub url: String,
    pub port: u16,
    pub token: String,
    child: Child,
    log: PathBuf,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl GatewayProc {
    /// Start `backend` and wait (up to 90 s) until `GET /api/kernelspecs` answers.
    pub async fn start(backend: Backend) -> GatewayProc {
        let venv = backend.venv();
        assert!(
            venv.join("bin").join("python").exists(),
            "{} is missing: run `make gateways` (or `make test`)",
            venv.display()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
        let log = dir.path().join("server.log");
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let argv = backend.argv(port, &token, &root);
        let logfile = std::fs::File::create(&log).unwrap();
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&root)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", venv.join("bin").display()),
            )
            .env("VIRTUAL_ENV", &venv)
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
            .process_group(0);
        let child = cmd.spawn().expect("start the gateway");
        let mut gw = GatewayProc {
            backend,
            url: format!("http://127.0.0.1:{port}"),
            port,
            token,
            child,
            log,
            http: {
                // The build's one rustls provider (as kernel-mcp installs it).
                kernel_mcp::tls::install_provider();
                reqwest::Client::new()
            },
            _dir: dir,
        };
        let t0 = std::time::Instant::now();
        loop {
            if let Ok((200, _)) = gw.try_rest(reqwest::Method::GET, "api/kernelspecs").await {
                break;
            }
            if let Ok(Some(st)) = gw.child.try_wait() {
                panic!("{backend:?} exited ({st}):\n{}", gw.log_text());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "{backend:?} did not answer within 90 s:\n{}",
                gw.log_text()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        gw
    }

    /// The server's own log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn try_rest(&self, method: reqwest::Method, path: &str) -> Result<(u16, Value), String> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}/{path}", self.url))
            .header("Authorization", format!("token {}", self.token))
            .timeout(Duration::from_secs(60));
        if method == reqwest::Method::POST {
            req = req.header("content-type", "application/json");
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        let text = r.text().await.map_err(|e| e.to_string())?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// A REST call with the token; panics when the server does not answer.
    pub async fn rest(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}/{path}", self.url))
            .header("Authorization", format!("token {}", self.token))
            .timeout(Duration::from_secs(60));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("gateway REST call");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The ids of the kernels the server runs.
    pub async fn kernel_ids(&self) -> Vec<String> {
        let (status, v) = self.rest(reqwest::Method::GET, "api/kernels", None).await;
        assert_eq!(status, 200, "GET /api/kernels: {v}");
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k["id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Start a kernel over REST (as a person's JupyterLab would); returns its id.
    pub async fn start_kernel(&self) -> String {
        let (status, v) = self
            .rest(
                reqwest::Method::POST,
                "api/kernels",
                Some(serde_json::json!({"name": "python3"})),
            )
            .await;
        assert!(
            status == 201 || status == 200,
            "POST /api/kernels: {status} {v}"
        );
        v["id"].as_str().expect("kernel id").to_string()
    }

    /// `--gateway NAME=URL` for kernel-mcp, through `port` (a proxy) when given.
    pub fn flag(&self, via: Option<u16>) -> String {
        format!(
            "{}=http://127.0.0.1:{}",
            self.backend.name(),
            via.unwrap_or(self.port)
        )
    }
}

impl Drop for GatewayProc {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGTERM);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Whatever is left of the group (kernels included) goes now.
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A loopback TCP proxy to `127.0.0.1:target`; [`Proxy::cut`] drops every open connection
/// and keeps accepting new ones; [`Proxy::answer_with`] makes it answer every new request
/// itself with one HTTP status (a gateway whose kernel is being restarted or moved), REST
/// calls and websocket handshakes alike, until it is set back to `None`.
pub struct Proxy {
    pub port: u16,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    answer: Arc<Mutex<Option<u16>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Default::default();
        let answer: Arc<Mutex<Option<u16>>> = Default::default();
        let (list, canned) = (conns.clone(), answer.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let status = *canned.lock().unwrap();
                let task = tokio::spawn(async move {
                    if let Some(status) = status {
                        answer_once(&mut inbound, status).await;
                    } else if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                list.lock().unwrap().push(task.abort_handle());
            }
        });
        Proxy {
            port,
            conns,
            answer,
            accept,
        }
    }

    /// Drop every open connection (both ends see it close).
    pub fn cut(&self) -> usize {
        let conns: Vec<_> = self.conns.lock().unwrap().drain(..).collect();
        let n = conns.iter().filter(|c| !c.is_finished()).count();
        for c in conns {
            c.abort();
        }
        n
    }

    /// From now on answer every request with `status` (`None`: forward again). Open
    /// connections are cut, so nothing reaches the server meanwhile.
    pub fn answer_with(&self, status: Option<u16>) {
        *self.answer.lock().unwrap() = status;
        if status.is_some() {
            self.cut();
        }
    }
}

/// Read one request head from `conn` and answer it with `status` and a Jupyter-style JSON
/// error body, then close.
async fn answer_once(conn: &mut tokio::net::TcpStream, status: u16) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = read_head(conn).await;
    let body = format!(r#"{{"reason": "HTTP {status} from the test proxy", "message": ""}}"#);
    let resp = format!(
        "HTTP/1.1 {status} Test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(resp.as_bytes()).await;
    let _ = conn.shutdown().await;
    // Let the client read the answer before the socket goes.
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut sink)).await;
}

/// Bytes up to the end of an HTTP request head (at most 64 KiB).
async fn read_head(conn: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    head
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// A broken or hostile gateway on 127.0.0.1: every request gets `200 OK` and a chunked JSON
/// body of `total` bytes that never closes its object, written as fast as the client reads.
/// [`HugeBody::sent`] counts the bytes the client took.
pub struct HugeBody {
    pub port: u16,
    sent: Arc<std::sync::atomic::AtomicU64>,
    accept: tokio::task::JoinHandle<()>,
}

impl HugeBody {
    pub async fn start(total: u64) -> HugeBody {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent: Arc<std::sync::atomic::AtomicU64> = Default::default();
        let count = sent.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let _ = read_head(&mut conn).await;
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                    if conn.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let chunk = {
                        let mut c = br#"{"kernelspecs": {"x": ""#.to_vec();
                        c.resize(64 * 1024, b'x');
                        c
                    };
                    let mut left = total;
                    while left > 0 {
                        let n = (chunk.len() as u64).min(left) as usize;
                        let mut frame = format!("{n:x}\r\n").into_bytes();
                        frame.extend_from_slice(&chunk[..n]);
                        frame.extend_from_slice(b"\r\n");
                        if conn.write_all(&frame).await.is_err() {
                            return;
                        }
                        count.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                        left -= n as u64;
                    }
                    let _ = conn.write_all(b"0\r\n\r\n").await;
                });
            }
        });
        HugeBody { port, sent, accept }
    }

    /// Body bytes written so far (over every connection).
    pub fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for HugeBody {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
