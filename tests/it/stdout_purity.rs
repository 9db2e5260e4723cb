//! The server's stdout is the MCP stream: nothing but JSON-RPC may appear on it, even when
//! kernel code (or a process it starts) writes straight to file descriptor 1 (issue 2,
//! fourth acceptance bullet).

use std::process::Stdio;
use std::time::Duration;

use crate::common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Writes to fd 1 from the kernel process and from a child process, and prints. ipykernel
/// redirects fd 1 into its own capture pipe, so the code also writes to the kernel's
/// *original* stdout (the copy ipykernel keeps), which is what the server must never pass on.
const FD1_CODE: &str = r"import os, sys, subprocess
os.write(1, b'garbage on fd 1\n')
subprocess.run(['echo', 'garbage from a child process'])
orig = getattr(sys.stdout, '_original_stdstream_copy', None)
if orig is not None:
    os.write(orig, b'garbage on the original fd 1\n')
    subprocess.run(['echo', 'garbage from a child on the original fd 1'], stdout=orig)
print('printed', orig is not None)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_writes_to_fd1_do_not_break_the_mcp_connection() {
    let server = Server::start().await;
    server.create_session("fd1").await;

    let v = server.exec("fd1", FD1_CODE).await;
    assert_eq!(status(&v), "ok", "{v}");
    // ipykernel captures fd 1 itself and forwards it on iopub, so the fd writes may show up
    // in the run's stdout; what matters is that they never reach the MCP stream.
    assert!(
        v["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("printed True")),
        "{v}"
    );

    // The rmcp client would have choked on a non-JSON line: the connection still works.
    let next = server.exec("fd1", "1+1").await;
    assert_eq!(next["result"], "2", "{next}");
    let r = server.call("list_sessions", json!({})).await;
    assert!(!is_error(&r), "{}", dump(&r));

    server.destroy("fd1").await;
    server.shutdown().await;
}

/// Send one JSON-RPC message as a line.
async fn send(stdin: &mut tokio::process::ChildStdin, msg: Value) {
    let mut line = serde_json::to_vec(&msg).unwrap();
    line.push(b'\n');
    stdin.write_all(&line).await.expect("write to server stdin");
    stdin.flush().await.expect("flush server stdin");
}

/// Every stdout line must be a JSON-RPC 2.0 message.
fn check_line(line: &str, stderr: &std::sync::Mutex<Vec<u8>>) -> Value {
    let parsed: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "non-JSON line on the server's stdout ({e}): {line:?}\n--- server stderr ---\n{}",
            String::from_utf8_lossy(&stderr.lock().unwrap())
        )
    });
    assert_eq!(parsed["jsonrpc"], "2.0", "not JSON-RPC 2.0: {line}");
    parsed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_stdout_is_only_jsonrpc_even_when_kernel_code_writes_to_fd1() {
    require_venv();
    let workdir = tempfile::tempdir().unwrap();
    let mut child = server_command(workdir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kernel-mcp");
    let server_pid = child.id().expect("server pid");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr_buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let mut stderr = child.stderr.take().unwrap();
        let buf = stderr_buf.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                buf.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
    }

    let mut seen = Vec::new();
    // Read lines until the response with `id` arrives; every line is checked.
    let mut read_until_id = async |id: i64, seen: &mut Vec<Value>| -> Value {
        let wait = async {
            loop {
                let line = stdout
                    .next_line()
                    .await
                    .expect("read server stdout")
                    .unwrap_or_else(|| {
                        panic!(
                            "server stdout closed before response {id}\n--- server stderr ---\n{}",
                            String::from_utf8_lossy(&stderr_buf.lock().unwrap())
                        )
                    });
                let msg = check_line(&line, &stderr_buf);
                seen.push(msg.clone());
                if msg["id"] == id {
                    return msg;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("no response {id} within 60 s"))
    };

    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-stdout-test", "version": "0"},
        }}),
    )
    .await;
    let init = read_until_id(1, &mut seen).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "kernel-mcp", "{init}");

    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "execute",
            "arguments": {"code": FD1_CODE},
        }}),
    )
    .await;
    let response = read_until_id(2, &mut seen).await;
    let result = &response["result"];
    assert_eq!(result["structuredContent"]["status"], "ok", "{response}");
    assert!(
        result["structuredContent"]["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("printed True")),
        "{response}"
    );

    // A second round trip on the same stream, after the garbage would have been written.
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "execute",
            "arguments": {"code": "print('again')"},
        }}),
    )
    .await;
    let again = read_until_id(3, &mut seen).await;
    assert_eq!(
        again["result"]["structuredContent"]["status"], "ok",
        "{again}"
    );

    let kernels = descendants(server_pid);
    assert!(
        !kernels.is_empty(),
        "the default session's kernel should be a child"
    );

    // Close stdin: the server drains, shuts its kernel down and exits; whatever it still
    // writes must be JSON-RPC too.
    drop(stdin);
    let rest = async {
        while let Some(line) = stdout.next_line().await.expect("read server stdout") {
            check_line(&line, &stderr_buf);
        }
        child.wait().await.expect("wait for kernel-mcp")
    };
    let exit = tokio::time::timeout(Duration::from_secs(30), rest)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "kernel-mcp did not exit within 30 s of stdin closing\n--- server stderr ---\n{}",
                String::from_utf8_lossy(&stderr_buf.lock().unwrap())
            )
        });
    assert!(exit.success(), "kernel-mcp exited with {exit}");
    assert!(
        wait_until(Duration::from_secs(15), || kernels
            .iter()
            .all(|&p| !pid_alive(p)))
        .await,
        "kernel processes still alive after the server exited: {kernels:?}"
    );
}
