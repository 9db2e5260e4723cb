//! Door 3 of the attacker's checklist (docs/sandbox.md): what the server writes or reads for
//! a sandboxed session acts with the session's rights. `export_history` (the
//! `usercustomize.py` attack: a clean cell exported where the user's next `python3` runs it),
//! `checkpoint_session`, `restore_session`, `mirror_notebook`, `create_session(notebook=…)`
//! and `execute_file` (whose file the server reads for bash and R) are refused outside the
//! session's cwd — also through a symbolic link the kernel planted, and after the session
//! ended (its journal keeps its grants) — naming the sandbox and the path; a `read-only`
//! session gets nothing written; inside the cwd they work.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{Value, json};

/// A directory of the home, outside every session's cwd, removed on drop.
struct HomeDir(PathBuf);

impl HomeDir {
    fn new() -> HomeDir {
        let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
        let d = home.join(format!("kernel-mcp-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir(&d).unwrap();
        HomeDir(d)
    }
}

impl Drop for HomeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Assert `tool(args)` is refused with `INVALID_ARGUMENT` naming the sandbox and `path`.
async fn refused(server: &Server, tool: &str, args: Value, path: &Path) {
    let r = server.call(tool, args.clone()).await;
    assert!(is_error(&r), "{tool}({args}) was done: {}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["error_code"], "INVALID_ARGUMENT", "{tool}({args}): {v}");
    let m = text(&r);
    assert!(
        m.contains("sandbox") && m.contains(&path.display().to_string()),
        "{tool}({args}) says which grant and which path: {m}"
    );
}

async fn create(server: &Server, args: Value) {
    let r = server.call("create_session", args.clone()).await;
    assert!(!is_error(&r), "{args}: {}", dump(&r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_write_and_read_for_a_sandboxed_python_session_only_inside_its_cwd() {
    let server = Server::start().await;
    let project = tempfile::tempdir().unwrap();
    let home = HomeDir::new();
    create(
        &server,
        json!({"session_id": "ws", "sandbox": "workspace", "cwd": project.path()}),
    )
    .await;
    let v = server
        .exec(
            "ws",
            &format!(
                "import os\nos.symlink({h:?}, 'to_home')\nos.symlink({h:?} + '/usercustomize.py', 'usercustomize.py')\nx = 42\nprint('clean')",
                h = home.0.display().to_string()
            ),
        )
        .await;
    assert_eq!(status(&v), "ok", "{v}");
    let target = home.0.join("usercustomize.py");
    let export = |path: &str| json!({"session_id": "ws", "path": path, "format": "script"});
    refused(
        &server,
        "export_history",
        export(&target.display().to_string()),
        &target,
    )
    .await;
    let via = project.path().join("to_home/usercustomize.py");
    refused(
        &server,
        "export_history",
        export("to_home/usercustomize.py"),
        &via,
    )
    .await;
    refused(
        &server,
        "export_history",
        export("usercustomize.py"),
        &project.path().join("usercustomize.py"),
    )
    .await;
    let cp = home.0.join("cp.json");
    let at = |path: &Path| json!({"session_id": "ws", "path": path});
    refused(&server, "checkpoint_session", at(&cp), &cp).await;
    refused(
        &server,
        "mirror_notebook",
        at(&home.0.join("n.ipynb")),
        &home.0.join("n.ipynb"),
    )
    .await;
    // A checkpoint another (unsandboxed) session wrote outside: not read for this one.
    create(&server, json!({"session_id": "free", "cwd": home.0})).await;
    server.exec("free", "secret = 'from outside'").await;
    let r = server
        .call(
            "checkpoint_session",
            json!({"session_id": "free", "path": cp}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    refused(&server, "restore_session", at(&cp), &cp).await;
    std::fs::write(home.0.join("run.py"), "print('ran outside')").unwrap();
    refused(
        &server,
        "execute_file",
        at(&home.0.join("run.py")),
        &home.0.join("run.py"),
    )
    .await;
    let nb = home.0.join("live.ipynb");
    refused(
        &server,
        "create_session",
        json!({"session_id": "nb", "sandbox": "workspace", "cwd": project.path(), "notebook": nb}),
        &nb,
    )
    .await;
    assert!(
        std::fs::read_dir(&home.0).unwrap().count() == 2,
        "nothing but cp.json and run.py was written in {:?}",
        home.0
    );

    // Inside the cwd all of it works.
    for (tool, args) in [
        ("export_history", export("out/history.py")),
        ("checkpoint_session", at(Path::new("cp.json"))),
        ("restore_session", at(Path::new("cp.json"))),
        ("mirror_notebook", at(Path::new("live.ipynb"))),
    ] {
        let r = server.call(tool, args.clone()).await;
        assert!(!is_error(&r), "{tool}({args}): {}", dump(&r));
    }
    std::fs::write(project.path().join("run.py"), "print('ran inside')").unwrap();
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "ws", "path": "run.py"}),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "ran inside\n", "{}", dump(&r));
    assert!(project.path().join("out/history.py").is_file());

    // After the session ended, its journal keeps its grants.
    server.destroy("ws").await;
    refused(
        &server,
        "export_history",
        export(&target.display().to_string()),
        &target,
    )
    .await;
    let r = server.call("export_history", export("after.py")).await;
    assert!(!is_error(&r), "{}", dump(&r));
    assert!(
        project.path().join("after.py").is_file(),
        "relative to its old cwd"
    );
    assert!(!target.exists());
    server.destroy("free").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_r_and_read_only_sessions_are_held_to_their_grants_too() {
    let server = Server::start().await;
    let home = HomeDir::new();
    let planted = home.0.join("secret.sh");
    std::fs::write(&planted, "echo top secret\n").unwrap();
    std::fs::write(home.0.join("secret.r"), "cat('top secret')\n").unwrap();
    for (kernel, file) in [("bash", "secret.sh"), ("ir", "secret.r")] {
        crate::common::kernels::require_kernel(&server, kernel).await;
        let project = tempfile::tempdir().unwrap();
        create(
            &server,
            json!({"session_id": kernel, "kernel": kernel, "sandbox": "workspace", "cwd": project.path()}),
        )
        .await;
        let secret = home.0.join(file);
        // The server would read the file and send it as code: refused before it reads.
        refused(
            &server,
            "execute_file",
            json!({"session_id": kernel, "path": secret}),
            &secret,
        )
        .await;
        server.exec(kernel, "1").await;
        let out = home.0.join("x.txt");
        refused(
            &server,
            "export_history",
            json!({"session_id": kernel, "path": out, "format": "transcript"}),
            &out,
        )
        .await;
        server.destroy(kernel).await;
    }
    let project = tempfile::tempdir().unwrap();
    create(
        &server,
        json!({"session_id": "ro", "sandbox": "read-only", "cwd": project.path()}),
    )
    .await;
    server.exec("ro", "y = 1").await;
    let inside = project.path().join("h.py");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "ro", "path": "h.py", "format": "script"}),
        )
        .await;
    assert_eq!(
        structured(&r)["error_code"],
        "INVALID_ARGUMENT",
        "{}",
        dump(&r)
    );
    assert!(text(&r).contains("'read-only' sandbox"), "{}", text(&r));
    assert!(!inside.exists());
    server.destroy("ro").await;
    server.shutdown().await;
}
