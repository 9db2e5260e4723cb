//! The source's side of `fork_session` in the session actor, against a scripted kernel under
//! paused time: the fork helper's request goes to the idle main shell, no run starts until the
//! fork is ended (or its hold limit passes), the runs submitted meanwhile then start in order,
//! and a session running code refuses to be forked.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ErrorCode, ExecuteRequest, RunStatus, SessionError, SessionHandle};
use serde_json::json;
use tokio::time::Instant;

const HELPER: &str = "__import__('sys')  # the helper";

fn fork_content() -> serde_json::Value {
    json!({"code": HELPER, "silent": true, "store_history": false, "user_expressions": {"v": "1"}})
}

/// Ask for the fork helper's request in a task of its own (it answers once the fork ends).
fn ask_fork(
    handle: &SessionHandle,
) -> tokio::task::JoinHandle<Result<serde_json::Value, SessionError>> {
    let handle = handle.clone();
    tokio::spawn(async move {
        handle
            .call(cmd::Fork {
                content: fork_content(),
                timeout: Duration::from_secs(30),
            })
            .await
    })
}

/// Nothing reaches the kernel within `within` (virtual time).
async fn nothing_sent(k: &mut Script, within: Duration) -> bool {
    tokio::time::timeout(within, k.sent.recv()).await.is_err()
}

#[tokio::test(start_paused = true)]
async fn a_fork_holds_the_runs_until_it_ends_and_they_then_start_in_order() {
    let (handle, _kernels, mut k) = session(false).await;
    let asking = ask_fork(&handle);
    let req = k.next_execute().await;
    assert_eq!(req.content["code"], HELPER);
    assert_eq!(req.content["silent"], true);
    assert_eq!(
        req.header.subshell_id, None,
        "the main shell takes the fork"
    );
    k.emit(
        Channel::Shell,
        &req,
        "execute_reply",
        json!({"status": "ok", "user_expressions": {"v": {"status": "ok"}}}),
    );
    let reply = asking.await.expect("joined").expect("the helper's reply");
    assert_eq!(reply["user_expressions"]["v"]["status"], "ok");

    let (_, mut a) = submit(&handle, ExecuteRequest::new("a")).await;
    let (_, mut b) = submit(&handle, ExecuteRequest::new("b")).await;
    assert!(
        nothing_sent(&mut k, Duration::from_secs(10)).await,
        "no run starts while the fork is taken"
    );
    assert_eq!(handle.call(cmd::Info).await.expect("info").queue_length, 2);
    // Another fork meanwhile is refused: one copy at a time.
    let err = handle
        .call(cmd::Fork {
            content: fork_content(),
            timeout: Duration::from_secs(30),
        })
        .await
        .expect_err("a fork is being taken");
    assert_eq!(err.code(), ErrorCode::SessionBusy);

    handle.call(cmd::EndFork).await.expect("ended");
    let first = k.next_execute().await;
    assert_eq!(first.content["code"], "a");
    k.reply(&first, "ok");
    k.idle(&first);
    assert_eq!(settle(&mut a, Duration::from_secs(10)).await, RunStatus::Ok);
    let second = k.next_execute().await;
    assert_eq!(second.content["code"], "b");
    k.reply(&second, "ok");
    k.idle(&second);
    assert_eq!(settle(&mut b, Duration::from_secs(10)).await, RunStatus::Ok);
    let cmd::HistoryPage {
        entries: history,
        total,
    } = handle
        .call(cmd::History {
            start: None,
            end: None,
        })
        .await
        .expect("history");
    assert_eq!(total, 2, "the fork's request is not history: {history:?}");

    // A session running code is not forked.
    let (_, _c) = submit(&handle, ExecuteRequest::new("sleep")).await;
    k.next_execute().await;
    let err = handle
        .call(cmd::Fork {
            content: fork_content(),
            timeout: Duration::from_secs(30),
        })
        .await
        .expect_err("busy");
    assert_eq!(err.code(), ErrorCode::SessionBusy);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_fork_never_ended_lets_the_runs_go_after_its_hold_limit() {
    let (handle, _kernels, mut k) = session(false).await;
    let t0 = Instant::now();
    let asking = ask_fork(&handle);
    let req = k.next_execute().await;
    k.emit(
        Channel::Shell,
        &req,
        "execute_reply",
        json!({"status": "ok"}),
    );
    asking.await.expect("joined").expect("reply");
    let (_, mut run) = submit(&handle, ExecuteRequest::new("a")).await;
    let (_, a) = tokio::time::timeout(Duration::from_secs(120), k.sent.recv())
        .await
        .expect("the run starts at the hold limit")
        .expect("the kernel is there");
    assert_eq!(a.content["code"], "a");
    assert_eq!(t0.elapsed(), Duration::from_secs(60), "the hold limit");
    k.reply(&a, "ok");
    k.idle(&a);
    assert_eq!(
        settle(&mut run, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}
