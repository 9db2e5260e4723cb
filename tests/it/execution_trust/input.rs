//! `input()` in a run: it returns `awaiting_input` with the prompt and `send_input` answers
//! it, a `stdin` list answers several calls up front, and `send_input` on a finished run is
//! `NOT_AWAITING_INPUT`.

use std::time::{Duration, Instant};

use super::{error_code, run, run_id};
use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_returns_awaiting_input_with_the_prompt_and_send_input_answers_it() {
    let server = Server::start().await;
    server.create_session("in").await;

    let t0 = Instant::now();
    let (_, v) = run(
        &server,
        json!({"session_id": "in", "code": "name = input('name? ')\nprint('hello', name)"}),
    )
    .await;
    let took = t0.elapsed();
    eprintln!("input() returned after {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(status(&v), "awaiting_input", "{v}");
    assert_eq!(v["prompt"]["text"], "name? ", "{v}");
    assert_eq!(v["prompt"]["password"], false, "{v}");

    let r = server
        .call("send_input", json!({"run_id": run_id(&v), "value": "Ada"}))
        .await;
    let answered = structured(&r);
    assert_eq!(status(&answered), "ok", "{answered}");
    assert!(
        answered["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("hello Ada"),
        "{answered}"
    );

    server.destroy("in").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_list_answers_two_input_calls() {
    let server = Server::start().await;
    server.create_session("in2").await;

    let (_, v) = run(
        &server,
        json!({
            "session_id": "in2",
            "code": "a = input('a? ')\nb = input('b? ')\nprint(a + '-' + b)",
            "stdin": ["x", "y"],
        }),
    )
    .await;
    assert_eq!(status(&v), "ok", "{v}");
    assert!(
        v["stdout"].as_str().unwrap_or("").contains("x-y"),
        "{}",
        v["stdout"]
    );

    server.destroy("in2").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_input_on_a_finished_run_is_not_awaiting_input() {
    let server = Server::start().await;
    server.create_session("in3").await;

    let done = server.exec("in3", "1+1").await;
    assert_eq!(status(&done), "ok", "{done}");
    let r = server
        .call("send_input", json!({"run_id": run_id(&done), "value": "x"}))
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(error_code(&v), "NOT_AWAITING_INPUT", "{v}");

    server.destroy("in3").await;
    server.shutdown().await;
}
