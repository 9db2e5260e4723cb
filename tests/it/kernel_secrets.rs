//! Tokens and secrets never reach a kernel (docs/semantics.md), through the real binary: the
//! server gets `KERNEL_MCP_TOKEN`, `KERNEL_MCP_GATEWAY_TOKEN`, `KERNEL_MCP_TOKEN_FILE` and the
//! OAuth settings (`KERNEL_MCP_OAUTH_ISSUER`, `KERNEL_MCP_OAUTH_AUDIENCE`), and none of them is
//! in the environment of a python3 kernel (cold and pooled), a bash kernel, a fresh-run helper
//! kernel or an `install_packages` installer. A kernelspec's `${VAR}` cannot name one either,
//! while variables the caller sets on purpose stay.

use std::ffi::OsStr;

use serde_json::json;

use crate::common::*;

const TOKEN: &str = "s3cret-mcp-token";
const GATEWAY_TOKEN: &str = "s3cret-gateway-token";
const TOKEN_FILE: &str = "/nonexistent/s3cret-token-file";

/// The server's environment: every secret variable set.
fn secret_env() -> Vec<(&'static str, &'static OsStr)> {
    vec![
        ("KERNEL_MCP_TOKEN", OsStr::new(TOKEN)),
        ("KERNEL_MCP_GATEWAY_TOKEN", OsStr::new(GATEWAY_TOKEN)),
        ("KERNEL_MCP_TOKEN_FILE", OsStr::new(TOKEN_FILE)),
        (
            "KERNEL_MCP_OAUTH_ISSUER",
            OsStr::new("https://s3cret-issuer.example"),
        ),
        (
            "KERNEL_MCP_OAUTH_AUDIENCE",
            OsStr::new("https://s3cret-audience.example/mcp"),
        ),
    ]
}

/// Python that prints every environment entry naming or holding a secret (or `none`).
const SHOW_PY: &str = "import os\n\
    hits = sorted(k for k, v in os.environ.items() if 'TOKEN' in k or 's3cret' in v)\n\
    print('SECRETS', hits or 'none')";

fn assert_clean(what: &str, out: &str) {
    assert!(out.contains("SECRETS none"), "{what}: {out}");
    assert!(!out.contains("s3cret"), "{what}: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_kernel_cold_pooled_bash_or_fresh_sees_the_servers_tokens() {
    // `--pool` without the word `serve`, as an MCP client config would write it.
    let server = Server::start_with(&secret_env(), &["--pool", "python3=1"]).await;
    let pooled = wait_ready(&server).await;
    assert_eq!(pooled, 1, "the pool is filled");

    // The pool's kernel (no cwd, no env): the pool gives it away.
    server.create_session_on("pooled", "python3").await;
    let info = structured(&server.call("server_info", json!({})).await);
    assert_eq!(info["pool"]["python3"]["ready"], 0, "{}", info["pool"]);
    let v = server.exec("pooled", SHOW_PY).await;
    assert_clean("pooled python3", v["stdout"].as_str().unwrap_or_default());

    // A cold one, with a variable of the caller's own that must stay.
    let r = server
        .call(
            "create_session",
            json!({"session_id": "cold", "kernel": "python3", "env": {"MINE": "kept"}}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = server.exec("cold", SHOW_PY).await;
    assert_clean("cold python3", v["stdout"].as_str().unwrap_or_default());
    let v = server
        .exec("cold", "import os; print(os.environ['MINE'])")
        .await;
    assert_eq!(v["stdout"].as_str().unwrap_or_default().trim(), "kept");

    // A fresh-run helper kernel.
    std::fs::write(server.workdir().join("show.py"), SHOW_PY).unwrap();
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "cold", "path": "show.py", "mode": "fresh"}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    assert_clean("fresh run", v["stdout"].as_str().unwrap_or_default());

    // bash, through `env`.
    server.create_session_on("sh", "bash").await;
    let v = server
        .exec("sh", "env | grep -e TOKEN -e s3cret || echo 'SECRETS none'")
        .await;
    assert_clean("bash", v["stdout"].as_str().unwrap_or_default());

    for s in ["pooled", "cold", "sh"] {
        server.destroy(s).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installer_and_a_kernelspecs_expansion_get_no_token() {
    let dir = tempfile::tempdir().unwrap();
    // A `uv` that shows its environment (install_packages prefers uv on PATH).
    let uv = dir.path().join("bin/uv");
    std::fs::create_dir_all(uv.parent().unwrap()).unwrap();
    std::fs::write(
        &uv,
        "#!/bin/sh\nenv | grep -e TOKEN -e s3cret || echo 'SECRETS none'\n",
    )
    .unwrap();
    std::fs::set_permissions(&uv, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        uv.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // A kernelspec that asks for the token in its env.
    let specs = dir.path().join("specs/greedy");
    std::fs::create_dir_all(&specs).unwrap();
    let python = venv().join("bin/python");
    std::fs::write(
        specs.join("kernel.json"),
        json!({
            "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "greedy", "language": "python",
            "env": {"WANTS_TOKEN": "${KERNEL_MCP_TOKEN}"}
        })
        .to_string(),
    )
    .unwrap();
    let mut env = secret_env();
    env.push(("PATH", OsStr::new(&path)));
    let spec_dir = dir.path().join("specs");
    let server = Server::start_with(&env, &["--kernelspec-dir", spec_dir.to_str().unwrap()]).await;
    server.create_session_on("g", "greedy").await;
    let v = server
        .exec(
            "g",
            "import os; print('WANTS', os.environ.get('WANTS_TOKEN'))",
        )
        .await;
    let out = v["stdout"].as_str().unwrap_or_default();
    assert!(!out.contains("s3cret"), "{out}");
    assert!(
        out.contains("WANTS ${KERNEL_MCP_TOKEN}"),
        "left unexpanded: {out}"
    );

    let r = server
        .call(
            "install_packages",
            json!({"session_id": "g", "packages": ["anything"]}),
        )
        .await;
    let v = structured(&r);
    assert_clean("installer", v["output"].as_str().unwrap_or_default());
    server.destroy("g").await;
    server.shutdown().await;
}

/// Wait (generously) for the python3 pool to have a ready kernel; returns how many.
async fn wait_ready(server: &Server) -> u64 {
    for _ in 0..600 {
        let info = structured(&server.call("server_info", json!({})).await);
        if let Some(n) = info["pool"]["python3"]["ready"].as_u64().filter(|n| *n > 0) {
            return n;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the pool never filled\n{}", server.stderr_tail());
}
