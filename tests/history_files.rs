//! Issue 4 acceptance against the real binary and real ipykernel: history (Python slices,
//! delete, text numbered from 1), rerun, export (notebook, script, transcript paths), the
//! on-disk journal surviving SIGKILL, execute_file, interpreters (`python=`, a cwd `.venv`),
//! install_packages, complete/inspect and get_session(include_variables).
//!
//! Every server gets its own temp `XDG_STATE_HOME` ([`StateHome`]), so journals neither pile
//! up in `~` nor leak between tests.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::history::*;
use common::*;
use serde_json::{Value, json};

/// Five blocks `b0 = 0` … `b4 = 4` in session `s`.
const FIVE: [&str; 5] = ["b0 = 0", "b1 = 1", "b2 = 2", "b3 = 3", "b4 = 4"];

async fn five_blocks(server: &Server, session: &str) {
    server.create_session(session).await;
    for code in FIVE {
        exec_ok(server, session, code).await;
    }
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Lines of a history text rendering that start a block (`[n] …`).
fn block_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('['))
        .map(String::from)
        .collect()
}

// ---------------------------------------------------------------- history slices

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_history_start_minus_two_returns_the_last_two() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let (h, _) = history(&server, "s", Some(-2), None).await;
    assert_eq!(codes(&h), ["b3 = 3", "b4 = 4"], "{h}");
    assert_eq!(indices(&h), [3, 4], "{h}");
    assert_eq!(h["total"], 5, "{h}");

    let (all, _) = history(&server, "s", None, None).await;
    assert_eq!(codes(&all), FIVE, "{all}");
    for e in all["entries"].as_array().unwrap() {
        assert_eq!(e["status"], "ok", "{e}");
        assert!(e["run_id"].as_str().is_some_and(|r| !r.is_empty()), "{e}");
        assert!(e["execution_count"].as_i64().is_some(), "{e}");
    }

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_history_start_one_end_minus_one_returns_three() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let (h, _) = history(&server, "s", Some(1), Some(-1)).await;
    assert_eq!(codes(&h), ["b1 = 1", "b2 = 2", "b3 = 3"], "{h}");
    assert_eq!(indices(&h), [1, 2, 3], "{h}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_history_start_zero_removes_only_the_first() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let r = server
        .call("delete_history", json!({"session_id": "s", "start": 0}))
        .await;
    assert!(!is_error(&r), "delete_history: {}", dump(&r));
    assert_eq!(structured(&r)["deleted"], 1, "{}", dump(&r));

    let (h, _) = history(&server, "s", None, None).await;
    assert_eq!(h["total"], 4, "{h}");
    assert_eq!(codes(&h), ["b1 = 1", "b2 = 2", "b3 = 3", "b4 = 4"], "{h}");
    assert_eq!(indices(&h), [0, 1, 2, 3], "{h}");
    // The kernel's state is untouched.
    let r = exec_ok(&server, "s", "b0").await;
    assert_eq!(r["result"], "0", "{r}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_indices_out_of_range_clamp_without_error() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let cases: [(Option<i64>, Option<i64>, &[i64]); 6] = [
        (Some(-100), None, &[0, 1, 2, 3, 4]),
        (Some(3), Some(100), &[3, 4]),
        (Some(10), None, &[]),
        (Some(-100), Some(-50), &[]),
        (None, Some(-100), &[]),
        (Some(4), Some(2), &[]),
    ];
    for (start, end, want) in cases {
        let (h, text) = history(&server, "s", start, end).await;
        assert_eq!(indices(&h), want, "get_history({start:?}, {end:?}): {h}");
        assert_eq!(h["total"], 5, "{h}");
        if want.is_empty() {
            assert!(!text.is_empty(), "empty range still says something");
        }
    }

    // delete_history clamps too: nothing at 50, and [3, 100) is [3, 5).
    let r = server
        .call("delete_history", json!({"session_id": "s", "start": 50}))
        .await;
    assert!(!is_error(&r), "delete_history(50): {}", dump(&r));
    assert_eq!(structured(&r)["deleted"], 0, "{}", dump(&r));
    let r = server
        .call(
            "delete_history",
            json!({"session_id": "s", "start": 3, "end": 100}),
        )
        .await;
    assert!(!is_error(&r), "delete_history(3, 100): {}", dump(&r));
    assert_eq!(structured(&r)["deleted"], 2, "{}", dump(&r));
    let (h, _) = history(&server, "s", None, None).await;
    assert_eq!(codes(&h), ["b0 = 0", "b1 = 1", "b2 = 2"], "{h}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_text_numbers_blocks_from_one() {
    let state = StateHome::new();
    let server = state.start_server().await;
    five_blocks(&server, "s").await;

    let (_, text) = history(&server, "s", None, None).await;
    assert_eq!(
        block_lines(&text),
        [
            "[1] b0 = 0",
            "[2] b1 = 1",
            "[3] b2 = 2",
            "[4] b3 = 3",
            "[5] b4 = 4"
        ],
        "text rendering:\n{text}"
    );
    // A slice keeps the blocks' own numbers.
    let (_, text) = history(&server, "s", Some(-2), None).await;
    assert_eq!(
        block_lines(&text),
        ["[4] b3 = 3", "[5] b4 = 4"],
        "text rendering:\n{text}"
    );

    server.destroy("s").await;
    server.shutdown().await;
}

// ---------------------------------------------------------------- rerun

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_history_after_restart_rebuilds_state() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    exec_ok(&server, "s", "a = 10").await;
    exec_ok(&server, "s", "b = a * 2").await;

    let r = server
        .call("restart_session", json!({"session_id": "s"}))
        .await;
    assert!(!is_error(&r), "restart_session: {}", dump(&r));
    let gen_after_restart = structured(&r)["generation"].as_u64().unwrap_or(0);
    let gone = server
        .call(
            "execute",
            json!({"session_id": "s", "code": "'b' in globals()", "store_history": false}),
        )
        .await;
    assert_eq!(
        structured(&gone)["result"],
        "False",
        "b should be gone after the restart: {}",
        dump(&gone)
    );
    let (h, _) = history(&server, "s", None, None).await;
    assert_eq!(
        codes(&h),
        ["a = 10", "b = a * 2"],
        "history survives restart: {h}"
    );

    let r = server
        .call(
            "rerun_history",
            json!({"session_id": "s", "start": 0, "end": 2, "restart": true}),
        )
        .await;
    let v = structured(&r);
    assert!(!is_error(&r), "rerun_history: {}", dump(&r));
    assert!(v["stopped_at"].is_null(), "{v}");
    let runs = v["runs"].as_array().expect("runs[]");
    assert_eq!(runs.len(), 2, "{v}");
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{v}");
    assert_eq!(runs[0]["index"], 0, "{v}");
    assert_eq!(runs[1]["index"], 1, "{v}");

    let b = exec_ok(&server, "s", "b").await;
    assert_eq!(b["result"], "20", "{b}");
    assert!(
        b["generation"].as_u64().unwrap_or(0) > gen_after_restart,
        "restart=true restarts again: {b} (generation after restart_session: {gen_after_restart})"
    );

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_history_stops_at_the_failing_block_and_names_its_index() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    exec_ok(&server, "s", "x = 1").await;
    let failing = server.exec("s", "raise ValueError('boom')").await;
    assert_eq!(status(&failing), "error", "{failing}");
    exec_ok(&server, "s", "y = 2").await;

    let r = server
        .call("rerun_history", json!({"session_id": "s"}))
        .await;
    let v = structured(&r);
    assert_eq!(v["stopped_at"], 1, "rerun_history: {}", dump(&r));
    let runs = v["runs"].as_array().expect("runs[]");
    assert_eq!(runs.len(), 2, "the block after the failure is not run: {v}");
    assert_eq!(runs[0]["status"], "ok", "{v}");
    assert_eq!(runs[1]["status"], "error", "{v}");
    assert!(
        runs[1]["error"].as_str().unwrap_or("").contains("boom"),
        "{v}"
    );
    assert!(
        text(&r).contains("index 1"),
        "text names the index: {}",
        text(&r)
    );

    let check = server
        .call(
            "execute",
            json!({"session_id": "s", "code": "(x, 'y' in globals())", "store_history": false}),
        )
        .await;
    assert_eq!(
        structured(&check)["result"],
        "(1, False)",
        "{}",
        dump(&check)
    );

    server.destroy("s").await;
    server.shutdown().await;
}

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

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{text}", path.display()))
}

/// The notebook's outputs, per cell, as `output_type` strings.
fn output_types(nb: &Value) -> Vec<Vec<String>> {
    nb["cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no cells: {nb}"))
        .iter()
        .map(|c| {
            c["outputs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| o["output_type"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .collect()
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

// ---------------------------------------------------------------- journal / SIGKILL

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_of_a_sigkilled_server_is_readable_and_exportable_by_the_next_server() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("crashy").await;
    exec_ok(&server, "crashy", "print('before the crash')").await;
    let e = server.exec("crashy", "1 / 0").await;
    assert_eq!(status(&e), "error", "{e}");
    exec_ok(&server, "crashy", "a = 10\na * 2").await;
    kill_server(server).await;

    assert!(
        !state.journals().is_empty(),
        "no journal under {}",
        state.journal_dir().display()
    );

    let server = state.start_server().await;
    let (h, text) = history(&server, "crashy", None, None).await;
    assert_eq!(
        codes(&h),
        ["print('before the crash')", "1 / 0", "a = 10\na * 2"],
        "{h}"
    );
    let entries = h["entries"].as_array().unwrap();
    assert_eq!(entries[0]["status"], "ok", "{h}");
    assert_eq!(entries[1]["status"], "error", "{h}");
    assert!(
        text.contains("before the crash") && text.contains("ZeroDivisionError"),
        "outputs kept:\n{text}"
    );
    assert!(text.contains("[3] a = 10"), "{text}");

    let out = tmpdir();
    let path = out.path().join("crashy.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "crashy", "path": path, "format": "notebook"}),
        )
        .await;
    assert!(
        !is_error(&r),
        "export_history from the journal: {}",
        dump(&r)
    );
    assert_eq!(structured(&r)["entries"], 3, "{}", dump(&r));
    assert_valid_notebook(&path);
    let nb = read_json(&path);
    let types = output_types(&nb);
    assert!(types[0].contains(&"stream".to_string()), "{types:?}");
    assert!(types[1].contains(&"error".to_string()), "{types:?}");
    assert!(
        types[2].contains(&"execute_result".to_string()),
        "{types:?}"
    );

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernels_of_a_sigkilled_server_die_within_ten_seconds() {
    if common::shared_mode() {
        eprintln!(
            "skipped in shared mode: the kernels belong to the service, which outlives a killed relay on purpose"
        );
        return;
    }
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("k").await;
    exec_ok(&server, "k", "1").await;
    let kernel = server.kernel_pid("k").await;
    let all = descendants(server.pid());
    assert!(
        all.contains(&kernel),
        "kernel {kernel} under the server: {all:?}"
    );
    kill_server(server).await;

    let gone = wait_until(Duration::from_secs(10), || {
        all.iter().all(|&p| !pid_alive(p))
    })
    .await;
    let left: Vec<u32> = all.iter().copied().filter(|&p| pid_alive(p)).collect();
    // Do not leave them behind even when the test fails.
    for &p in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        gone,
        "processes of the killed server still alive after 10 s: {left:?} (kernel {kernel})"
    );
}

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
        eprintln!(
            "SKIPPED: no `bash` kernelspec (`make kernels` installs it); \
             install_packages_rejects_option_like_packages covers the validation instead"
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
