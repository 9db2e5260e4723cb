//! `kernel-mcp service --http ADDR:PORT` is always behind a token, through the
//! real service: without one it generates a token 0600 next to the socket, requests without it
//! are 401 and with it 200, `kernel-mcp token` and `kernel-mcp doctor` say where it is;
//! `--token-file` works quietly and `--token` works but warns that `ps` shows it.

use std::os::unix::fs::MetadataExt;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::common::http::{HttpClient, post_as};
use crate::common::service::{TestService, http_face};
use crate::common::{pid_alive, wait_until};

/// A running `kernel-mcp service --http 127.0.0.1:0` on `svc`'s socket, with its stderr
/// collected.
struct HttpService {
    child: tokio::process::Child,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpService {
    async fn start(svc: &TestService, extra: &[&str], env: &[(&str, &str)]) -> HttpService {
        let mut cmd =
            svc.command(&[&["--http", "127.0.0.1:0", "--pool", "python3=0"], extra].concat());
        cmd.envs(env.iter().copied()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the service");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        HttpService { child, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, and the service exits 0 having removed its record.
    async fn stop(mut self, svc: &TestService) {
        let pid = self.child.id().expect("pid");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the service exits on SIGTERM")
            .expect("wait");
        assert!(status.success(), "{status}\n{}", self.stderr());
        assert!(wait_until(Duration::from_secs(5), || !pid_alive(pid)).await);
        assert!(!svc.http_record().exists(), "the record goes with the face");
    }
}

/// The HTTP status of an `initialize` POST with `token` (if any) as the bearer token.
async fn initialize_status(port: u16, token: Option<&str>) -> u16 {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (head, _) = post_as(port, token, None, &init).await;
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"))
}

/// `kernel-mcp ARGS` pointed at `svc`, to its end: (exit code, stdout, stderr).
async fn run(svc: &TestService, args: &[&str]) -> (Option<i32>, String, String) {
    let cwd = tempfile::tempdir().unwrap();
    let out = crate::common::cli::run(svc, cwd.path(), args).await;
    (out.code, out.stdout, out.stderr)
}

#[tokio::test]
async fn without_a_token_the_service_generates_one_0600_beside_the_socket_and_requires_it() {
    let svc = TestService::new();
    let service = HttpService::start(&svc, &[], &[]).await;
    let face = http_face(&svc).await;
    assert_eq!(face.record["token_source"], "generated", "{}", face.record);
    let mut expected = svc.socket().into_os_string();
    expected.push(".token");
    let file = std::path::PathBuf::from(expected);
    assert_eq!(face.record["token_file"], json!(file), "{}", face.record);
    let meta = std::fs::metadata(&file).expect("the token file");
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(face.token.len(), 64, "a long random token");

    assert_eq!(initialize_status(face.port, None).await, 401);
    assert_eq!(initialize_status(face.port, Some("wrong")).await, 401);
    assert_eq!(initialize_status(face.port, Some(&face.token)).await, 200);
    let web = HttpClient::connect_as(face.port, Some(&face.token)).await;
    let info = web.call("server_info", json!({})).await;
    assert!(info["version"].is_string(), "{info}");

    let (code, stdout, stderr) = run(&svc, &["token"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), face.token);
    assert!(
        stderr.contains(&file.display().to_string()) && stderr.contains("/mcp"),
        "says where: {stderr}"
    );
    let (_, json_out, _) = run(&svc, &["token", "--json"]).await;
    let v: Value = serde_json::from_str(json_out.trim()).expect("token --json");
    assert_eq!(v["token"], face.token.as_str());
    assert_eq!(v["source"], "generated");

    let (_, doctor, _) = run(&svc, &["doctor", "--json"]).await;
    let d: Value = serde_json::from_str(&doctor).expect("doctor --json");
    assert_eq!(
        d["service"]["http"]["token_file"],
        json!(file),
        "{}",
        d["service"]
    );
    assert_eq!(d["service"]["running"], true, "{}", d["service"]);
    assert!(
        !service.stderr().contains(&face.token),
        "the token is never logged"
    );
    assert!(
        !svc.log_text().contains(&face.token),
        "the token is never logged"
    );
    service.stop(&svc).await;

    // The next start reuses it: clients keep working.
    let again = HttpService::start(&svc, &[], &[]).await;
    let face2 = http_face(&svc).await;
    assert_eq!(face2.token, face.token);
    again.stop(&svc).await;
}

#[tokio::test]
async fn a_token_file_works_quietly_and_a_token_on_the_command_line_works_but_warns() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tok");
    std::fs::write(&file, "file-token-1234\n").unwrap();
    let service = HttpService::start(&svc, &["--token-file", file.to_str().unwrap()], &[]).await;
    let face = http_face(&svc).await;
    assert_eq!(face.record["token_source"], "file");
    assert_eq!(face.token, "file-token-1234");
    assert_eq!(initialize_status(face.port, None).await, 401);
    assert_eq!(
        initialize_status(face.port, Some("file-token-1234")).await,
        200
    );
    let (code, stdout, _) = run(&svc, &["token"]).await;
    assert_eq!((code, stdout.trim()), (Some(0), "file-token-1234"));
    service.stop(&svc).await;
    let quiet = svc.log_text();
    assert!(
        !quiet.contains("process list"),
        "--token-file does not warn: {quiet}"
    );

    let service = HttpService::start(&svc, &["--token", "cli-token-5678"], &[]).await;
    let port = wait_for_port(&svc).await;
    assert_eq!(initialize_status(port, Some("cli-token-5678")).await, 200);
    assert_eq!(initialize_status(port, None).await, 401);
    assert!(
        wait_until(Duration::from_secs(10), || service
            .stderr()
            .contains("process list"))
        .await,
        "--token warns on stderr: {}",
        service.stderr()
    );
    let (code, _, stderr) = run(&svc, &["token"]).await;
    assert_eq!(code, Some(1), "not stored anywhere: {stderr}");
    assert!(stderr.contains("--token"), "{stderr}");
    service.stop(&svc).await;

    let service = HttpService::start(&svc, &[], &[("KERNEL_MCP_TOKEN", "env-token-9")]).await;
    let port = wait_for_port(&svc).await;
    assert_eq!(initialize_status(port, Some("env-token-9")).await, 200);
    assert_eq!(initialize_status(port, None).await, 401);
    assert!(
        !service.stderr().contains("process list"),
        "{}",
        service.stderr()
    );
    service.stop(&svc).await;
}

/// The port of the face that is up (whatever its token's source).
async fn wait_for_port(svc: &TestService) -> u16 {
    let path = svc.http_record();
    assert!(wait_until(Duration::from_secs(60), || path.exists()).await);
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let url = record["url"].as_str().unwrap();
    url.trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap()
}
