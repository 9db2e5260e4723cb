//! `fork_session` against real ipykernel (docs/semantics.md, "Forking a session"): a fork holds
//! a copy of the source's namespace and diverges from it, the source keeps its pid and
//! generation, the fork sits in a process group of its own and goes (with everything it
//! started) when its session is destroyed; kernels that cannot be forked say why.

use std::time::Duration;

use crate::common::kernels::*;
use crate::common::*;
use serde_json::{Value, json};

async fn info(server: &Server, session: &str) -> Value {
    structured(
        &server
            .call("get_session", json!({"session_id": session}))
            .await,
    )
}

async fn fork(server: &Server, source: &str, new: &str) -> Value {
    let r = server
        .call(
            "fork_session",
            json!({"session_id": source, "new_session_id": new}),
        )
        .await;
    assert!(
        !is_error(&r),
        "fork_session({source} -> {new}): {}\n--- server stderr ---\n{}",
        dump(&r),
        server.stderr_tail()
    );
    structured(&r)
}

/// Field `n` (4: parent, 5: process group) of `/proc/<pid>/stat`.
fn stat_field(pid: u32, n: usize) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

fn pgid(pid: u32) -> Option<u32> {
    stat_field(pid, 5)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_sees_the_sources_million_element_list_and_its_changes_stay_in_the_fork() {
    require_venv();
    let server = Server::start().await;
    server.create_session("src").await;
    let setup = server
        .exec("src", "big = list(range(1_000_000))\ntag = 'source'")
        .await;
    assert_eq!(status(&setup), "ok", "{setup}");
    let before = info(&server, "src").await;
    let src_pid = before["pid"].as_u64().expect("pid") as u32;

    let forked = fork(&server, "src", "copy").await;
    assert_eq!(forked["session_id"], "copy");
    assert_eq!(forked["forked_from"], "src", "{forked}");
    assert_eq!(forked["generation"], 1, "{forked}");
    assert_eq!(forked["status"], "idle", "{forked}");
    assert_eq!(forked["history_count"], before["history_count"], "{forked}");
    let fork_pid = forked["pid"].as_u64().expect("fork pid") as u32;
    assert_ne!(fork_pid, src_pid);
    assert_ne!(
        pgid(fork_pid),
        pgid(src_pid),
        "the fork is out of the source's process group (its interrupts)"
    );
    let supervisor = stat_field(fork_pid, 4).expect("the fork's parent");
    let supervisor_cmd = cmdline(supervisor);
    assert!(
        supervisor_cmd.contains("supervise") && supervisor_cmd.contains("--adopt-child"),
        "the fork runs under a supervisor of its own: {supervisor_cmd}"
    );
    assert_eq!(
        pgid(fork_pid),
        Some(fork_pid),
        "the fork leads a group of its own, as a spawned kernel does (its supervisor forwards signals to it)"
    );

    // Contained as a spawned kernel is: it can signal neither its supervisor nor its source.
    let probe = format!(
        "import os, signal\nout = []\nfor pid in (os.getppid(), {src_pid}):\n    try:\n        os.kill(pid, signal.SIGKILL)\n        out.append('killed')\n    except PermissionError:\n        out.append('refused')\nprint(*out)"
    );
    let v = server.exec("copy", &probe).await;
    assert_eq!(
        v["stdout"].as_str().unwrap_or("").trim(),
        "refused refused",
        "{v}"
    );
    // Its memory is counted in a cgroup of its own, beside the source's, not inside it.
    use crate::common::skip::{host_has_memory_cgroup, memory_cgroup_of};
    let (src_group, fork_group) = (memory_cgroup_of(src_pid), memory_cgroup_of(fork_pid));
    let host = structured(&server.call("server_info", json!({})).await);
    if !host_has_memory_cgroup(&host) {
        skip(
            "no memory cgroup kernel-mcp may create on this host: the fork's own cgroup is not checked",
        );
    } else {
        assert!(src_group.contains("kernel-mcp-"), "{src_group}");
        assert!(fork_group.contains("kernel-mcp-"), "{fork_group}");
        assert_ne!(fork_group, src_group);
        assert!(
            !fork_group.starts_with(&format!("{src_group}/")),
            "{fork_group} is inside {src_group}"
        );
    }
    // The broker's endpoint is the fork session's own.
    let endpoint = "__import__('os').environ.get('KERNEL_MCP_ENDPOINT')";
    let (src_end, fork_end) = (
        server.exec("src", endpoint).await,
        server.exec("copy", endpoint).await,
    );
    let fork_file = forked["connection_file"].as_str().expect("connection_file");
    assert_eq!(
        fork_end["result"]
            .as_str()
            .map(|s| s.trim_matches('\'').to_string()),
        Some(
            std::path::Path::new(fork_file)
                .with_extension("mcp")
                .display()
                .to_string()
        ),
        "{fork_end} (the source's: {src_end})"
    );

    let seen = server
        .exec(
            "copy",
            "big[0] = -1\nbig.append(1)\ntag = 'fork'\n(len(big), big[0], big[-2], tag)",
        )
        .await;
    assert_eq!(status(&seen), "ok", "{seen}");
    assert_eq!(seen["result"], "(1000001, -1, 999999, 'fork')", "{seen}");
    assert_eq!(seen["state_reset"], false, "{seen}");
    let kept = server.exec("src", "(len(big), big[0], big[-1], tag)").await;
    assert_eq!(kept["result"], "(1000000, 0, 999999, 'source')", "{kept}");

    let after = info(&server, "src").await;
    assert_eq!(after["pid"], before["pid"], "the source keeps its kernel");
    assert_eq!(after["generation"], before["generation"]);
    assert_eq!(after["forked_from"], Value::Null);
    assert_eq!(after["status"], "idle", "{after}");

    let r = server
        .call(
            "get_history",
            json!({"session_id": "copy", "start": 0, "end": 10}),
        )
        .await;
    let entries = structured(&r)["entries"].clone();
    assert!(
        entries.to_string().contains("list(range(1_000_000))"),
        "the fork's history starts with the source's: {entries}"
    );

    // Something the fork starts in a session of its own goes with it too.
    let child = server
        .exec(
            "copy",
            "import subprocess\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\np.pid",
        )
        .await;
    let sleeper: u32 = child["result"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no pid: {child}"));
    assert!(pid_alive(sleeper));
    server.destroy("copy").await;
    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(fork_pid)
            && !pid_alive(sleeper)
            && !pid_alive(supervisor))
        .await,
        "the fork ({fork_pid}), its child ({sleeper}) or its supervisor ({supervisor}) outlived destroy_session"
    );
    let still = server.exec("src", "tag").await;
    assert_eq!(still["result"], "'source'", "{still}");
    assert_eq!(info(&server, "src").await["pid"], before["pid"]);
    server.destroy("src").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_restarts_into_a_fresh_kernel_and_a_busy_source_is_session_busy() {
    require_venv();
    let server = Server::start().await;
    server.create_session("src").await;
    server.exec("src", "x = 41").await;
    fork(&server, "src", "copy").await;
    let r = server
        .call("restart_session", json!({"session_id": "copy"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let restarted = structured(&r);
    assert_eq!(restarted["generation"], 2, "{restarted}");
    assert_eq!(restarted["forked_from"], "src", "{restarted}");
    let gone = server.exec("copy", "x").await;
    assert_eq!(
        ename(&gone),
        "NameError",
        "a restart loses the copy: {gone}"
    );

    let (sleeping, _) = exec_args(
        &server,
        "src",
        "import time\ntime.sleep(20)",
        json!({"wait_s": 1}),
    )
    .await;
    assert_eq!(status(&sleeping), "running", "{sleeping}");
    let r = server
        .call(
            "fork_session",
            json!({"session_id": "src", "new_session_id": "copy2"}),
        )
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    assert_eq!(structured(&r)["error_code"], "SESSION_BUSY", "{}", dump(&r));
    let r = server
        .call(
            "fork_session",
            json!({"session_id": "src", "new_session_id": "copy"}),
        )
        .await;
    assert_eq!(
        structured(&r)["error_code"],
        "SESSION_ALREADY_EXISTS",
        "{}",
        dump(&r)
    );
    server
        .call("interrupt_session", json!({"session_id": "src"}))
        .await;
    server.destroy("copy").await;
    server.destroy("src").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_sandboxed_session_is_unsupported_saying_why() {
    require_venv();
    let server = Server::start().await;
    // A project of its own: the server's directory holds its state, which no sandbox grants.
    let project = tempfile::tempdir().unwrap();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "boxed", "sandbox": "workspace", "cwd": project.path()}),
        )
        .await;
    if is_error(&r) {
        assert_eq!(
            structured(&r)["error_code"],
            "SANDBOX_UNAVAILABLE",
            "{}",
            dump(&r)
        );
        crate::common::skip(&format!("this host cannot sandbox: {}", dump(&r)));
        server.shutdown().await;
        return;
    }
    let r = server
        .call(
            "fork_session",
            json!({"session_id": "boxed", "new_session_id": "boxed2"}),
        )
        .await;
    let e = structured(&r);
    assert_eq!(e["error_code"], "UNSUPPORTED", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'workspace' sandbox"),
        "{e}"
    );
    assert_eq!(info(&server, "boxed").await["status"], "idle");
    server.destroy("boxed").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_bash_session_is_unsupported_saying_why() {
    let server = Server::start().await;
    require_kernel(&server, "bash").await;
    create_kernel_session(&server, "sh", "bash").await;
    let r = server
        .call(
            "fork_session",
            json!({"session_id": "sh", "new_session_id": "sh2"}),
        )
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let e = structured(&r);
    assert_eq!(e["error_code"], "UNSUPPORTED", "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("only IPython kernels") && message.contains("rerun_history"),
        "{message}"
    );
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(
        sessions["sessions"].as_array().map(Vec::len),
        Some(1),
        "no half-made session: {sessions}"
    );
    server.destroy("sh").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_outlives_its_source_and_its_own_memory_limit_leaves_the_source_alone() {
    require_venv();
    let server = Server::start().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "src", "max_memory_mib": 300}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    server.exec("src", "x = 'kept'").await;
    let src_pid = info(&server, "src").await["pid"].clone();
    fork(&server, "src", "copy").await;
    fork(&server, "src", "copy2").await;

    // Over its limit (the source's, 300 MiB), the fork is stopped with the notice; the
    // source's supervisor no longer counts the fork, so the source lives on.
    let grow = "import time\nheap = []\nfor _ in range(20):\n    heap.append(b'x' * (50 * 1024 * 1024))\n    time.sleep(0.2)\nprint('survived')";
    let r = server
        .call(
            "execute",
            json!({"session_id": "copy", "code": grow, "wait_s": 60}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "kernel_died", "{}", dump(&r));
    assert!(
        v["notices"].to_string().contains("memory limit"),
        "{}",
        v["notices"]
    );
    let src = info(&server, "src").await;
    assert_eq!(src["pid"], src_pid, "the source was not stopped: {src}");
    assert_eq!(src["generation"], 1, "{src}");

    // The source goes; the other fork stays, with its copy.
    let fork_pid = info(&server, "copy2").await["pid"].as_u64().expect("pid") as u32;
    server.destroy("src").await;
    let still = server.exec("copy2", "x").await;
    assert_eq!(still["result"], "'kept'", "{still}");
    assert_eq!(
        info(&server, "copy2").await["pid"].as_u64(),
        Some(fork_pid as u64)
    );
    server.destroy("copy2").await;
    server.destroy("copy").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_ends_when_the_server_is_sigkilled_and_leaves_no_files() {
    require_venv();
    let run = tempfile::tempdir().expect("runtime dir");
    let server = Server::start_with(&[("JUPYTER_RUNTIME_DIR", run.path().as_os_str())], &[]).await;
    server.create_session("src").await;
    let forked = fork(&server, "src", "copy").await;
    let fork_pid = forked["pid"].as_u64().expect("pid") as u32;
    let supervisor = stat_field(fork_pid, 4).expect("supervisor");
    let src_pid = server.kernel_pid("src").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the server");
    assert!(
        wait_until(Duration::from_secs(10), || [fork_pid, supervisor, src_pid]
            .iter()
            .all(|p| !pid_alive(*p)))
        .await,
        "left alive: fork {} supervisor {} source {}",
        pid_alive(fork_pid),
        pid_alive(supervisor),
        pid_alive(src_pid)
    );
    // The source's supervisor and the fork's remove their connection and endpoint files.
    let clean = wait_until(Duration::from_secs(10), || {
        kernel_files(run.path()).is_empty()
    })
    .await;
    assert!(clean, "left behind: {:?}", kernel_files(run.path()));
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_fork_keeps_working_after_its_parent_fork_is_gone() {
    require_venv();
    let server = Server::start().await;
    server.create_session("src").await;
    server.exec("src", "depth = 0").await;
    fork(&server, "src", "one").await;
    let bump = server
        .exec("one", "depth += 1\nprint('one', flush=True)\ndepth")
        .await;
    assert_eq!(bump["result"], "1", "{bump}");
    let two = fork(&server, "one", "two").await;
    assert_eq!(two["forked_from"], "one", "{two}");
    // The first fork, now a source itself, still captures its output, C-level included.
    let again = server
        .exec(
            "one",
            "import os, gc\ngc.collect()\nprint('still', flush=True)\nos.system('echo c-level')\ndepth",
        )
        .await;
    assert_eq!(again["stdout"], "still\nc-level\n", "{again}");
    server.destroy("one").await;
    let deep = server
        .exec("two", "depth += 1\nprint('two', flush=True)\ndepth")
        .await;
    assert_eq!(deep["result"], "2", "{deep}");
    assert_eq!(deep["stdout"], "two\n", "{deep}");
    assert_eq!(server.exec("src", "depth").await["result"], "0");
    server.destroy("two").await;
    server.destroy("src").await;
    server.shutdown().await;
}
