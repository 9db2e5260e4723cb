//! `execute_file`: the file sees exactly the argv given and its own `__file__`, tracebacks
//! name the real file, a relative path resolves against the session's cwd, a file over
//! `execute`'s code size limit runs, a file in another kernel's language is refused, and
//! the file's variables stay in the session.

use std::path::Path;

use crate::common::history::*;
use crate::common::*;
use serde_json::json;

async fn file_session(server: &Server, cwd: &Path) {
    create_session_with(server, json!({"session_id": "f", "cwd": cwd})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_sees_exactly_the_argv_given() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    let file = cwd.path().join("args.py");
    std::fs::write(
        &file,
        "import sys\nprint(sys.argv[1:])\nprint(sys.argv[0])\n",
    )
    .unwrap();
    file_session(&server, cwd.path()).await;

    let r = server
        .call(
            "execute_file",
            json!({"session_id": "f", "path": file, "argv": ["a b", "c"]}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", dump(&r));
    let stdout = v["stdout"].as_str().unwrap_or("");
    assert_eq!(stdout, format!("['a b', 'c']\n{}\n", file.display()), "{v}");

    server.destroy("f").await;
    server.shutdown().await;
}

/// A local Python kernel reads the file itself, so the 1 MiB code limit of `execute` is no
/// limit here (the advice of `execute`'s own limit error leads to this call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_runs_a_python_file_over_the_code_size_limit() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    let file = cwd.path().join("big.py");
    let padding = format!("# {}\n", "x".repeat(1000)).repeat(3000); // 3 MB of comments
    std::fs::write(
        &file,
        format!("{padding}print('ran', len(open(__file__).read()))\n"),
    )
    .unwrap();
    file_session(&server, cwd.path()).await;
    let r = server
        .call("execute_file", json!({"session_id": "f", "path": "big.py"}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", dump(&r));
    let size = std::fs::metadata(&file).unwrap().len();
    assert_eq!(v["stdout"], format!("ran {size}\n"), "{v}");
    server.destroy("f").await;
    server.shutdown().await;
}

/// A Python session runs a file of any name, except one named for another kernel's language
/// (an R script would fail confusingly as Python).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_refuses_another_languages_file_in_python_and_runs_any_other_name() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    std::fs::write(cwd.path().join("analysis.R"), "x <- c(1, 2)\nprint(x)\n").unwrap();
    std::fs::write(cwd.path().join("notes.txt"), "print('from txt')\n").unwrap();
    file_session(&server, cwd.path()).await;
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "f", "path": "analysis.R"}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    assert!(text(&r).contains("of its own language"), "{}", text(&r));
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "f", "path": "notes.txt"}),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "from txt\n", "{}", dump(&r));
    server.destroy("f").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_sets_dunder_file_and_tracebacks_name_the_real_file() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    let file = cwd.path().join("boom.py");
    std::fs::write(
        &file,
        "print(__file__)\n\ndef explode():\n    raise ValueError('from the file')\n\nexplode()\n",
    )
    .unwrap();
    file_session(&server, cwd.path()).await;

    let r = server
        .call("execute_file", json!({"session_id": "f", "path": file}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "error", "{}", dump(&r));
    assert_eq!(v["stdout"], format!("{}\n", file.display()), "{v}");
    assert_eq!(ename(&v), "ValueError", "{v}");
    let tb = v["error"]["traceback"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    assert!(
        tb.contains(&file.display().to_string()),
        "the traceback names {}:\n{tb}",
        file.display()
    );
    assert!(tb.contains("explode"), "{tb}");
    // __file__ does not leak into the session afterwards.
    let after = server
        .call(
            "execute",
            json!({"session_id": "f", "code": "'__file__' in globals()", "store_history": false}),
        )
        .await;
    assert_eq!(structured(&after)["result"], "False", "{}", dump(&after));

    server.destroy("f").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_relative_path_resolves_against_the_session_cwd() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    std::fs::create_dir_all(cwd.path().join("sub")).unwrap();
    std::fs::write(
        cwd.path().join("sub").join("rel.py"),
        "print('rel ok', __file__)\n",
    )
    .unwrap();
    file_session(&server, cwd.path()).await;

    let r = server
        .call(
            "execute_file",
            json!({"session_id": "f", "path": "sub/rel.py"}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", dump(&r));
    assert_eq!(
        v["stdout"],
        format!("rel ok {}\n", cwd.path().join("sub/rel.py").display()),
        "{v}"
    );

    // A missing file is an IO_ERROR naming the resolved path.
    let r = server
        .call(
            "execute_file",
            json!({"session_id": "f", "path": "nope.py"}),
        )
        .await;
    assert_eq!(error_code(&r), "IO_ERROR", "{}", dump(&r));
    assert!(
        text(&r).contains(&cwd.path().join("nope.py").display().to_string()),
        "{}",
        dump(&r)
    );

    server.destroy("f").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_file_variables_are_visible_in_the_next_execute() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    std::fs::write(cwd.path().join("defs.py"), "defined_by_file = 42\n").unwrap();
    file_session(&server, cwd.path()).await;

    let r = server
        .call(
            "execute_file",
            json!({"session_id": "f", "path": "defs.py"}),
        )
        .await;
    assert_eq!(status(&structured(&r)), "ok", "{}", dump(&r));
    let v = exec_ok(&server, "f", "defined_by_file * 2").await;
    assert_eq!(v["result"], "84", "{v}");

    server.destroy("f").await;
    server.shutdown().await;
}
