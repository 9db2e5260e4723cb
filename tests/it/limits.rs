//! Nothing blocks, nothing is unbounded: the server against inputs that used to hang it, grow
//! it or make responses no client accepts. Each case also checks the server never panicked.
//! Deadlines here are the acceptance bounds, generous on this 2-core machine.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

/// The JSON size of a whole tool result, as it goes on the wire.
fn wire_bytes(r: &rmcp::model::CallToolResult) -> usize {
    serde_json::to_vec(r).map(|v| v.len()).unwrap_or(0)
}

fn assert_no_panic(server: &Server) {
    let stderr = server.stderr();
    assert!(
        !stderr.contains("panicked"),
        "the server panicked:\n{stderr}"
    );
}

/// The resident memory of `pid` in KiB (VmRSS).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Page one part of a run to its end; the whole text.
async fn page_all(server: &Server, run_id: &str, stream: &str) -> String {
    let mut offset = 0u64;
    let mut all = String::new();
    loop {
        let page = structured(
            &server
                .call(
                    "get_execution",
                    json!({"run_id": run_id, "stream": stream, "offset": offset, "limit": 1_000_000}),
                )
                .await,
        );
        let text = page["text"].as_str().expect("page text");
        if text.is_empty() {
            return all;
        }
        all.push_str(text);
        offset = page["next_offset"].as_u64().expect("next_offset");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_on_a_device_a_fifo_or_a_huge_file_fails_at_once_and_the_server_answers() {
    let server = Server::start().await;
    server.create_session("f").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let sparse = dir.path().join("sparse.py");
    std::fs::File::create(&sparse)
        .and_then(|f| f.set_len(64 << 30))
        .expect("a 64 GiB sparse file");
    for path in [
        "/dev/zero".to_string(),
        fifo.display().to_string(),
        sparse.display().to_string(),
    ] {
        let started = Instant::now();
        let args = json!({"session_id": "f", "path": path});
        let (file, info) = tokio::join!(
            server.call("execute_file", args),
            server.call("server_info", json!({}))
        );
        let took = started.elapsed();
        assert!(is_error(&file), "{path}: {}", dump(&file));
        let code = structured(&file)["error_code"].clone();
        assert!(
            code == "IO_ERROR" || code == "LIMIT_EXCEEDED",
            "{path}: {}",
            dump(&file)
        );
        assert!(
            text(&file).contains(&path),
            "the error names the file: {}",
            text(&file)
        );
        eprintln!("execute_file({path}) answered in {took:?}");
        // Returns instead of reading: /dev/zero and a 64 GiB file take minutes, a FIFO forever.
        assert!(took < Duration::from_secs(10), "{path} took {took:?}");
        assert!(!is_error(&info), "server_info answered meanwhile");
    }
    let still = server.exec("f", "1 + 1").await;
    assert_eq!(still["result"], "2", "{still}");
    assert_no_panic(&server);
    server.destroy("f").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_results_errors_and_prompts_come_back_bounded_and_page_in_full() {
    let server = Server::start().await;
    server.create_session("big").await;

    let r = server
        .call(
            "execute",
            json!({"session_id": "big", "code": "'y' * 10_000_000"}),
        )
        .await;
    assert!(
        wire_bytes(&r) < 2_000_000,
        "result response: {} bytes",
        wire_bytes(&r)
    );
    let v = structured(&r);
    assert_eq!(
        v["truncated"]["result"]["total_bytes"],
        10_000_002,
        "{}",
        dump(&r)
    );
    let full = page_all(&server, v["run_id"].as_str().expect("run id"), "result").await;
    assert_eq!(full.len(), 10_000_002);

    let r = server
        .call(
            "execute",
            json!({"session_id": "big", "code": "raise ValueError('x' * 5_000_000)"}),
        )
        .await;
    assert!(
        wire_bytes(&r) < 2_000_000,
        "error response: {} bytes",
        wire_bytes(&r)
    );
    let v = structured(&r);
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"]["ename"], "ValueError");
    let tb = page_all(&server, v["run_id"].as_str().expect("run id"), "traceback").await;
    assert!(
        tb.len() > 5_000_000,
        "the whole traceback pages: {} bytes",
        tb.len()
    );

    let r = server
        .call(
            "execute",
            json!({"session_id": "big", "code": "input('p' * 3_000_000)", "wait_s": 20}),
        )
        .await;
    assert!(
        wire_bytes(&r) < 2_000_000,
        "prompt response: {} bytes",
        wire_bytes(&r)
    );
    let v = structured(&r);
    assert_eq!(v["status"], "awaiting_input", "{}", dump(&r));
    let answered = server
        .call("send_input", json!({"run_id": v["run_id"], "value": "ok"}))
        .await;
    assert_eq!(structured(&answered)["status"], "ok", "{}", dump(&answered));
    assert!(wire_bytes(&answered) < 2_000_000);
    assert_no_panic(&server);
    server.destroy("big").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installer_that_fills_stderr_first_finishes() {
    let bin = tempfile::tempdir().expect("temp dir");
    let uv = bin.path().join("uv");
    std::fs::write(
        &uv,
        // Like uv: everything on stderr, 1 MB of it before the last line.
        "#!/bin/sh\nhead -c 1048576 /dev/zero | tr '\\0' e >&2\necho >&2\necho 'Successfully installed fakepkg-1.0' >&2\nexit 0\n",
    )
    .expect("write fake uv");
    std::fs::set_permissions(&uv, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = Server::start_with(&[("PATH", std::ffi::OsStr::new(&path))], &[]).await;
    server.create_session("inst").await;
    let started = Instant::now();
    let r = server
        .call(
            "install_packages",
            json!({"session_id": "inst", "packages": ["fakepkg"]}),
        )
        .await;
    let took = started.elapsed();
    let v = structured(&r);
    assert_eq!(v["ok"], true, "{}", dump(&r));
    assert!(
        v["output"]
            .as_str()
            .unwrap_or("")
            .contains("Successfully installed fakepkg"),
        "{v}"
    );
    assert!(
        v["output"].as_str().unwrap_or("").len() <= 8192,
        "the output is a bounded tail"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_no_panic(&server);
    server.destroy("inst").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroying_a_stopped_kernel_returns_and_leaves_no_process() {
    let server = Server::start().await;
    server.create_session("stopped").await;
    let pid = server.kernel_pid("stopped").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .expect("SIGSTOP the kernel");
    let started = Instant::now();
    let r = server
        .call("destroy_session", json!({"session_id": "stopped"}))
        .await;
    let took = started.elapsed();
    assert!(!is_error(&r), "{}", dump(&r));
    eprintln!("destroy of a SIGSTOPped kernel took {took:?}");
    assert!(took < Duration::from_secs(15), "destroy took {took:?}");
    assert!(
        wait_until(Duration::from_secs(5), || !pid_alive(pid)).await,
        "kernel {pid} is still alive"
    );
    assert_eq!(
        descendants(server.pid()),
        Vec::<u32>::new(),
        "processes left"
    );
    assert_no_panic(&server);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_image_displays_keep_the_server_under_300_mib() {
    let server = Server::start().await;
    server.create_session("img").await;
    let setup = server
        .exec(
            "img",
            "import os\nfrom IPython.display import Image, display\npng = b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(100_000)",
        )
        .await;
    assert_eq!(status(&setup), "ok", "{setup}");
    let mut peak = 0;
    for i in 0..2000 {
        let r = server
            .call(
                "execute",
                json!({"session_id": "img", "code": "display(Image(data=png, format='png'))"}),
            )
            .await;
        let v = structured(&r);
        assert_eq!(status(&v), "ok", "run {i}: {v}");
        if i % 100 == 0 {
            assert_eq!(images(&r).len(), 1, "run {i} returns its image");
            peak = peak.max(rss_kib(server.pid()));
        }
    }
    peak = peak.max(rss_kib(server.pid()));
    assert!(
        peak < 300 * 1024,
        "server RSS peaked at {} MiB",
        peak / 1024
    );
    let history = server
        .call("get_history", json!({"session_id": "img", "start": -3}))
        .await;
    let h: Value = structured(&history);
    assert_eq!(h["entries"].as_array().map(Vec::len), Some(3), "{h}");
    // Memory keeps the newest entries up to 64 MiB; the journal keeps all 2001.
    let kept = h["total"].as_u64().unwrap_or(0);
    assert!((300..2001).contains(&kept), "entries in memory: {kept}");
    eprintln!("peak server RSS over 2000 image runs: {} MiB", peak / 1024);
    assert_no_panic(&server);
    server.destroy("img").await;
    server.shutdown().await;
}
