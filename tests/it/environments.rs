//! Issue 14 acceptance for named Python environments, against the real binary and real
//! ipykernel: a second venv registered and launched from (its `sys.prefix`), the registry
//! surviving a server restart and shared with the `kernel-mcp env` command, unknown names
//! refused with the registered ones, a venv without ipykernel reported with its install
//! command, and removal leaving running sessions alone.
//!
//! The second venv is made in the test with `python -m venv --without-pip` from the project
//! venv's interpreter (~0.3 s), then given the project venv's site-packages through a `.pth`
//! file: a real venv (its own prefix and `bin/python`) that can import the project's
//! ipykernel without installing anything. Without the `.pth` file it is a venv without
//! ipykernel.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

/// A new venv at `dir/name`; with `ipykernel`, it sees the project venv's packages.
fn make_venv(dir: &Path, name: &str, ipykernel: bool) -> PathBuf {
    let venv = dir.join(name);
    let (ok, _, err) = run_python(
        &[
            OsStr::new("-m"),
            OsStr::new("venv"),
            OsStr::new("--without-pip"),
            venv.as_os_str(),
        ],
        dir,
    );
    assert!(ok, "python -m venv failed: {err}");
    if ipykernel {
        let (ok, site, err) = run_python(
            &[
                OsStr::new("-c"),
                OsStr::new("import sysconfig; print(sysconfig.get_paths()['purelib'])"),
            ],
            dir,
        );
        assert!(ok, "{err}");
        let lib = std::fs::read_dir(venv.join("lib"))
            .expect("venv lib")
            .flatten()
            .next()
            .expect("lib/pythonX.Y")
            .path();
        std::fs::write(
            lib.join("site-packages").join("project-venv.pth"),
            format!("{}\n", site.trim()),
        )
        .expect("write .pth");
    }
    venv
}

async fn start_in(config: &Path) -> Server {
    Server::start_with(&[("XDG_CONFIG_HOME", config.as_os_str())], &[]).await
}

fn cli(config: &Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .arg("env")
        .args(args)
        .env("XDG_CONFIG_HOME", config)
        .output()
        .expect("run kernel-mcp env");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_venv_is_launched_from_and_survives_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let venv = make_venv(dir.path(), "second", true);

    let server = start_in(&config).await;
    let r = server
        .call(
            "register_environment",
            json!({"name": "second", "python": venv}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let env = structured(&r);
    assert_eq!(env["has_ipykernel"], true, "{env}");
    assert!(env["python_version"].as_str().unwrap().starts_with("3."));
    assert!(env["install_hint"].is_null(), "{env}");
    assert!(config.join("kernel-mcp/environments.json").is_file());
    server.shutdown().await;

    // A new server process reads the same registry.
    let server = start_in(&config).await;
    let listed = structured(&server.call("list_environments", json!({})).await);
    assert_eq!(listed["environments"][0]["name"], "second", "{listed}");
    create_session_with(&server, json!({"session_id": "s", "environment": "second"})).await;
    let r = exec_ok(&server, "s", "import sys; print(sys.prefix)").await;
    let prefix = PathBuf::from(r["stdout"].as_str().unwrap().trim());
    assert_eq!(
        std::fs::canonicalize(prefix).unwrap(),
        std::fs::canonicalize(&venv).unwrap()
    );

    // Removing the registration leaves the running session alone.
    let r = server
        .call("remove_environment", json!({"name": "second"}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    exec_ok(&server, "s", "x = 1").await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "t", "environment": "second"}),
        )
        .await;
    assert_eq!(error_code(&r), "KERNEL_NOT_FOUND");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_environment_is_refused_naming_the_registered_ones() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let server = start_in(&config).await;
    let r = server
        .call(
            "register_environment",
            json!({"name": "proj", "python": venv()}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = server
        .call(
            "create_session",
            json!({"session_id": "s", "environment": "projj"}),
        )
        .await;
    assert_eq!(error_code(&r), "KERNEL_NOT_FOUND", "{}", text(&r));
    let e = structured(&r);
    assert!(
        e["message"].as_str().unwrap().contains("Registered: proj."),
        "{e}"
    );
    assert_eq!(e["details"]["environments"], json!(["proj"]));
    for tool in [
        "get_environment",
        "validate_environment",
        "remove_environment",
    ] {
        let r = server.call(tool, json!({"name": "nope"})).await;
        assert_eq!(error_code(&r), "KERNEL_NOT_FOUND", "{tool}: {}", text(&r));
    }
    let r = server
        .call(
            "create_session",
            json!({"environment": "proj", "kernel": "python3"}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", text(&r));
    let r = server
        .call(
            "register_environment",
            json!({"name": "bad", "python": "/bin/false"}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_venv_without_ipykernel_is_reported_with_the_install_command() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let bare = make_venv(dir.path(), "bare", false);
    let server = start_in(&config).await;
    let r = server
        .call(
            "register_environment",
            json!({"name": "bare", "python": bare}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(structured(&r)["has_ipykernel"], false);
    let v: Value = structured(
        &server
            .call("validate_environment", json!({"name": "bare"}))
            .await,
    );
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["runs"], true, "{v}");
    assert_eq!(v["has_ipykernel"], false, "{v}");
    let hint = v["install_hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains(&format!(
            "{} -m pip install ipykernel",
            bare.join("bin/python").display()
        )),
        "{v}"
    );
    assert!(v["problem"].as_str().unwrap().contains("ipykernel"), "{v}");
    let r = server
        .call(
            "create_session",
            json!({"session_id": "s", "environment": "bare"}),
        )
        .await;
    assert_eq!(error_code(&r), "KERNEL_START_FAILED", "{}", text(&r));
    assert!(text(&r).contains("pip install ipykernel"), "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_env_command_and_the_server_share_one_registry() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let venv = venv();
    let (code, out, err) = cli(&config, &["register", "proj", venv.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("proj"), "{out}");
    let (code, out, _) = cli(&config, &["list", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).expect("list --json is JSON");
    assert_eq!(v["environments"][0]["name"], "proj", "{v}");
    let (code, _, err) = cli(&config, &["get", "nope"]);
    assert_eq!(code, 4);
    assert!(err.contains("Registered: proj."), "{err}");

    let server = start_in(&config).await;
    let got = structured(
        &server
            .call("get_environment", json!({"name": "proj"}))
            .await,
    );
    assert_eq!(got["python"], json!(venv.join("bin/python")));
    server.shutdown().await;

    let (code, out, _) = cli(&config, &["validate", "proj", "--json"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["ok"], true);
    let (code, _, _) = cli(&config, &["remove", "proj"]);
    assert_eq!(code, 0);
    let (_, out, _) = cli(&config, &["list", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["environments"],
        json!([])
    );
}
