//! Door 2 of the attacker's checklist (docs/sandbox.md): nothing kernel-mcp shares between
//! sessions is readable or writable by a sandboxed kernel. From a `workspace` kernel whose cwd
//! is a project (as permissive as allowed), Python, bash and R try to read another session's
//! connection file (its HMAC key: whoever has it drives that kernel), a sandboxed neighbour's,
//! the history journals, and to rewrite the `kernel_mcp` helper module — the shared copy and
//! their own. Every attempt fails, and an unsandboxed session still imports an intact helper.

use std::path::PathBuf;

use crate::common::*;
use serde_json::json;

/// The connection file of `session`'s kernel (beside its broker endpoint file).
async fn connection_file(server: &Server, session: &str) -> PathBuf {
    let v = server
        .exec(
            session,
            "import os; print(os.environ['KERNEL_MCP_ENDPOINT'][:-4] + '.json')",
        )
        .await;
    let p = PathBuf::from(v["stdout"].as_str().unwrap_or_default().trim());
    assert!(p.is_file(), "{session}'s connection file {p:?}: {v}");
    p
}

/// The file `kernel_mcp` is imported from in `session`, and its contents.
async fn helper(server: &Server, session: &str) -> (PathBuf, String) {
    let v = server
        .exec(session, "import kernel_mcp; print(kernel_mcp.__file__)")
        .await;
    let p = PathBuf::from(v["stdout"].as_str().unwrap_or_default().trim());
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e} ({v})"));
    (p, text)
}

/// Code for `kernel` printing `denied` when reading `path` fails, else its contents.
fn read_code(kernel: &str, path: &str) -> String {
    match kernel {
        "bash" => format!("cat '{path}' 2>/dev/null || echo denied"),
        "ir" => format!(
            "tryCatch(cat(readLines('{path}', warn = FALSE), sep='\\n'), error = function(e) cat('denied\\n'), warning = function(w) cat('denied\\n'))"
        ),
        _ => super::denied(&format!("print(open({path:?}).read())")),
    }
}

/// Code for `kernel` printing `denied` when appending to `path` fails, else `allowed`.
fn append_code(kernel: &str, path: &str) -> String {
    match kernel {
        "bash" => {
            format!("(echo 'import os' >> '{path}') 2>/dev/null && echo allowed || echo denied")
        }
        "ir" => format!(
            "tryCatch({{cat('import os\\n', file = '{path}', append = TRUE); cat('allowed\\n')}}, error = function(e) cat('denied\\n'), warning = function(w) cat('denied\\n'))"
        ),
        _ => super::denied(&format!("open({path:?}, 'a').write('import os\\n')")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_kernel_reads_no_other_kernels_key_and_rewrites_no_helper() {
    let server = Server::start().await;
    server.create_session("plain").await;
    let plain_cf = connection_file(&server, "plain").await;
    let (shared_helper, pristine) = helper(&server, "plain").await;
    let neighbour_dir = tempfile::tempdir().unwrap();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "neighbour", "sandbox": "workspace", "cwd": neighbour_dir.path()}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let neighbour_cf = connection_file(&server, "neighbour").await;
    let (own_helper, own_text) = helper(&server, "neighbour").await;
    assert_ne!(
        own_helper, shared_helper,
        "a sandboxed kernel has a copy of its own"
    );
    assert_eq!(own_text, pristine);
    let journals = server.workdir().join("state/kernel-mcp/history");
    assert!(journals.is_dir(), "{journals:?}");
    let journal = std::fs::read_dir(&journals)
        .unwrap()
        .flatten()
        .next()
        .expect("a journal")
        .path();

    let project = tempfile::tempdir().unwrap();
    for kernel in ["python3", "bash", "ir"] {
        if kernel != "python3" {
            crate::common::kernels::require_kernel(&server, kernel).await;
        }
        let r = server
            .call(
                "create_session",
                json!({"session_id": "box", "kernel": kernel, "sandbox": "workspace", "cwd": project.path()}),
            )
            .await;
        assert!(!is_error(&r), "{kernel}: {}", dump(&r));
        for secret in [&plain_cf, &neighbour_cf, &journal] {
            let v = server
                .exec("box", &read_code(kernel, &secret.display().to_string()))
                .await;
            let seen = crate::common::kernels::rendered(&v);
            assert!(
                seen.contains("denied") && !seen.contains("\"key\""),
                "{kernel} read {secret:?}: {v}"
            );
        }
        for target in [&shared_helper, &own_helper] {
            let v = server
                .exec("box", &append_code(kernel, &target.display().to_string()))
                .await;
            let seen = crate::common::kernels::rendered(&v);
            assert!(seen.contains("denied"), "{kernel} wrote {target:?}: {v}");
        }
        server.destroy("box").await;
    }
    // Python: not even its own helper copy or connection file is writable; it reads its key.
    let r = server
        .call(
            "create_session",
            json!({"session_id": "box", "sandbox": "workspace", "cwd": project.path()}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let v = server
        .exec(
            "box",
            &super::denied("import kernel_mcp; open(kernel_mcp.__file__, 'a').write('x')"),
        )
        .await;
    assert_eq!(
        v["stdout"].as_str().unwrap_or_default().trim(),
        "denied",
        "{v}"
    );
    let own_cf = connection_file(&server, "box").await;
    let v = server
        .exec(
            "box",
            &format!(
                "import json; print(len(json.load(open({:?}))['key']))",
                own_cf.display().to_string()
            ),
        )
        .await;
    assert_eq!(v["stdout"].as_str().unwrap_or_default().trim(), "64", "{v}");
    server.destroy("box").await;

    // The helper unsandboxed kernels import is intact, and imports.
    assert_eq!(std::fs::read_to_string(&shared_helper).unwrap(), pristine);
    server.create_session("after").await;
    let (after, text) = helper(&server, "after").await;
    assert_eq!((after, text), (shared_helper, pristine));
    let v = server
        .exec("after", "from kernel_mcp import mcp; print(mcp.help())")
        .await;
    assert_eq!(status(&v), "ok", "{v}");
    for s in ["after", "neighbour", "plain"] {
        server.destroy(s).await;
    }
    server.shutdown().await;
}
