//! `kernel-mcp console` driven in a pseudo-terminal (rexpect) as a person types: cells, a
//! multi-line `for` loop decided by the kernel's `is_complete`, Ctrl-C during a long cell,
//! Ctrl-D, and the live view of a cell another MCP client runs in the same session. Each test
//! has a service of its own (socket, state and runtime dirs in a temp dir), stopped at its end.

use std::time::{Duration, Instant};

use crate::common::cli::run;
use crate::common::service::TestService;
use rexpect::session::PtySession;
use serde_json::Value;

/// Generous: a kernel start on a loaded machine, not a timing goal.
const EXPECT_MS: u64 = 90_000;
const PROMPT: &str = r"In \[\d+\]: ";

fn open_console(svc: &TestService, cwd: &std::path::Path, session: &str) -> PtySession {
    let mut cmd = crate::common::cli::command(svc, cwd);
    cmd.args(["console", session]);
    rexpect::session::spawn_command(cmd, Some(EXPECT_MS)).expect("spawn the console in a pty")
}

/// Type `text` and press Enter (a carriage return, as a terminal sends it).
fn enter(p: &mut PtySession, text: &str) {
    p.send(text).expect("type");
    p.send("\r").expect("enter");
    p.flush().expect("flush");
}

fn prompt(p: &mut PtySession) {
    p.exp_regex(PROMPT).expect("the prompt");
}

/// Ctrl-D at the prompt; the console's exit status.
fn leave(p: &mut PtySession) -> i32 {
    p.send_control('d').expect("ctrl-d");
    p.exp_eof().expect("the console ends");
    match p.process().wait().expect("wait") {
        rexpect::process::WaitStatus::Exited(_, code) => code,
        other => panic!("the console did not exit normally: {other:?}"),
    }
}

async fn listed(svc: &TestService, cwd: &std::path::Path) -> Vec<String> {
    let o = run(svc, cwd, &["sessions", "--json"]).await;
    let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_runs_cells_and_multi_line_loops_and_ctrl_c_keeps_the_state() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut p = open_console(&svc, d, "person");
    tokio::task::block_in_place(|| {
        p.exp_string("created session 'person'").expect("created");
        prompt(&mut p);
        enter(&mut p, "zz = 6*7");
        prompt(&mut p);
        enter(&mut p, "zz");
        p.exp_string("Out[").expect("an Out marker");
        p.exp_string("42").expect("zz is 42");
        prompt(&mut p);

        // Three lines: the header, the body (indented by the kernel's hint), an empty line.
        enter(&mut p, "for i in range(3):");
        enter(&mut p, "print('it', i * 11)");
        enter(&mut p, "");
        p.exp_string("it 0").expect("first pass");
        p.exp_string("it 22").expect("last pass");
        prompt(&mut p);

        enter(&mut p, "import time; time.sleep(30)");
        std::thread::sleep(Duration::from_secs(2));
        let t0 = Instant::now();
        p.send_control('c').expect("ctrl-c");
        p.exp_string("KeyboardInterrupt")
            .expect("the cell was interrupted");
        prompt(&mut p);
        let back = t0.elapsed();
        eprintln!("Ctrl-C to the prompt: {back:?}");
        assert!(
            back < Duration::from_secs(20),
            "back at the prompt after {back:?}"
        );
        enter(&mut p, "zz");
        p.exp_string("42").expect("zz is still 42");
        prompt(&mut p);
        assert_eq!(leave(&mut p), 0);
    });
    assert_eq!(listed(&svc, d).await, vec!["person".to_string()]);
    let history = svc.state().join("kernel-mcp").join("console_history");
    let saved = std::fs::read_to_string(&history).unwrap_or_default();
    assert!(saved.contains("zz = 6*7"), "console history: {saved:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_another_mcp_client_runs_appears_on_the_console_with_its_output() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = svc.relay().await;
    agent.create_session("shared").await;
    let mut p = open_console(&svc, d, "shared");
    tokio::task::block_in_place(|| {
        prompt(&mut p);
        // Let the live view take its first look before the agent runs anything.
        std::thread::sleep(Duration::from_secs(1));
    });
    let r = agent.exec("shared", "print('agent says', 40 + 3)").await;
    assert_eq!(crate::common::status(&r), "ok", "{r}");
    tokio::task::block_in_place(|| {
        p.exp_string("[another client]")
            .expect("the cell is marked as theirs");
        p.exp_string("agent says 43").expect("its output shows");
        assert_eq!(leave(&mut p), 0);
    });
    assert_eq!(listed(&svc, d).await, vec!["shared".to_string()]);
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_name_the_console_offers_the_sessions_and_tab_completes_and_images_are_saved() {
    let svc = TestService::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = svc.relay().await;
    agent.create_session("agent-one").await;
    // IPython's first completion loads jedi, which takes seconds on a loaded machine (over the
    // kernel's 10 s answer deadline at worst): warm it up so Tab below meets a ready kernel.
    // (Through execute: `complete` is not in the default toolset the agent's relay gets.)
    agent
        .exec(
            "agent-one",
            "from IPython.core.completer import provisionalcompleter\n\
             with provisionalcompleter():\n    \
             _ = list(get_ipython().Completer.completions('import o', 8))",
        )
        .await;
    let mut cmd = crate::common::cli::command(&svc, d);
    cmd.arg("console");
    let mut p = rexpect::session::spawn_command(cmd, Some(EXPECT_MS)).expect("spawn");
    tokio::task::block_in_place(|| {
        p.exp_string("[1] agent-one").expect("the session list");
        p.exp_string("session (number or name)")
            .expect("the question");
        enter(&mut p, "1");
        p.exp_string("console on 'agent-one'")
            .expect("opened the chosen session");
        prompt(&mut p);
        enter(&mut p, "a_rather_long_name = 5");
        prompt(&mut p);
        // Tab asks the kernel (a first completion loads jedi: seconds); the one match
        // completes the name.
        p.send("a_rather_lo\t").expect("tab");
        p.flush().expect("flush");
        p.exp_string("ng_name").expect("the name completed");
        enter(&mut p, " * 3");
        p.exp_string("15").expect("the completed name ran");
        prompt(&mut p);
        enter(
            &mut p,
            "import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()",
        );
        p.exp_string("[image/png, ").expect("an image line");
        p.exp_string("saved to ").expect("where it went");
        prompt(&mut p);
        assert_eq!(leave(&mut p), 0);
    });
    let images = svc.state().join("kernel-mcp/console/images");
    let saved: Vec<_> = std::fs::read_dir(&images)
        .unwrap_or_else(|e| panic!("{}: {e}", images.display()))
        .flatten()
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let png = std::fs::read(saved[0].path()).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_complete_answers_the_kernels_verdict_and_indent() {
    let server = crate::common::Server::start().await;
    server.create_session("c").await;
    let ask = |code: &'static str| {
        let server = &server;
        async move {
            let r = server
                .call(
                    "is_complete",
                    serde_json::json!({"session_id": "c", "code": code}),
                )
                .await;
            crate::common::structured(&r)
        }
    };
    let v = ask("for i in range(3):").await;
    assert_eq!(v["status"], "incomplete", "{v}");
    assert_eq!(v["indent"], "    ", "{v}");
    let v = ask("for i in range(3):\n    print(i)\n").await;
    assert_eq!(v["status"], "complete", "{v}");
    assert_eq!(ask("1/").await["status"], "invalid");
    let r = server
        .call(
            "is_complete",
            serde_json::json!({"session_id": "nope", "code": "1"}),
        )
        .await;
    assert_eq!(
        crate::common::structured(&r)["error_code"],
        "SESSION_NOT_FOUND"
    );
    server.shutdown().await;
}
