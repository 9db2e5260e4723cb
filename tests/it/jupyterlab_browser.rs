//! JupyterLab in headless Chromium (docs/jupyter.md, docs/notebooks.md), two ways a person meets the agent.
//!
//! On the agent's session: the agent creates a session with a live notebook in JupyterLab's
//! root, a person opens that notebook in JupyterLab (on `--gateway-url` of the service; the
//! notebook names the session's own kernelspec, so it attaches to the agent's kernel), adds a
//! cell computed from the agent's variable and runs it.
//!
//! In the person's notebook: a person has a notebook open in JupyterLab on a Jupyter Server
//! running jupyter-collaboration; the agent opens it through the collaboration room
//! (`open_notebook(gateway=…)`), inserts a cell after the person's and runs both, and the
//! person's tab shows the agent's cell, its output and the agent in the collaborators panel.
//!
//! The screenshots are kept under `target/jupyterlab/` (the ones in `docs/` were taken this
//! way: `make jupyterlab-shot`). Needs Debian's `chromium` (`make kernels`),
//! `tests/jupyterlab/node_modules` (`npm ci` there) and `.venv-collab` (`make gateways`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::collab::CollabServer;
use crate::common::jupyter::{FaceService, JupyterOnFace};
use crate::common::*;

/// `tests/jupyterlab`, checked to have Chromium and playwright-core.
fn browser_driver() -> PathBuf {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jupyterlab");
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "Debian's chromium is missing: `make kernels` installs it"
    );
    assert!(
        driver.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: `npm ci` in tests/jupyterlab (`make jupyterlab-shot`)"
    );
    driver
}

/// `target/jupyterlab/NAME`, without a screenshot of an earlier run.
fn shot_path(name: &str) -> PathBuf {
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/jupyterlab");
    std::fs::create_dir_all(&out_dir).unwrap();
    let shot = out_dir.join(name);
    let _ = std::fs::remove_file(&shot);
    shot
}

#[tokio::test]
async fn a_notebook_in_jupyterlab_computes_from_the_agents_variable() {
    let driver = browser_driver();
    let face = FaceService::start(&[], &[]).await;
    let js = JupyterOnFace::start(&face, "jupyter-lab").await;
    let agent = face.agent().await;
    let notebook = js.root.join("analysis.ipynb");
    let info = agent
        .call(
            "create_session",
            json!({"session_id": "analysis", "notebook": notebook}),
        )
        .await;
    assert_eq!(info["session_id"], "analysis", "{info}");
    for code in [
        "prices = [101.5, 99.0, 104.25, 102.75]",
        "print(f'{len(prices)} prices loaded by the agent')",
    ] {
        let r = agent
            .call("execute", json!({"session_id": "analysis", "code": code}))
            .await;
        assert_eq!(r["status"], "ok", "{r}");
    }
    // The live notebook has both cells before the person opens it.
    let both = async {
        loop {
            let text = std::fs::read_to_string(&notebook).unwrap_or_default();
            if text.contains("prices loaded by the agent") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), both)
        .await
        .expect("the live notebook has the agent's cells");

    let shot = shot_path("jupyterlab-session.png");
    let run = tokio::time::timeout(
        Duration::from_secs(360),
        tokio::process::Command::new("node")
            .current_dir(&driver)
            .arg("screenshot.mjs")
            .args([
                &js.url(""),
                &js.token,
                "analysis.ipynb",
                "print('mean price:', sum(prices) / len(prices))",
                "mean price: 101.875",
            ])
            .arg(&shot)
            .output(),
    )
    .await
    .expect("the browser finished")
    .expect("run node");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "JupyterLab did not show the output (screenshot: {}):\n{stdout}\n{}\n{}",
        shot.display(),
        String::from_utf8_lossy(&run.stderr),
        js.log_text()
    );
    assert!(stdout.contains("mean price: 101.875"), "{stdout}");
    assert!(shot.exists(), "a screenshot at {}", shot.display());

    // The person's cell is in the agent's session, as another client's.
    let h = agent
        .call(
            "get_history",
            json!({"session_id": "analysis", "latest_n": 1}),
        )
        .await;
    let last = &h["entries"][0];
    assert_eq!(last["other_client"], true, "{h}");
    assert!(last["output"].as_str().unwrap().contains("101.875"), "{h}");
    drop(js);
    face.stop().await;
}

/// The person's notebook: a title and the cell that loads the prices, never run.
fn persons_notebook() -> Value {
    json!({
        "cells": [
            {"cell_type": "markdown", "id": "title", "metadata": {},
             "source": "# Prices\n\nThe person's notebook; the agent adds the analysis."},
            {"cell_type": "code", "id": "load", "metadata": {}, "outputs": [],
             "execution_count": null, "source": "prices = [101.5, 99.0, 104.25, 102.75]"},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })
}

async fn ok(server: &Server, tool: &str, args: Value) -> Value {
    let r = server.call(tool, args).await;
    assert!(!is_error(&r), "{tool}: {}", dump(&r));
    structured(&r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_cell_and_its_output_appear_in_the_persons_jupyterlab() {
    let driver = browser_driver();
    let lab = CollabServer::start(&[("analysis.ipynb", persons_notebook())]).await;
    let flag = format!("lab={}", lab.url);
    let server = Server::start_with(
        &[("KERNEL_MCP_GATEWAY_TOKEN", std::ffi::OsStr::new(&lab.token))],
        &["--tools", "all", "--gateway", &flag],
    )
    .await;
    let shot = shot_path("notebook-live.png");
    let mut person = tokio::process::Command::new("node")
        .current_dir(&driver)
        .arg("live.mjs")
        .args([&lab.url, &lab.token, "analysis.ipynb", "mean 101.875"])
        .arg("agent (kernel-mcp)")
        .arg(&shot)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    let mut lines = BufReader::new(person.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(300), lines.next_line()).await;
    let ready = ready.expect("JupyterLab opened the notebook within 300 s");
    assert!(
        ready
            .as_ref()
            .is_ok_and(|l| l.as_deref() == Some(r#"{"ready":true}"#)),
        "the person's JupyterLab is not ready: {ready:?}\n{}",
        lab.log_text()
    );

    // The agent joins the room, adds its cells after the person's and runs both.
    let opened = ok(
        &server,
        "open_notebook",
        json!({"path": "analysis.ipynb", "gateway": "lab", "session_id": "agent"}),
    )
    .await;
    assert_eq!(opened["cells"], 2, "{opened}");
    let code = "import statistics\n\
                print(f'{len(prices)} prices, mean {statistics.mean(prices):.3f}')\n\
                for p in prices:\n    print(f'{p:7.2f}', '#' * round(p - 95))";
    let edited = ok(
        &server,
        "edit_cells",
        json!({"path": "analysis.ipynb", "ops": [
            {"op": "insert", "after": "load", "source": code},
            {"op": "insert", "after": "load", "cell_type": "markdown",
             "source": "## The agent's analysis\n\nAdded and run by the agent while the person watched."},
        ]}),
    )
    .await;
    let id = edited["inserted"][0].as_str().unwrap().to_string();
    let ran = ok(
        &server,
        "execute_cells",
        json!({"path": "analysis.ipynb", "ids": ["load", id]}),
    )
    .await;
    assert_eq!(ran["status"], "done", "{ran}");
    assert!(
        ran["results"][1]["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("mean 101.875")),
        "{ran}"
    );

    let seen = tokio::time::timeout(Duration::from_secs(300), async {
        let mut stderr = String::new();
        let _ =
            tokio::io::AsyncReadExt::read_to_string(person.stderr.as_mut().unwrap(), &mut stderr)
                .await;
        let last = lines.next_line().await.ok().flatten();
        (person.wait().await.expect("node"), last, stderr)
    })
    .await
    .expect("the browser finished within 300 s");
    let (status, last, stderr) = seen;
    assert!(
        status.success(),
        "JupyterLab did not show the agent's output (screenshot: {}):\n{last:?}\n{stderr}",
        shot.display()
    );
    let page: Value = serde_json::from_str(last.as_deref().unwrap_or("")).expect("a JSON line");
    assert!(
        page["output"]
            .as_str()
            .is_some_and(|o| o.contains("mean 101.875")),
        "{page}"
    );
    assert_eq!(
        page["agent_in_panel"], true,
        "the collaborators panel names the agent: {page}"
    );
    assert!(shot.exists(), "a screenshot at {}", shot.display());
    ok(&server, "close_notebook", json!({"path": "analysis.ipynb"})).await;
    server.shutdown().await;
    drop(lab);
}
