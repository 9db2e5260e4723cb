//! A per-user service of the test's own: its socket, state dir and log in a temp dir (never the
//! user's), relays started with `serve --shared` against it, and cleanup that stops every
//! service process on that socket (SIGTERM, then SIGKILL) when the guard drops.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{Server, pid_alive, terminate};

/// One test's service location.
pub struct TestService {
    dir: tempfile::TempDir,
}

impl TestService {
    /// A fresh location; nothing runs yet (the first relay starts the service).
    pub fn new() -> TestService {
        TestService {
            dir: tempfile::tempdir().expect("temp dir for the service"),
        }
    }

    /// The service's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run").join("service.sock")
    }

    /// The service's state dir (XDG_STATE_HOME): its log and journals.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The service's log file.
    pub fn log(&self) -> PathBuf {
        self.state().join("kernel-mcp").join("service.log")
    }

    /// The environment that points a relay (and the service it starts) here.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("KERNEL_MCP_SOCKET", self.socket().into()),
            ("XDG_STATE_HOME", self.state().into()),
            ("XDG_RUNTIME_DIR", self.dir.path().join("xdg-run").into()),
        ]
    }

    /// `kernel-mcp service ARGS` here (this socket, state and runtime dirs) with the test venv
    /// and no token from the test's own environment; stdin, stdout and stderr null, killed when
    /// dropped. Not started: a test may add to it (a piped stderr, more environment).
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        super::require_venv();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
        cmd.arg("service")
            .args(args)
            .envs(self.env())
            .env("VIRTUAL_ENV", super::venv())
            .env_remove("KERNEL_MCP_TOKEN")
            .env_remove("KERNEL_MCP_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Start `kernel-mcp service ARGS` here ([`TestService::command`]); what it is waited for
    /// (its socket, its HTTP face) is the test's.
    pub fn start(&self, args: &[&str]) -> tokio::process::Child {
        self.command(args).spawn().expect("spawn the service")
    }

    /// Start a relay (`serve --shared`) with a connected MCP client.
    pub async fn relay(&self) -> Server {
        let env = self.env();
        let env: Vec<(&str, &std::ffi::OsStr)> =
            env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        Server::start_with(&env, &["serve", "--shared"]).await
    }

    /// The pid the running service wrote into its lock file.
    pub fn pid(&self) -> Option<u32> {
        let mut lock = self.socket().into_os_string();
        lock.push(".lock");
        std::fs::read_to_string(PathBuf::from(lock))
            .ok()?
            .trim()
            .parse()
            .ok()
            .filter(|&p| pid_alive(p))
    }

    /// Live `kernel-mcp service` processes serving this socket, from /proc.
    pub fn processes(&self) -> Vec<u32> {
        service_processes(&self.socket())
    }

    /// The service log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    /// `<socket>.http`: the record of the service's HTTP face while it is up.
    pub fn http_record(&self) -> PathBuf {
        let mut p = self.socket().into_os_string();
        p.push(".http");
        PathBuf::from(p)
    }
}

/// The HTTP face of a service (`service --http`), as its record tells.
pub struct HttpFace {
    pub port: u16,
    pub token: String,
    /// The record itself (`url`, `pid`, `token_file`, `token_source`).
    pub record: serde_json::Value,
}

/// Wait (up to 60 s) for `svc`'s HTTP face to be up and read its port and token (from the
/// token file the record names; `None` there is a test failure).
pub async fn http_face(svc: &TestService) -> HttpFace {
    let path = svc.http_record();
    let ok = super::wait_until(Duration::from_secs(60), || path.exists()).await;
    assert!(ok, "no {} after 60 s\n{}", path.display(), svc.log_text());
    // Written atomically: once there, it is whole.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read the record"))
            .expect("the record is JSON");
    let url = record["url"].as_str().expect("url").to_string();
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap_or_else(|_| panic!("a port in {url}"));
    let file = record["token_file"].as_str().expect("a token file");
    let token = std::fs::read_to_string(file)
        .expect("read the token")
        .trim()
        .to_string();
    HttpFace {
        port,
        token,
        record,
    }
}

impl Drop for TestService {
    fn drop(&mut self) {
        for pid in self.processes() {
            terminate(pid, Duration::from_secs(10));
        }
        if std::thread::panicking() {
            eprintln!(
                "--- service log ---\n{}\n--- end of service log ---",
                self.log_text()
            );
        }
    }
}

/// Live processes whose command line is `… service --socket <socket>`.
pub fn service_processes(socket: &Path) -> Vec<u32> {
    let want = socket.as_os_str().as_encoded_bytes();
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_service = args.contains(&b"service".as_slice()) && args.contains(&want);
        if is_service && pid_alive(pid) {
            found.push(pid);
        }
    }
    found
}
