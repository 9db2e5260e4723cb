//! The first run of a new user, as an MCP client starts kernel-mcp: a bare environment (what
//! Node's MCP SDK passes: HOME, LOGNAME, PATH, SHELL, TERM, USER), no VIRTUAL_ENV, and a PATH
//! whose `python3` has no ipykernel. Every failure must name the interpreter it tried, the
//! command that installs ipykernel into it and the setting that selects another environment;
//! `kernel-mcp doctor` must exit non-zero there with the same fix, and 0 with the test venv.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::history::error_code;
use crate::common::*;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// A Python 3 without ipykernel: Debian's system interpreter on the CI image.
fn python_without_ipykernel() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .iter()
        .map(PathBuf::from)
        .find(|p| {
            std::process::Command::new(p)
                .args(["-c", "import ipykernel"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| !s.success())
        })
}

/// A temp dir with `bin/python3` (a symlink to a Python without ipykernel) and an empty
/// `home/`. Skips the test (returns `None`, with the reason printed) when no such Python exists.
struct Bare {
    dir: tempfile::TempDir,
}

impl Bare {
    fn new() -> Option<Bare> {
        let Some(python) = python_without_ipykernel() else {
            crate::common::skip("no python3 without ipykernel in /usr/bin or /usr/local/bin");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::os::unix::fs::symlink(python, dir.path().join("bin/python3")).unwrap();
        Some(Bare { dir })
    }

    fn python3(&self) -> PathBuf {
        self.dir.path().join("bin/python3")
    }

    fn path_var(&self) -> String {
        format!("{}:/usr/bin:/bin", self.dir.path().join("bin").display())
    }

    /// The kernel-mcp command with only the variables Node's MCP SDK passes.
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
        self.apply(&mut cmd);
        cmd.args(args);
        cmd
    }

    fn apply(&self, cmd: &mut std::process::Command) {
        cmd.env_clear()
            .env("HOME", self.dir.path().join("home"))
            .env("LOGNAME", "tester")
            .env("USER", "tester")
            .env("SHELL", "/bin/sh")
            .env("TERM", "dumb")
            .env("PATH", self.path_var())
            .current_dir(self.dir.path().join("work"));
    }

    /// An MCP client connected to kernel-mcp started in the bare environment.
    async fn client(&self, args: &[&str]) -> Client {
        let mut std_cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
        self.apply(&mut std_cmd);
        std_cmd.args(args);
        let cmd = tokio::process::Command::from(std_cmd);
        let (transport, _stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kernel-mcp");
        tokio::time::timeout(CALL_TIMEOUT, ().serve(transport))
            .await
            .expect("MCP initialize in time")
            .expect("MCP initialize")
    }
}

async fn call(client: &Client, tool: &str, args: Value) -> rmcp::model::CallToolResult {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let params = rmcp::model::CallToolRequestParams::new(tool.to_string()).with_arguments(map);
    tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params))
        .await
        .expect("tool call answered in time")
        .expect("tool call")
}

fn assert_says_the_fix(text: &str, interpreter: &Path) {
    let install = format!("{} -m pip install ipykernel", interpreter.display());
    assert!(text.contains(&install), "no `{install}` in:\n{text}");
    for key in ["VIRTUAL_ENV", "KERNEL_MCP_PYTHON_ENV", "--python-env"] {
        assert!(text.contains(key), "no {key} in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_with_a_python3_lacking_ipykernel_names_it_and_the_install_command() {
    let Some(bare) = Bare::new() else { return };
    let client = bare.client(&[]).await;
    let r = call(&client, "execute", json!({"code": "1+1"})).await;
    let body = dump(&r);
    assert!(is_error(&r), "expected an error: {body}");
    assert!(body.contains("KERNEL_START_FAILED"), "{body}");
    assert_says_the_fix(&body, &bare.python3());
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_session_with_python_lacking_ipykernel_says_the_fix() {
    let Some(bare) = Bare::new() else { return };
    let client = bare.client(&[]).await;
    let python = bare.python3();
    let r = call(
        &client,
        "create_session",
        json!({"session_id": "p", "python": python}),
    )
    .await;
    let body = dump(&r);
    assert!(is_error(&r), "expected an error: {body}");
    assert_says_the_fix(&body, &python);
    let _ = client.cancel().await;
}

/// A `python` that is no Python at all is a wrong argument, not a missing ipykernel (the
/// advice to run `/bin/false -m pip install ipykernel` helps nobody).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_session_with_a_python_that_is_not_python_is_an_invalid_argument() {
    let server = Server::start().await;
    for program in ["/bin/false", "/bin/sleep"] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": "p", "python": program}),
            )
            .await;
        assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
        let t = text(&r);
        assert!(t.contains("does not run as a Python interpreter"), "{t}");
        assert!(!t.contains("pip install"), "{t}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernelspec_whose_program_is_missing_names_it_and_its_kernel_json() {
    let Some(bare) = Bare::new() else { return };
    let specs = bare.dir.path().join("specs");
    std::fs::create_dir_all(specs.join("ghost")).unwrap();
    std::fs::write(
        specs.join("ghost/kernel.json"),
        r#"{"argv": ["/nonexistent/bin/ghost-kernel", "-f", "{connection_file}"], "display_name": "Ghost", "language": "ghost"}"#,
    )
    .unwrap();
    let specs_arg = specs.display().to_string();
    let client = bare.client(&["--kernelspec-dir", &specs_arg]).await;
    let r = call(
        &client,
        "create_session",
        json!({"session_id": "g", "kernel": "ghost"}),
    )
    .await;
    let body = dump(&r);
    assert!(is_error(&r), "expected an error: {body}");
    assert!(body.contains("/nonexistent/bin/ghost-kernel"), "{body}");
    assert!(
        body.contains(&specs.join("ghost/kernel.json").display().to_string()),
        "{body}"
    );
    let _ = client.cancel().await;
}

#[test]
fn doctor_in_a_bare_environment_exits_non_zero_and_prints_the_fix() {
    let Some(bare) = Bare::new() else { return };
    let out = bare.command(&["doctor"]).output().expect("run doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "doctor output:\n{stdout}");
    assert_says_the_fix(&stdout, &bare.python3());
    assert!(stdout.contains("python3 on PATH"), "{stdout}");
}

#[test]
fn doctor_json_in_a_bare_environment_reports_not_ok_with_advice() {
    let Some(bare) = Bare::new() else { return };
    let out = bare.command(&["doctor", "--json"]).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor --json is JSON");
    assert_eq!(report["ok"], false, "{report:#}");
    assert_eq!(report["selected_environment"], Value::Null, "{report:#}");
    let advice = report["advice"].to_string();
    assert!(advice.contains("-m pip install ipykernel"), "{report:#}");
}

#[test]
fn doctor_with_the_test_venv_exits_zero_and_lists_the_installed_kernels() {
    require_venv();
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .args(["doctor", "--json"])
        .env("VIRTUAL_ENV", venv())
        .env("HOME", home.path())
        .env_remove("KERNEL_MCP_PYTHON_ENV")
        .env_remove("CONDA_PREFIX")
        .current_dir(home.path())
        .output()
        .expect("run doctor");
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor --json is JSON");
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["ok"], true);
    let specs = report["kernelspecs"].as_array().expect("kernelspecs");
    let python3 = specs
        .iter()
        .find(|k| k["name"] == "python3")
        .expect("python3 listed");
    assert_eq!(python3["can_start"], true, "{python3:#}");
    // The command shown is the one a launch runs: IPython's history kept in memory.
    let command = python3["command"].to_string();
    assert!(
        command.contains(kernel_mcp::kernel::IPYTHON_MEMORY_HISTORY),
        "{python3:#}"
    );
    let envs = report["python_environments"].as_array().unwrap();
    let selected = envs
        .iter()
        .find(|e| e["selected"] == true)
        .expect("one selected");
    assert_eq!(selected["source"], "$VIRTUAL_ENV");
    assert!(selected["ipykernel_version"].is_string(), "{selected:#}");
    // `make kernels` installs these; doctor must find every one.
    let names: Vec<&str> = specs.iter().filter_map(|k| k["name"].as_str()).collect();
    for k in ["python3", "ir", "octave", "bash", "xpython"] {
        assert!(names.contains(&k), "{k} missing from {names:?}");
    }
}
