//! `install_packages`: a package installed into the session's own venv imports in the same
//! session, a non-Python session is `UNSUPPORTED` (pointing to the kernel's own way), and
//! option-like or empty package lists are invalid arguments.

use crate::common::history::*;
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_packages_tabulate_then_import_works_in_the_same_session() {
    // A throwaway venv so the project's .venv is not changed.
    let dir = tmpdir();
    let venv = dir.path().join("v");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(made.success(), "python3 -m venv failed");
    let pip = std::process::Command::new(venv.join("bin").join("pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "ipykernel",
        ])
        .output()
        .expect("pip install ipykernel");
    assert!(
        pip.status.success(),
        "pip install ipykernel into the throwaway venv failed (PyPI access?): {}",
        String::from_utf8_lossy(&pip.stderr)
    );

    let state = StateHome::new();
    let server = state.start_server().await;
    create_session_with(&server, json!({"session_id": "p", "python": venv})).await;
    let before = exec_ok(
        &server,
        "p",
        "import importlib.util; importlib.util.find_spec('tabulate') is None",
    )
    .await;
    assert_eq!(
        before["result"], "True",
        "tabulate already importable: {before}"
    );

    let r = server
        .call(
            "install_packages",
            json!({"session_id": "p", "packages": ["tabulate"]}),
        )
        .await;
    let v = structured(&r);
    assert!(!is_error(&r), "install_packages: {}", dump(&r));
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["restart_recommended"].is_boolean(), "{v}");

    let after = exec_ok(
        &server,
        "p",
        "import tabulate; print(tabulate.tabulate([[1, 2]])); tabulate.__file__",
    )
    .await;
    let file = after["result"].as_str().unwrap_or("");
    assert!(
        file.contains(&venv.display().to_string()),
        "tabulate installed into the session's own venv {}: {after}",
        venv.display()
    );

    server.destroy("p").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_packages_on_a_non_python_session_is_unsupported() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let kernels = structured(&server.call("list_kernels", json!({})).await);
    let has_bash = kernels["kernels"]
        .as_array()
        .is_some_and(|k| k.iter().any(|k| k["name"] == "bash"));
    if !has_bash {
        crate::common::skip(
            "no `bash` kernelspec (`make kernels` installs it); \
             install_packages_rejects_option_like_packages covers the validation instead",
        );
        server.shutdown().await;
        return;
    }
    create_session_with(&server, json!({"session_id": "sh", "kernel": "bash"})).await;
    let r = server
        .call(
            "install_packages",
            json!({"session_id": "sh", "packages": ["tabulate"]}),
        )
        .await;
    assert_eq!(error_code(&r), "UNSUPPORTED", "{}", dump(&r));
    assert!(
        text(&r).contains("bash"),
        "points to the kernel's own way: {}",
        text(&r)
    );

    server.destroy("sh").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_packages_rejects_option_like_packages() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("p").await;
    for bad in ["--index-url=x", " -e .", ""] {
        let r = server
            .call(
                "install_packages",
                json!({"session_id": "p", "packages": ["tabulate", bad]}),
            )
            .await;
        assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{bad:?}: {}", dump(&r));
    }
    let r = server
        .call(
            "install_packages",
            json!({"session_id": "p", "packages": []}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "[]: {}", dump(&r));

    server.destroy("p").await;
    server.shutdown().await;
}
