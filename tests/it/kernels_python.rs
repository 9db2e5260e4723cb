//! Real-kernel acceptance for ipykernel (issue 5): the conformance walk on `python3`, and a
//! copy of the python3 spec with `interrupt_mode: "message"` interrupted over control.

use std::time::{Duration, Instant};

use crate::common::kernels::*;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python3_conformance() {
    conformance(&Lang {
        kernel: "python3",
        set_state: "x = 31337",
        read_state: "x",
        print: "print('hello-stdout')",
        raise: "1/0",
        error_marker: "ZeroDivisionError",
        long_loop: "while True:\n    pass",
        may_die_on_interrupt: false,
    })
    .await;
}

/// The spec says `interrupt_mode: "message"`: interrupt_session must send
/// `interrupt_request` on control. The kernel is ipykernel launched through a wrapper that
/// writes a line to a marker file when its control handler receives `interrupt_request`,
/// so the test sees the message really arrived (a SIGINT alone would interrupt ipykernel
/// too, without the mark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_mode_python_is_interrupted_over_control() {
    require_venv();
    let specs = tempfile::tempdir().expect("temp dir");
    let name = "python3-message";
    write_message_mode_python_spec(specs.path(), name);
    let mark = specs.path().join("interrupt_requests.log");
    let kernel_json = specs.path().join(name).join("kernel.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&kernel_json).unwrap()).unwrap();
    let wrapper = "import os, ipykernel.kernelbase as kb\n\
                   orig = kb.Kernel.interrupt_request\n\
                   def interrupt_request(self, *a, **k):\n    \
                       with open(os.environ['KMCP_INTERRUPT_MARK'], 'a') as f: f.write('interrupt_request\\n')\n    \
                       return orig(self, *a, **k)\n\
                   kb.Kernel.interrupt_request = interrupt_request\n\
                   from ipykernel import kernelapp\n\
                   kernelapp.launch_new_instance()\n";
    spec["argv"] = json!([spec["argv"][0], "-c", wrapper, "-f", "{connection_file}"]);
    spec["env"] = json!({"KMCP_INTERRUPT_MARK": mark});
    std::fs::write(&kernel_json, serde_json::to_string_pretty(&spec).unwrap()).unwrap();

    let dir = specs.path().to_str().unwrap();
    let server = Server::start_with_args(&["--kernelspec-dir", dir]).await;
    let listed = require_kernel(&server, name).await;
    assert_eq!(
        listed["interrupt_mode"], "message",
        "list_kernels entry: {listed}"
    );

    create_kernel_session(&server, "msg", name).await;
    let (set, _) = exec_args(&server, "msg", "x = 5", json!({})).await;
    assert_eq!(status(&set), "ok", "{set}");
    let (running, _) = exec_args(
        &server,
        "msg",
        "import time\nwhile True:\n    time.sleep(0.05)",
        json!({"wait_s": 1}),
    )
    .await;
    assert_eq!(status(&running), "running", "{running}");
    let run_id = running["run_id"].as_str().expect("run_id").to_string();

    let t0 = Instant::now();
    let r = server
        .call("interrupt_session", json!({"session_id": "msg"}))
        .await;
    assert!(!is_error(&r), "interrupt_session: {}", dump(&r));
    let r = server
        .call("get_execution", json!({"run_id": run_id, "wait_s": 10}))
        .await;
    let ended = t0.elapsed();
    let done = structured(&r);
    assert_eq!(status(&done), "interrupted", "{done}");
    assert!(ended < Duration::from_secs(10), "took {ended:?}: {done}");
    let marks = std::fs::read_to_string(&mark).unwrap_or_default();
    assert!(
        marks.contains("interrupt_request"),
        "the kernel never received interrupt_request on control (marker file {} is {:?}); \
         the run ended {}",
        mark.display(),
        marks,
        status(&done)
    );

    let (x, _) = exec_args(&server, "msg", "x", json!({})).await;
    assert_eq!(
        x["result"], "5",
        "state survives a message-mode interrupt: {x}"
    );
    assert_eq!(x["state_reset"], false, "{x}");

    let procs = descendants(server.pid());
    server.destroy("msg").await;
    assert!(
        wait_until(Duration::from_secs(10), || procs
            .iter()
            .all(|&p| !pid_alive(p)))
        .await,
        "kernel processes left after destroy"
    );
    server.shutdown().await;
}

/// kernel-mcp starts ipykernel with IPython's history database in memory: the code an agent
/// runs is not written to `$IPYTHONDIR/profile_default/history.sqlite`, while `_i<n>` and
/// `%history` still answer inside the kernel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_code_stays_out_of_ipythons_history_file_and_history_magics_still_answer() {
    require_venv();
    let ipython_dir = tempfile::tempdir().expect("temp IPYTHONDIR");
    let server = Server::start_with(&[("IPYTHONDIR", ipython_dir.path().as_os_str())], &[]).await;
    server.create_session_on("h", "python3").await;
    let v = server.exec("h", "token = 'tok-in-agent-code-4711'").await;
    assert_eq!(status(&v), "ok", "{v}");
    let v = server
        .exec("h", "print(get_ipython().history_manager.hist_file)")
        .await;
    assert_eq!(
        v["stdout"].as_str().unwrap_or_default().trim(),
        ":memory:",
        "{v}"
    );
    let v = server.exec("h", "print(_i1)").await;
    assert!(
        v["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("tok-in-agent-code-4711"),
        "_i1 answers: {v}"
    );
    let v = server.exec("h", "%history -n 1-2").await;
    let shown = v["stdout"].as_str().unwrap_or_default();
    assert!(
        shown.contains("tok-in-agent-code-4711"),
        "%history answers: {v}"
    );
    server.destroy("h").await;
    server.shutdown().await;

    let mut on_disk = Vec::new();
    for entry in walk(ipython_dir.path()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        if bytes.windows(11).any(|w| w == b"tok-in-agen") || entry.ends_with("history.sqlite") {
            on_disk.push(entry);
        }
    }
    assert!(
        on_disk.is_empty(),
        "agent code or a history file on disk: {on_disk:?}"
    );
}

/// Every file under `dir`, recursively.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files
}

/// `exit()` asks the frontend to end the kernel (a reply payload); the session keeps its
/// kernel and says so, and the next run still sees the state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_in_python_says_the_kernel_stays_and_the_state_is_kept() {
    require_venv();
    let server = Server::start().await;
    server.create_session_on("x", "python3").await;
    let v = server.exec("x", "kept = 42").await;
    assert_eq!(status(&v), "ok", "{v}");
    let v = server.exec("x", "exit()").await;
    assert_eq!(status(&v), "ok", "{v}");
    assert!(
        v["notices"]
            .to_string()
            .contains("asked the kernel to exit"),
        "{v}"
    );
    let v = server.exec("x", "kept").await;
    assert_eq!(v["result"], "42", "{v}");
    assert_eq!(v["state_reset"], false, "{v}");
    server.destroy("x").await;
    server.shutdown().await;
}
