//! `kernel-mcp exec`, `sessions`, `session` and `history` as a person or a script runs them:
//! real binaries, a real ipykernel, each test on a service of its own (socket, state and
//! runtime dirs in a temp dir; stopped when the test ends, see `common/service.rs`). Pins the
//! exit statuses and streams of docs/cli.md.

use std::time::Duration;

use crate::common::cli::{Output, run, run_with};
use crate::common::service::TestService;
use crate::common::{pid_alive, wait_until};
use serde_json::{Value, json};

fn json_of(o: &Output) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {o:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_exits_0_1_3_4_and_2_as_the_run_ends() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = run(&svc, d, &["exec", "-s", "s", "--create", "-c", "print(1)"]).await;
    assert_eq!(ok.code, Some(0), "{ok:?}");
    assert_eq!(ok.stdout, "1\n", "{ok:?}");

    let err = run(&svc, d, &["exec", "-s", "s", "-c", "1/0"]).await;
    assert_eq!(err.code, Some(1), "{err:?}");
    assert_eq!(err.stdout, "", "nothing on stdout for an error: {err:?}");
    assert!(err.stderr.contains("ZeroDivisionError"), "{err:?}");
    assert!(err.stderr.contains("Traceback"), "{err:?}");

    let slow = run(
        &svc,
        d,
        &[
            "exec",
            "-s",
            "s",
            "--timeout",
            "1",
            "-c",
            "import time; time.sleep(30)",
        ],
    )
    .await;
    assert_eq!(slow.code, Some(3), "{slow:?}");

    let unknown = run(&svc, d, &["exec", "-s", "nope", "-c", "1"]).await;
    assert_eq!(unknown.code, Some(4), "{unknown:?}");
    assert!(unknown.stderr.contains("SESSION_NOT_FOUND"), "{unknown:?}");

    let usage = run(&svc, d, &["exec", "-s", "s"]).await;
    assert_eq!(usage.code, Some(2), "no code given: {usage:?}");
    let usage = run(&svc, d, &["exec", "-s", "s", "-c", "1", "--stdin"]).await;
    assert_eq!(usage.code, Some(2), "two sources: {usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_of_a_file_that_cannot_be_read_is_a_usage_error_naming_path_and_reason() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = run(
        &svc,
        d,
        &["exec", "-s", "s", "--create", "-f", "missing.py"],
    )
    .await;
    assert_eq!(
        missing.code,
        Some(2),
        "a missing file is a usage error: {missing:?}"
    );
    assert!(
        missing.stderr.contains("missing.py"),
        "names the path: {missing:?}"
    );
    assert!(
        missing.stderr.to_lowercase().contains("no such file"),
        "says why: {missing:?}"
    );
    assert_eq!(missing.stdout, "", "{missing:?}");
    let a_dir = run(&svc, d, &["exec", "-s", "s", "--create", "-f", "."]).await;
    assert_eq!(
        a_dir.code,
        Some(2),
        "a directory is a usage error: {a_dir:?}"
    );
    // Code that raised still exits 1, so a script can tell the two apart.
    std::fs::write(d.join("raises.py"), "1/0\n").unwrap();
    let raised = run(&svc, d, &["exec", "-s", "s", "--create", "-f", "raises.py"]).await;
    assert_eq!(raised.code, Some(1), "{raised:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_json_prints_the_execution_result_with_its_status() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = run(
        &svc,
        d,
        &["exec", "-s", "j", "--create", "--json", "-c", "6 * 7"],
    )
    .await;
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let v = json_of(&ok);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["result"], "42");
    assert_eq!(v["session_id"], "j");
    let err = run(
        &svc,
        d,
        &["exec", "-s", "j", "--json", "-c", "undefined_name"],
    )
    .await;
    assert_eq!(err.code, Some(1), "{err:?}");
    let v = json_of(&err);
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"]["ename"], "NameError");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_a_file_and_code_from_stdin_in_the_same_session() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("script.py"), "warm = 'up'\nprint('script ran')\n").unwrap();
    let f = run(&svc, d, &["exec", "-s", "w", "--create", "-f", "script.py"]).await;
    assert_eq!(f.code, Some(0), "{f:?}");
    assert_eq!(f.stdout, "script ran\n");
    let s = run_with(
        &svc,
        d,
        &["exec", "-s", "w", "--stdin"],
        Some("print(warm * 2)\n"),
        crate::common::cli::COMMAND_DEADLINE,
    )
    .await;
    assert_eq!(s.code, Some(0), "{s:?}");
    assert_eq!(s.stdout, "upup\n");
    let q = run(
        &svc,
        d,
        &["exec", "-s", "w", "--quiet", "-c", "print(warm); warm"],
    )
    .await;
    assert_eq!(q.code, Some(0), "{q:?}");
    assert_eq!(q.stdout, "", "--quiet prints nothing on stdout: {q:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_the_run_and_exec_exits_3() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let made = run(&svc, d, &["exec", "-s", "c", "--create", "-c", "x = 1"]).await;
    assert_eq!(made.code, Some(0), "{made:?}");
    let mut cmd: tokio::process::Command = crate::common::cli::command(&svc, d).into();
    cmd.args([
        "exec",
        "-s",
        "c",
        "-c",
        "import time; print('start', flush=True); time.sleep(30)",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn exec");
    let mut stdout = child.stdout.take().unwrap();
    // Wait until the cell runs (its first line is out), then press Ctrl-C.
    let mut seen = Vec::new();
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 256];
        while !String::from_utf8_lossy(&seen).contains("start") {
            let n = stdout.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(started.is_ok(), "the cell never started: {seen:?}");
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("exec exits after Ctrl-C")
        .unwrap();
    assert_eq!(status.code(), Some(3));
    // The kernel was interrupted, not restarted: its state is still there.
    let after = run(&svc, d, &["exec", "-s", "c", "--json", "-c", "x"]).await;
    let v = json_of(&after);
    assert_eq!(v["result"], "1", "{after:?}");
    assert_eq!(v["state_reset"], false);
}

/// The only long test here: a 55 s cell, past the service's 50 s `wait_s` (docs/limits.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_follows_a_run_longer_than_wait_s_to_its_end() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let code = "import time\nfor i in range(11):\n    print('tick', i, flush=True)\n    time.sleep(5)\nprint('done')";
    let o = run_with(
        &svc,
        dir.path(),
        &["exec", "-s", "long", "--create", "-c", code],
        None,
        Duration::from_secs(240),
    )
    .await;
    assert_eq!(o.code, Some(0), "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 12, "{o:?}");
    assert_eq!(lines[10], "tick 10");
    assert_eq!(lines[11], "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_lists_a_session_an_mcp_client_made_and_session_destroy_ends_it() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = svc.relay().await;
    agent.create_session("agent-work").await;
    let kernel = agent.kernel_pid("agent-work").await;
    let listed = run(&svc, d, &["sessions", "--json"]).await;
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let v = json_of(&listed);
    let ids: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert_eq!(ids, vec!["agent-work"]);
    let table = run(&svc, d, &["sessions"]).await;
    assert!(table.stdout.starts_with("SESSION"), "{table:?}");
    assert!(table.stdout.contains("agent-work"), "{table:?}");
    let got = run(&svc, d, &["session", "get", "-s", "agent-work", "--json"]).await;
    assert_eq!(json_of(&got)["pid"], json!(kernel));

    let gone = run(&svc, d, &["session", "destroy", "-s", "agent-work"]).await;
    assert_eq!(gone.code, Some(0), "{gone:?}");
    assert!(
        wait_until(Duration::from_secs(30), || !pid_alive(kernel)).await,
        "the kernel outlived destroy"
    );
    let v = json_of(&run(&svc, d, &["sessions", "--json"]).await);
    assert_eq!(v["sessions"], json!([]));
    let again = run(&svc, d, &["session", "get", "-s", "agent-work"]).await;
    assert_eq!(again.code, Some(4), "{again:?}");
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_prints_the_cells_and_exports_a_notebook_nbformat_accepts() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for code in ["a = 2", "print(a * 21)", "a / 0"] {
        let o = run(&svc, d, &["exec", "-s", "h", "--create", "-c", code]).await;
        assert!(o.code == Some(0) || o.code == Some(1), "{o:?}");
    }
    let text = run(&svc, d, &["history", "-s", "h"]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(text.stdout.contains("[2] print(a * 21)"), "{text:?}");
    let export = run(
        &svc,
        d,
        &[
            "history",
            "-s",
            "h",
            "--export",
            "out.ipynb",
            "--format",
            "notebook",
        ],
    )
    .await;
    assert_eq!(export.code, Some(0), "{export:?}");
    let nb = d.join("out.ipynb");
    assert!(nb.exists(), "{export:?}");
    let check = std::process::Command::new(crate::common::venv().join("bin/python"))
        .args([
            "-c",
            "import sys, nbformat; nb = nbformat.read(sys.argv[1], as_version=4); \
             nbformat.validate(nb); print(len(nb.cells))",
        ])
        .arg(&nb)
        .output()
        .expect("run python");
    assert!(
        check.status.success(),
        "nbformat.validate: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_stops_answering_input_at_the_end_of_its_stdin_and_exits_3() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Asks until it gets a non-empty answer: answering "" at EOF would loop forever.
    let code = "print('got', input('first? '))\nx = ''\nwhile not x:\n    x = input('again? ')";
    let o = run_with(
        &svc,
        d,
        &["exec", "-s", "eof", "--create", "-c", code],
        Some("one\n"),
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(o.code, Some(3), "{o:?}");
    assert!(o.stdout.contains("got one"), "{o:?}");
    assert!(
        o.stderr.contains("stdin") && o.stderr.contains("end"),
        "says why it stopped: {o:?}"
    );
    let after = run(&svc, d, &["exec", "-s", "eof", "-c", "print('still here')"]).await;
    assert_eq!(after.code, Some(0), "{after:?}");
    assert_eq!(after.stdout, "still here\n");
}
