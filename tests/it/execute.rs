//! `execute` against a real ipykernel: results, state, isolation, streams, errors, the
//! lazily created `default` session and images (issue 2, first acceptance bullet).

use crate::common::*;
use base64::Engine as _;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plus_one_returns_2_with_status_ok_and_execution_count_1() {
    let server = Server::start().await;
    server.create_session("calc").await;

    let r = server
        .call("execute", json!({"session_id": "calc", "code": "1+1"}))
        .await;
    let v = structured(&r);
    assert!(!is_error(&r), "1+1 should not be an error: {}", dump(&r));
    assert_eq!(v["result"], "2", "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["execution_count"], 1, "{v}");
    assert_eq!(v["session_id"], "calc", "{v}");
    assert_eq!(v["state_reset"], false, "{v}");
    assert!(v["run_id"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    assert!(text(&r).contains('2'), "text rendering: {}", text(&r));

    server.destroy("calc").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_persists_across_calls() {
    let server = Server::start().await;
    server.create_session("s").await;

    let first = server.exec("s", "x = 41").await;
    assert_eq!(status(&first), "ok", "{first}");
    assert!(
        first["result"].is_null(),
        "an assignment has no result: {first}"
    );
    let second = server.exec("s", "x + 1").await;
    assert_eq!(status(&second), "ok", "{second}");
    assert_eq!(second["result"], "42", "{second}");
    assert_eq!(second["execution_count"], 2, "{second}");
    assert_eq!(second["state_reset"], false, "{second}");

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_are_isolated() {
    let server = Server::start().await;
    let a = server.create_session("iso-a").await;
    let b = server.create_session("iso-b").await;
    assert_ne!(a["pid"], b["pid"], "two sessions share a kernel: {a} / {b}");

    let set = server.exec("iso-a", "only_in_a = 1").await;
    assert_eq!(status(&set), "ok", "{set}");

    let r = server
        .call(
            "execute",
            json!({"session_id": "iso-b", "code": "only_in_a"}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "error", "{v}");
    assert_eq!(ename(&v), "NameError", "{v}");
    assert!(
        is_error(&r),
        "a Python exception is isError: true: {}",
        dump(&r)
    );

    // And the variable is still there in its own session.
    let back = server.exec("iso-a", "only_in_a").await;
    assert_eq!(back["result"], "1", "{back}");

    server.destroy("iso-a").await;
    server.destroy("iso-b").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_are_separate() {
    let server = Server::start().await;
    server.create_session("streams").await;

    let v = server
        .exec(
            "streams",
            "print('out'); import sys; print('err', file=sys.stderr)",
        )
        .await;
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["stdout"].as_str().map(str::trim), Some("out"), "{v}");
    assert_eq!(v["stderr"].as_str().map(str::trim), Some("err"), "{v}");
    assert!(v["result"].is_null(), "print has no result: {v}");

    server.destroy("streams").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn division_by_zero_is_status_error_with_plain_text_traceback() {
    let server = Server::start().await;
    server.create_session("zde").await;

    let r = server
        .call("execute", json!({"session_id": "zde", "code": "1/0"}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "error", "{v}");
    assert_eq!(ename(&v), "ZeroDivisionError", "{v}");
    assert!(
        is_error(&r),
        "a Python exception is isError: true: {}",
        dump(&r)
    );
    let traceback = v["error"]["traceback"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!traceback.is_empty(), "traceback missing: {v}");
    assert!(
        text(&r).contains("ZeroDivisionError"),
        "the text rendering names the exception: {}",
        text(&r)
    );

    // No ANSI escape anywhere: neither raw ESC nor its JSON escape, in any block.
    let whole = dump(&r);
    assert!(
        !whole.contains('\x1b') && !whole.to_ascii_lowercase().contains("\\u001b"),
        "escape sequence in the result: {whole}"
    );
    assert!(!text(&r).contains('\x1b'), "escape in text: {:?}", text(&r));

    server.destroy("zde").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_without_session_id_uses_the_default_session() {
    let server = Server::start().await;

    let r = server.call("execute", json!({"code": "y = 3"})).await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(v["session_id"], "default", "{v}");

    let sessions = structured(&server.call("list_sessions", json!({})).await);
    let ids: Vec<&str> = sessions["sessions"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["session_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["default"], "{sessions}");

    // The second call reuses the same kernel: state is there.
    let again = structured(&server.call("execute", json!({"code": "y"})).await);
    assert_eq!(again["result"], "3", "{again}");
    assert_eq!(again["session_id"], "default", "{again}");

    server.destroy("default").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matplotlib_plot_returns_a_png_image_block() {
    let server = Server::start().await;
    server.create_session("plot").await;

    let code = "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()";
    let r = server
        .call("execute", json!({"session_id": "plot", "code": code}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", text(&r));

    let imgs = images(&r);
    assert_eq!(imgs.len(), 1, "expected one image block: {v}");
    let (mime, data) = &imgs[0];
    assert_eq!(mime, "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .expect("image data is base64");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG: {:?}",
        &png[..png.len().min(8)]
    );

    assert_eq!(v["outputs"][0]["image"]["mime"], "image/png", "{v}");
    assert_eq!(v["outputs"][0]["kind"], "display_data", "{v}");
    assert_eq!(
        v["outputs"][0]["image"]["bytes"].as_u64(),
        Some(png.len() as u64),
        "{v}"
    );

    server.destroy("plot").await;
    server.shutdown().await;
}
