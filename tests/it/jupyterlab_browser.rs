//! JupyterLab in headless Chromium on the agent's session (docs/jupyter.md): the agent creates
//! a session with a live notebook in JupyterLab's root, a person opens that notebook in
//! JupyterLab (on `--gateway-url` of the service; the notebook names the session's own
//! kernelspec, so it attaches to the agent's kernel), adds a cell computed from the agent's
//! variable and runs it. The screenshot is kept under `target/jupyterlab/` (and the one in
//! `docs/` was taken this way). Needs Debian's `chromium` (`make kernels`) and
//! `tests/jupyterlab/node_modules` (`npm ci` there; `make jupyterlab-shot` does both).

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::jupyter::{FaceService, JupyterOnFace};

#[tokio::test]
async fn a_notebook_in_jupyterlab_computes_from_the_agents_variable() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let driver = here.join("tests/jupyterlab");
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "Debian's chromium is missing: `make kernels` installs it"
    );
    assert!(
        driver.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: `npm ci` in tests/jupyterlab (`make jupyterlab-shot`)"
    );
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

    let out_dir = here.join("target/jupyterlab");
    std::fs::create_dir_all(&out_dir).unwrap();
    let shot = out_dir.join("jupyterlab-session.png");
    let _ = std::fs::remove_file(&shot);
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
