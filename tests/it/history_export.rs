//! `export_history` against the real binary and real ipykernel: the notebook passes
//! `nbformat.validate`, the script reproduces the state, and paths (relative to the session's
//! cwd, new parent directories, impossible ones) behave.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::common::history::*;
use crate::common::*;
use serde_json::json;

// ---------------------------------------------------------------- export

/// Session `s` (cwd `cwd`) with a print, an error and a matplotlib plot.
async fn print_error_plot(server: &Server, cwd: &Path) {
    create_session_with(server, json!({"session_id": "s", "cwd": cwd})).await;
    let p = exec_ok(server, "s", "print('hello from cell 1')").await;
    assert!(p["stdout"].as_str().unwrap_or("").contains("hello"), "{p}");
    let e = server.exec("s", "1 / 0").await;
    assert_eq!(status(&e), "error", "{e}");
    let plot = exec_ok(
        server,
        "s",
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
    )
    .await;
    assert!(
        plot.to_string().contains("image/png"),
        "the plot should produce an image: {plot}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notebook_export_passes_nbformat_validate_with_stream_error_and_image_outputs() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    print_error_plot(&server, cwd.path()).await;

    let path = cwd.path().join("session.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": path, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["entries"], 3, "{v}");
    assert_eq!(v["path"], json!(path), "{v}");
    assert_eq!(
        v["bytes"].as_u64(),
        std::fs::metadata(&path).ok().map(|m| m.len()),
        "{v}"
    );

    assert_valid_notebook(&path);
    let nb = read_json(&path);
    assert_eq!(nb["nbformat"], 4, "{nb}");
    assert!(nb["metadata"]["kernelspec"]["name"].is_string(), "{nb}");
    assert_eq!(nb["metadata"]["language_info"]["name"], "python", "{nb}");
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3, "{nb}");
    assert!(cells.iter().all(|c| c["cell_type"] == "code"), "{nb}");
    assert!(
        cells.iter().all(|c| c["execution_count"].is_i64()),
        "execution counts kept: {nb}"
    );
    let types = output_types(&nb);
    assert!(types[0].contains(&"stream".to_string()), "{types:?}");
    let stream = cells[0]["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["output_type"] == "stream")
        .unwrap();
    assert_eq!(stream["name"], "stdout", "{stream}");
    assert!(
        stream["text"].to_string().contains("hello from cell 1"),
        "{stream}"
    );
    assert!(types[1].contains(&"error".to_string()), "{types:?}");
    let error = cells[1]["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["output_type"] == "error")
        .unwrap();
    assert_eq!(error["ename"], "ZeroDivisionError", "{error}");
    assert!(error["traceback"].is_array(), "{error}");
    let image = cells[2]["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["output_type"] == "display_data" && o["data"]["image/png"].is_string());
    assert!(
        image.is_some(),
        "the plot cell has a display_data image/png: {types:?}\n{}",
        cells[2]
    );

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_export_runs_with_python_and_reproduces_the_state() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    create_session_with(
        &server,
        json!({"session_id": "scripted", "cwd": cwd.path()}),
    )
    .await;
    exec_ok(&server, "scripted", "a = 10").await;
    exec_ok(&server, "scripted", "b = a * 2").await;
    exec_ok(&server, "scripted", "print('b is', b)").await;
    let e = server.exec("scripted", "1 / 0").await;
    assert_eq!(status(&e), "error", "{e}");
    exec_ok(&server, "scripted", "%pwd").await;
    exec_ok(&server, "scripted", "names = [a, b]").await;

    // No extension: the kernel's language_info.file_extension (.py) is added.
    let r = server
        .call(
            "export_history",
            json!({"session_id": "scripted", "path": cwd.path().join("state"), "format": "script"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    let v = structured(&r);
    let path = PathBuf::from(v["path"].as_str().expect("path"));
    assert_eq!(path, cwd.path().join("state.py"), "{v}");
    let script = std::fs::read_to_string(&path).expect("read the script");
    let header: Vec<&str> = script.lines().take_while(|l| l.starts_with('#')).collect();
    let header = header.join("\n");
    assert!(
        header.contains("scripted") && header.contains("python3"),
        "a comment header naming the session and kernel:\n{script}"
    );

    let check = "import runpy, sys\n\
                 g = runpy.run_path(sys.argv[1])\n\
                 assert (g['a'], g['b'], g['names']) == (10, 20, [10, 20]), g\n\
                 print('STATE', g['a'], g['b'])";
    let (ok, out, err) = run_python(
        &[OsStr::new("-c"), OsStr::new(check), path.as_os_str()],
        cwd.path(),
    );
    assert!(
        ok,
        "the exported script does not run/reproduce the state:\nstdout: {out}\nstderr: {err}\n--- script ---\n{script}"
    );
    assert!(out.contains("b is 20"), "{out}");
    assert!(out.contains("STATE 10 20"), "{out}");

    // And plainly, `python <file>`.
    let (ok, out, err) = run_python(&[path.as_os_str()], cwd.path());
    assert!(
        ok && out.contains("b is 20"),
        "python {}: {out}\n{err}",
        path.display()
    );

    server.destroy("scripted").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_export_path_resolves_against_the_session_cwd() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    create_session_with(&server, json!({"session_id": "s", "cwd": cwd.path()})).await;
    exec_ok(&server, "s", "print('rel')").await;

    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": "rel.txt", "format": "transcript"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    let want = cwd.path().join("rel.txt");
    assert_eq!(structured(&r)["path"], json!(want), "{}", structured(&r));
    let transcript = std::fs::read_to_string(&want).expect("transcript in the session cwd");
    assert!(transcript.contains("print('rel')"), "{transcript}");
    assert!(
        !server.workdir().join("rel.txt").exists(),
        "not in the server's cwd"
    );

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_creates_parent_directories() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    create_session_with(&server, json!({"session_id": "s", "cwd": cwd.path()})).await;
    exec_ok(&server, "s", "z = 3").await;

    let abs = cwd.path().join("a").join("b").join("c").join("nb.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": abs, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    assert!(abs.is_file(), "{} was not written", abs.display());
    assert_valid_notebook(&abs);

    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": "x/y/t.txt", "format": "transcript"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    assert!(cwd.path().join("x/y/t.txt").is_file(), "{}", dump(&r));

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_to_an_impossible_path_is_io_error_naming_the_path() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    exec_ok(&server, "s", "z = 3").await;

    let bad = "/proc/kernel-mcp-test/out/nb.ipynb";
    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": bad, "format": "notebook"}),
        )
        .await;
    assert_eq!(error_code(&r), "IO_ERROR", "{}", dump(&r));
    let msg = structured(&r)["message"].as_str().unwrap_or("").to_string();
    assert!(msg.contains(bad), "the message names the path: {msg}");

    server.destroy("s").await;
    server.shutdown().await;
}
