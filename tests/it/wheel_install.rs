//! The built wheel, installed as a user would: a fresh venv with nothing else, `pip install`
//! of the wheel (which brings ipykernel from PyPI), then the installed `kernel-mcp` started
//! from outside any venv with a bare environment (`HOME` and `PATH=/usr/bin:/bin` only), as an
//! MCP client starts it. It must find its own environment: `doctor` exits 0 and `1+1` is `2`.
//!
//! Slow (a pip install), so only `make wheel-test` runs it (`make test` calls it with a debug
//! wheel, WHEEL_PROFILE=dev): it sets `KERNEL_MCP_WHEEL` to the
//! wheel `make wheel` built. Without that variable the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::common::*;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn wheel() -> Option<PathBuf> {
    let Some(w) = std::env::var_os("KERNEL_MCP_WHEEL").filter(|w| !w.is_empty()) else {
        crate::common::skip("KERNEL_MCP_WHEEL is not set (`make wheel-test` builds and sets it)");
        return None;
    };
    let w = PathBuf::from(w);
    assert!(
        w.is_file(),
        "KERNEL_MCP_WHEEL={} does not exist",
        w.display()
    );
    Some(w)
}

/// The interpreter that makes the fresh venv: `KERNEL_MCP_WHEEL_PYTHON`, else `python3`.
fn base_python() -> String {
    std::env::var("KERNEL_MCP_WHEEL_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn bare(cmd: &mut std::process::Command, home: &Path) {
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_wheel_finds_its_own_ipykernel_from_a_bare_environment() {
    let Some(wheel) = wheel() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();

    let t0 = Instant::now();
    let made = std::process::Command::new(base_python())
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(made.success(), "creating the venv failed");
    let pip = std::process::Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(&wheel)
        .status()
        .expect("pip install the wheel");
    assert!(pip.success(), "pip install {} failed", wheel.display());
    let installed = t0.elapsed();
    let exe = venv.join("bin/kernel-mcp");
    assert!(exe.is_file(), "the wheel installed no {}", exe.display());

    let mut doctor = std::process::Command::new(&exe);
    bare(&mut doctor, &home);
    let out = doctor.args(["doctor", "--json"]).output().expect("doctor");
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    // Symlinked temp dirs aside, the selected environment is the venv the wheel went into.
    let selected = report["python_environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["selected"] == true)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        selected["source"], "kernel-mcp's own environment",
        "{report:#}"
    );

    let t1 = Instant::now();
    let mut cmd = std::process::Command::new(&exe);
    bare(&mut cmd, &home);
    let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the installed kernel-mcp");
    let client: Client = tokio::time::timeout(CALL_TIMEOUT, ().serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize");
    let call = |code: &str| {
        let args = json!({"code": code});
        let Value::Object(map) = args else {
            unreachable!()
        };
        client.call_tool(
            rmcp::model::CallToolRequestParams::new("execute".to_string()).with_arguments(map),
        )
    };
    let r = tokio::time::timeout(CALL_TIMEOUT, call("1+1"))
        .await
        .expect("execute in time")
        .expect("execute");
    let first_call = t1.elapsed();
    let v = structured(&r);
    assert_eq!(v["status"], "ok", "{}", dump(&r));
    assert_eq!(v["result"], "2", "{}", dump(&r));
    let r = tokio::time::timeout(CALL_TIMEOUT, call("import ipykernel, sys; sys.prefix"))
        .await
        .expect("execute in time")
        .expect("execute");
    let v = structured(&r);
    assert_eq!(v["status"], "ok", "{}", dump(&r));
    let _ = client.cancel().await;
    eprintln!(
        "wheel {} ({} bytes): venv + pip install {:.1} s, start + first execute {:.1} s",
        wheel.display(),
        std::fs::metadata(&wheel).map(|m| m.len()).unwrap_or(0),
        installed.as_secs_f64(),
        first_call.as_secs_f64()
    );
}
