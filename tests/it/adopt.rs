//! Adopting a kernel someone else started (`python -m ipykernel_launcher -f FILE`): execute
//! works, interrupt (over control) stops `time.sleep(60)`, restart is UNSUPPORTED,
//! destroy_session leaves the kernel running; a SIGSTOPped kernel shows `unresponsive`, a
//! SIGKILLed one `dead`, and its run ends `kernel_died`. Our own kernels get the heartbeat
//! too: a stopped one shows `unresponsive`, and is not declared dead for it.

use std::process::Stdio;
use std::time::Duration;

use crate::common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

/// A kernel of our own, started the way a person would; killed when dropped.
struct Person {
    child: std::process::Child,
    file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Person {
    async fn start() -> Person {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("kernel-person.json");
        let child = std::process::Command::new(venv().join("bin").join("python"))
            .args(["-m", "ipykernel_launcher", "-f"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ipykernel");
        assert!(
            wait_until(Duration::from_secs(30), || file.exists()).await,
            "ipykernel wrote no connection file"
        );
        Person {
            child,
            file,
            _dir: dir,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn session_status(server: &Server, id: &str) -> String {
    let r = server.call("get_session", json!({"session_id": id})).await;
    structured(&r)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn wait_status(server: &Server, id: &str, want: &str) -> bool {
    for _ in 0..60 {
        if session_status(server, id).await == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

#[tokio::test]
async fn an_adopted_kernel_runs_code_is_interrupted_over_control_and_survives_destroy() {
    let person = Person::start().await;
    let server = Server::start().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "theirs", "connection_file": person.file}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let info = structured(&r);
    assert_eq!(info["attached"], true);
    assert!(info["pid"].is_null(), "{info}");
    assert_eq!(info["language"], "python");
    assert_eq!(server.exec("theirs", "21 * 2").await["result"], "42");

    let run = structured(
        &server
            .call(
                "execute",
                json!({"session_id": "theirs", "code": "import time; time.sleep(60)", "wait_s": 1}),
            )
            .await,
    );
    assert_eq!(run["status"], "running", "{run}");
    server
        .call("interrupt_session", json!({"session_id": "theirs"}))
        .await;
    let done = structured(
        &server
            .call(
                "get_execution",
                json!({"run_id": run["run_id"], "wait_s": 20}),
            )
            .await,
    );
    assert_eq!(done["status"], "interrupted", "{done}");

    let r = server
        .call("restart_session", json!({"session_id": "theirs"}))
        .await;
    assert_eq!(structured(&r)["error_code"], "UNSUPPORTED", "{}", text(&r));

    let r = structured(
        &server
            .call("destroy_session", json!({"session_id": "theirs"}))
            .await,
    );
    assert_eq!(r["shutdown"], "detached", "{r}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        pid_alive(person.child.id()),
        "destroy_session must leave an adopted kernel running"
    );
    server.shutdown().await;
    assert!(
        pid_alive(person.child.id()),
        "server exit must leave an adopted kernel running"
    );
}

#[tokio::test]
async fn a_stopped_adopted_kernel_is_unresponsive_and_a_killed_one_is_dead() {
    let mut person = Person::start().await;
    let server = Server::start().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "hb", "connection_file": person.file}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    kill(person.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    assert!(
        wait_status(&server, "hb", "unresponsive").await,
        "not unresponsive within ~15 s"
    );
    kill(person.pid(), Signal::SIGCONT).expect("SIGCONT");
    assert!(
        wait_status(&server, "hb", "idle").await,
        "not idle again after SIGCONT"
    );

    let run = structured(
        &server
            .call(
                "execute",
                json!({"session_id": "hb", "code": "import time; time.sleep(60)", "wait_s": 1}),
            )
            .await,
    );
    person.child.kill().expect("SIGKILL");
    let _ = person.child.wait();
    let done = structured(
        &server
            .call(
                "get_execution",
                json!({"run_id": run["run_id"], "wait_s": 30}),
            )
            .await,
    );
    assert_eq!(done["status"], "kernel_died", "{done}");
    assert!(wait_status(&server, "hb", "dead").await, "not dead");
    server.shutdown().await;
}

#[tokio::test]
async fn our_own_stopped_kernel_is_unresponsive_and_comes_back_when_continued() {
    let server = Server::start().await;
    server.create_session("own").await;
    let pid = Pid::from_raw(server.kernel_pid("own").await as i32);
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    let stopped = wait_status(&server, "own", "unresponsive").await;
    kill(pid, Signal::SIGCONT).expect("SIGCONT");
    assert!(
        stopped,
        "a stopped kernel of ours is not shown unresponsive"
    );
    assert!(
        wait_status(&server, "own", "idle").await,
        "not idle after SIGCONT"
    );
    let r = server.exec("own", "1 + 1").await;
    assert_eq!(r["result"], "2", "{r}");
    assert_eq!(
        r["generation"], 1,
        "a missed heartbeat must not replace our kernel: {r}"
    );
    server.shutdown().await;
}

/// Python that ignores interrupts until `flag` exists (a person stops it by creating it).
fn stuck_until(flag: &std::path::Path) -> String {
    format!(
        "import os, time\nwhile not os.path.exists({:?}):\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n        pass",
        flag.display().to_string()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_never_restarts_an_adopted_kernel_and_says_the_person_must() {
    let person = Person::start().await;
    let server = Server::start().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "theirs", "connection_file": person.file}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(server.exec("theirs", "x = 41").await["status"], "ok");

    let flag = person._dir.path().join("stop");
    let run = structured(
        &server
            .call(
                "execute",
                json!({"session_id": "theirs", "code": stuck_until(&flag), "timeout_s": 1, "wait_s": 40}),
            )
            .await,
    );
    assert_eq!(run["status"], "timeout", "{run}");
    let notices = run["notices"].to_string().to_lowercase();
    assert!(
        notices.contains("cannot restart"),
        "the run says kernel-mcp cannot restart it: {run}"
    );
    assert!(
        !notices.contains("state in it is lost") && !notices.contains("was restarted"),
        "the run claims a restart that did not happen: {run}"
    );
    let info = structured(
        &server
            .call("get_session", json!({"session_id": "theirs"}))
            .await,
    );
    assert_eq!(info["generation"], 1, "{info}");

    // The person stops the code; the state was never lost.
    std::fs::write(&flag, "").unwrap();
    let next = server.exec("theirs", "x + 1").await;
    assert_eq!(next["result"], "42", "{next}");
    assert_eq!(next["state_reset"], false, "{next}");
    assert_eq!(next["generation"], 1, "{next}");
    assert!(
        pid_alive(person.child.id()),
        "the adopted kernel was stopped"
    );

    let r = structured(
        &server
            .call("destroy_session", json!({"session_id": "theirs"}))
            .await,
    );
    assert_eq!(r["shutdown"], "detached", "{r}");
    server.shutdown().await;
    assert!(pid_alive(person.child.id()));
}
