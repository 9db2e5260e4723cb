//! Input requests: answered from the run's stdin list, then awaited (`awaiting_input`) until
//! `SendInput`; a settled receiver gets the run's record when it asks for input and when it
//! ends.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};
use serde_json::json;

#[tokio::test(start_paused = true)]
async fn input_requests_are_answered_from_the_stdin_list_then_awaited() {
    let (handle, _kernels, mut k1) = session(false).await;
    let req = ExecuteRequest {
        stdin: vec!["Ada".into()],
        ..ExecuteRequest::new("input(); input()")
    };
    let (run, mut rx) = submit(&handle, req).await;
    let exec = k1.next_execute().await;
    k1.emit(
        Channel::Stdin,
        &exec,
        "input_request",
        json!({"prompt": "name? ", "password": false}),
    );
    let (ch, answer) = k1.next_sent().await;
    assert_eq!((ch, answer.msg_type()), (Channel::Stdin, "input_reply"));
    assert_eq!(answer.content["value"], "Ada");
    k1.emit(
        Channel::Stdin,
        &exec,
        "input_request",
        json!({"prompt": "age? ", "password": false}),
    );
    assert_eq!(
        settle(&mut rx, Duration::from_secs(5)).await,
        RunStatus::AwaitingInput
    );
    let r = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert_eq!(r.prompt.map(|p| p.text).as_deref(), Some("age? "));
    let mut rx = handle
        .call(cmd::SendInput {
            run: run.clone(),
            value: "36".into(),
        })
        .await
        .expect("answered");
    let (_, answer) = k1.next_sent().await;
    assert_eq!(answer.content["value"], "36");
    k1.reply(&exec, "ok");
    k1.idle(&exec);
    assert_eq!(settle(&mut rx, Duration::from_secs(5)).await, RunStatus::Ok);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

/// `execute` waits on this receiver: the record must arrive by itself when the run settles,
/// complete (the output in it), with no `get_run` after.
#[tokio::test(start_paused = true)]
async fn a_settled_receiver_gets_the_record_when_the_run_asks_for_input_and_when_it_ends() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (submit, settled) = cmd::Submit::settled(ExecuteRequest::new("input()"));
    let (run, _rx) = handle.call(submit).await.expect("queued");
    let exec = k1.next_execute().await;
    k1.stdout(&exec, "asking\n");
    k1.emit(
        Channel::Stdin,
        &exec,
        "input_request",
        json!({"prompt": "name? ", "password": false}),
    );
    let asked = tokio::time::timeout(Duration::from_secs(5), settled)
        .await
        .expect("delivered")
        .expect("a record");
    assert_eq!(asked.run_id, run.as_str());
    assert_eq!(asked.status, RunStatus::AwaitingInput);
    assert_eq!(asked.stdout, "asking\n");
    handle
        .call(cmd::SendInput {
            run: run.clone(),
            value: "Ada".into(),
        })
        .await
        .expect("answered");
    k1.reply(&exec, "ok");
    k1.idle(&exec);
    let (submit, settled) = cmd::Submit::settled(ExecuteRequest::new("2"));
    handle.call(submit).await.expect("queued");
    let next = k1.next_execute().await;
    k1.stdout(&next, "two\n");
    k1.reply(&next, "ok");
    k1.idle(&next);
    let done = tokio::time::timeout(Duration::from_secs(5), settled)
        .await
        .expect("delivered")
        .expect("a record");
    assert_eq!(done.status, RunStatus::Ok);
    assert_eq!(done.stdout, "two\n");
    handle.call(cmd::Destroy).await.expect("destroyed");
}
