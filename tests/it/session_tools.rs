//! Session tools against the real binary and real ipykernel: execute_file (argv, `__file__`,
//! tracebacks, relative paths), interpreters (`python=`, a cwd `.venv`), install_packages,
//! complete/inspect, get_session(include_variables), and rich displays as text.

use std::path::Path;

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- execute_file

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

/// `create_session(env=…)` values a process cannot have, and variables kernel-mcp sets
/// itself, are refused before any kernel starts, naming the variable (not a start failure
/// with a bare system error, nor a value silently replaced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_values_a_process_cannot_have_or_that_kernel_mcp_sets_are_invalid_arguments() {
    let server = Server::start().await;
    let huge = "x".repeat(200 * 1024);
    for (name, value, says) in [
        ("HAS_NUL", "a\u{0}b", "NUL byte"),
        ("HUGE", huge.as_str(), "bytes"),
        // Set by kernel-mcp itself: the caller's value would be replaced without a word.
        ("KERNEL_MCP_ENDPOINT", "/tmp/x", "set by kernel-mcp"),
        ("JPY_PARENT_PID", "1", "set by kernel-mcp"),
    ] {
        let r = server
            .call(
                "create_session",
                json!({"session_id": "e", "env": {name: value}}),
            )
            .await;
        assert!(is_error(&r), "{name}: {}", dump(&r));
        assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
        assert!(
            text(&r).contains(name) && text(&r).contains(says),
            "{}",
            text(&r)
        );
    }
    let listed = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(
        listed["sessions"],
        json!([]),
        "no session was made: {listed}"
    );
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

// ---------------------------------------------------------------- interpreters

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_venv_without_ipykernel_fails_with_the_install_command() {
    let dir = tmpdir();
    let venv = dir.path().join("bare");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv --without-pip failed");

    let state = StateHome::new();
    let server = state.start_server().await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "bare", "python": venv}),
        )
        .await;
    assert_eq!(error_code(&r), "KERNEL_START_FAILED", "{}", dump(&r));
    let want = format!(
        "{} -m pip install ipykernel",
        venv.join("bin").join("python").display()
    );
    let msg = structured(&r)["message"].as_str().unwrap_or("").to_string();
    assert!(
        msg.contains(&want),
        "message should contain `{want}`: {msg}"
    );
    // No silent fallback: no session was created.
    let list = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_dot_venv_with_ipykernel_is_preferred_without_python_or_kernel() {
    let cwd = tmpdir();
    let link = cwd.path().join(".venv");
    std::os::unix::fs::symlink(venv(), &link).expect("symlink .venv");

    let state = StateHome::new();
    let server = state.start_server().await;
    let info = create_session_with(&server, json!({"session_id": "v", "cwd": cwd.path()})).await;
    let v = exec_ok(
        &server,
        "v",
        "import sys, json; print(json.dumps([sys.prefix, sys.executable]))",
    )
    .await;
    let seen: Vec<String> =
        serde_json::from_str(v["stdout"].as_str().unwrap_or("").trim()).expect("json line");
    eprintln!(
        "cwd .venv session: display_name={} sys.prefix={} sys.executable={} (link {} -> {})",
        info["display_name"],
        seen[0],
        seen[1],
        link.display(),
        venv().display()
    );
    let resolved = std::fs::canonicalize(venv()).unwrap();
    let prefix_ok = Path::new(&seen[0]) == link || Path::new(&seen[0]) == resolved;
    assert!(
        prefix_ok,
        "sys.prefix {} is neither {} nor {}",
        seen[0],
        link.display(),
        resolved.display()
    );
    // The interpreter is the one under the cwd's .venv (the default python3 kernelspec would
    // also have the project .venv as prefix, so this is what tells them apart).
    assert!(
        Path::new(&seen[1]).starts_with(&link)
            || info["display_name"]
                .as_str()
                .unwrap_or("")
                .contains(&link.display().to_string()),
        "the kernel does not run {}/bin/python: sys.executable={} display_name={}",
        link.display(),
        seen[1],
        info["display_name"]
    );

    server.destroy("v").await;
    server.shutdown().await;
}

// ---------------------------------------------------------------- packages

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

// ---------------------------------------------------------------- introspection

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_import_o_includes_os() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("c").await;

    let r = server
        .call(
            "complete",
            json!({"session_id": "c", "code": "import o", "cursor_pos": 8}),
        )
        .await;
    assert!(!is_error(&r), "complete: {}", dump(&r));
    let v = structured(&r);
    let matches: Vec<&str> = v["matches"]
        .as_array()
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(matches.contains(&"os"), "{v}");
    assert_eq!(v["cursor_end"], 8, "{v}");
    assert_eq!(v["cursor_start"], 7, "{v}");

    server.destroy("c").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_len_finds_the_docstring() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("c").await;

    let r = server
        .call("inspect", json!({"session_id": "c", "code": "len"}))
        .await;
    assert!(!is_error(&r), "inspect: {}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["found"], true, "{v}");
    let t = v["text"].as_str().unwrap_or("");
    assert!(t.contains("Return the number of items"), "{v}");
    assert!(!t.contains('\u{1b}'), "escapes stripped: {t:?}");

    server.destroy("c").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_session_variables_list_names_and_types_without_calling_user_repr() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("v").await;
    exec_ok(
        &server,
        "v",
        "x = 5; s = 'hi'\nclass E:\n    def __repr__(self): raise RuntimeError('no')\ne = E()",
    )
    .await;

    let r = server
        .call(
            "get_session",
            json!({"session_id": "v", "include_variables": true}),
        )
        .await;
    assert!(!is_error(&r), "get_session: {}", dump(&r));
    let v = structured(&r);
    assert!(v["variables_note"].is_null(), "{v}");
    let vars = v["variables"]
        .as_array()
        .unwrap_or_else(|| panic!("no variables[]: {v}"));
    let find = |name: &str| {
        vars.iter()
            .find(|x| x["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {v}"))
            .clone()
    };
    let x = find("x");
    assert_eq!(x["type"], "int", "{x}");
    assert_eq!(x["summary"], "5", "{x}");
    let s = find("s");
    assert_eq!(s["type"], "str", "{s}");
    assert!(s["summary"].as_str().unwrap_or("").contains("hi"), "{s}");
    let e = find("e");
    assert_eq!(e["type"], "E", "{e}");
    assert!(
        !e.to_string().contains("RuntimeError"),
        "user __repr__ not called: {e}"
    );
    assert!(text(&r).contains("x: int 5"), "{}", text(&r));
    // The session is still fine afterwards.
    let after = exec_ok(&server, "v", "x + 1").await;
    assert_eq!(after["result"], "6", "{after}");

    server.destroy("v").await;
    server.shutdown().await;
}

/// `display(Markdown(...))`, `display(JSON(...))` and `display(Latex(...))` read as their
/// markdown, pretty JSON and LaTeX (not `<IPython.core.display.… object>`), and the notebook
/// export keeps every MIME type the kernel sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rich_displays_read_as_their_richest_form_and_export_whole() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    create_session_with(&server, json!({"session_id": "rich", "cwd": cwd.path()})).await;
    let v = exec_ok(
        &server,
        "rich",
        "from IPython.display import display, Markdown, JSON, Latex\n\
         display(Markdown('# hi'))\n\
         display(JSON({'a': [1, 2]}))\n\
         display(Latex(r'$x^2$'))",
    )
    .await;
    let texts: Vec<&str> = v["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("no outputs: {v}"))
        .iter()
        .map(|o| o["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        texts,
        ["# hi", "{\n  \"a\": [\n    1,\n    2\n  ]\n}", "$x^2$"],
        "{v}"
    );

    let path = cwd.path().join("rich.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "rich", "path": path, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    assert_valid_notebook(&path);
    let nb = read_json(&path);
    let outputs = nb["cells"][0]["outputs"].as_array().unwrap();
    let keys = |i: usize| -> Vec<&str> {
        let mut k: Vec<&str> = outputs[i]["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(0), ["text/markdown", "text/plain"], "{nb}");
    assert_eq!(keys(1), ["application/json", "text/plain"], "{nb}");
    assert_eq!(keys(2), ["text/latex", "text/plain"], "{nb}");
    assert_eq!(outputs[1]["data"]["application/json"], json!({"a": [1, 2]}));
    assert_eq!(
        outputs[0]["data"]["text/plain"], "<IPython.core.display.Markdown object>",
        "the bundle is kept as sent: {nb}"
    );

    server.destroy("rich").await;
    server.shutdown().await;
}
