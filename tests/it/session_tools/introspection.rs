//! Asking the kernel about code and state without running the agent's code: `complete`,
//! `inspect`, and `get_session(include_variables)` listing names and types without calling
//! a user `__repr__`.

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

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
