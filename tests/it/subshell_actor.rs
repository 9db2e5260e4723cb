//! Subshell routing in the session actor, against a scripted kernel under paused time
//! (`session_actor.rs` style): while a run executes, shell requests and side runs
//! (`execute(subshell=true)`) go to one kernel subshell, created once on first need; their
//! replies and output are correlated by msg_id, never mixed with the busy run's; kernels
//! without subshells keep today's answers.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ErrorCode, ExecuteRequest, RunStatus, SessionHandle, WhileBusy};
use kernel_mcp::wire::Message;
use serde_json::{Value, json};
use tokio::time::Instant;

fn with_subshells() -> Value {
    json!({
        "implementation": "ipython",
        "language_info": {"name": "python"},
        "supported_features": ["debugger", "kernel subshells"],
    })
}

/// Ask for completions in the background; the task yields the reply or the error.
fn complete(
    handle: &SessionHandle,
) -> tokio::task::JoinHandle<Result<Value, kernel_mcp::session::SessionError>> {
    let handle = handle.clone();
    tokio::spawn(async move {
        handle
            .call(cmd::Request {
                msg_type: "complete_request".into(),
                content: json!({"code": "x.", "cursor_pos": 2}),
                busy: WhileBusy::Subshell,
                timeout: Duration::from_secs(10),
            })
            .await
    })
}

/// Answer the actor's `create_subshell_request` with `id`.
async fn grant_subshell(k: &mut Script, id: &str) {
    let req = k.next_of(Channel::Control, "create_subshell_request").await;
    k.emit(
        Channel::Control,
        &req,
        "create_subshell_reply",
        json!({"status": "ok", "subshell_id": id}),
    );
}

fn subshell_of(msg: &Message) -> Option<&str> {
    msg.header.subshell_id.as_deref()
}

#[tokio::test(start_paused = true)]
async fn while_a_run_executes_requests_and_side_runs_go_to_one_subshell_and_keep_their_own_output()
{
    let (handle, _kernels, mut k) = session_with(false, with_subshells()).await;
    let (busy_id, mut busy_rx) = submit(&handle, ExecuteRequest::new("time.sleep(20)")).await;
    let busy = k.next_execute().await;
    assert_eq!(subshell_of(&busy), None, "the run goes to the main shell");

    let first = complete(&handle);
    grant_subshell(&mut k, "sub-1").await;
    let req = k.next_of(Channel::Shell, "complete_request").await;
    assert_eq!(subshell_of(&req), Some("sub-1"));
    k.emit(
        Channel::Shell,
        &req,
        "complete_reply",
        json!({"status": "ok", "matches": ["x.real"], "cursor_start": 2, "cursor_end": 2}),
    );
    let reply = first.await.expect("joined").expect("answered while busy");
    assert_eq!(reply["matches"], json!(["x.real"]));

    // The side run: straight to the same subshell (no second create), out of history.
    let side_req = ExecuteRequest {
        subshell: true,
        ..ExecuteRequest::new("tag")
    };
    let t0 = Instant::now();
    let (side_id, mut side_rx) = submit(&handle, side_req).await;
    let side = k.next_execute().await;
    assert_eq!(subshell_of(&side), Some("sub-1"));
    assert_eq!(side.content["store_history"], false);
    assert_eq!(side.content["allow_stdin"], false);
    // Output of both runs interleaves on iopub; each lands in its own record.
    k.stdout(&busy, "main 1\n");
    k.stdout(&side, "tag\n");
    k.stdout(&busy, "main 2\n");
    k.emit(
        Channel::Iopub,
        &side,
        "execute_result",
        json!({"data": {"text/plain": "'tag'"}, "execution_count": 3, "metadata": {}}),
    );
    k.reply(&side, "ok");
    k.idle(&side);
    assert_eq!(
        settle(&mut side_rx, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    assert_eq!(t0.elapsed(), Duration::ZERO, "never queued behind the run");
    let side_result = handle
        .call(cmd::GetRun {
            run: side_id.clone(),
        })
        .await
        .expect("side run");
    assert_eq!(side_result.stdout, "tag\n");
    assert_eq!(side_result.result.as_deref(), Some("'tag'"));
    assert_eq!(
        handle.call(cmd::Info).await.expect("info").current_run_id,
        Some(busy_id.to_string()),
        "the busy run goes on"
    );

    k.reply(&busy, "ok");
    k.idle(&busy);
    assert_eq!(
        settle(&mut busy_rx, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    let busy_result = handle
        .call(cmd::GetRun {
            run: busy_id.clone(),
        })
        .await
        .expect("busy run");
    assert_eq!(busy_result.stdout, "main 1\nmain 2\n");
    assert_eq!(busy_result.result, None);
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
    assert_eq!(total, 1, "side runs stay out of history: {history:?}");

    // Idle again: requests go to the main shell.
    let idle_ask = complete(&handle);
    let req = k.next_of(Channel::Shell, "complete_request").await;
    assert_eq!(subshell_of(&req), None);
    k.emit(
        Channel::Shell,
        &req,
        "complete_reply",
        json!({"matches": []}),
    );
    idle_ask.await.expect("joined").expect("answered");
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_kernel_without_subshells_keeps_session_busy_and_runs_an_idle_side_run_on_its_main_shell()
{
    let (handle, _kernels, mut k) = session(false).await;
    let (_, mut busy_rx) = submit(&handle, ExecuteRequest::new("sleep")).await;
    let busy = k.next_execute().await;
    let err = complete(&handle)
        .await
        .expect("joined")
        .expect_err("busy without subshells");
    assert_eq!(err.code(), ErrorCode::SessionBusy);
    let side = ExecuteRequest {
        subshell: true,
        ..ExecuteRequest::new("tag")
    };
    let err = handle
        .call(cmd::Submit::new(side.clone()))
        .await
        .expect_err("busy");
    assert_eq!(err.code(), ErrorCode::SessionBusy);
    k.reply(&busy, "ok");
    k.idle(&busy);
    settle(&mut busy_rx, Duration::from_secs(10)).await;

    let (id, mut rx) = submit(&handle, side).await;
    let req = k.next_execute().await;
    assert_eq!(subshell_of(&req), None);
    assert_eq!(req.content["store_history"], false);
    k.reply(&req, "ok");
    k.idle(&req);
    assert_eq!(
        settle(&mut rx, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    let r = handle
        .call(cmd::GetRun { run: id.clone() })
        .await
        .expect("run");
    assert!(
        r.notices.iter().any(|n| n.contains("no subshells")),
        "{:?}",
        r.notices
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_side_run_past_its_limit_is_given_up_without_an_interrupt_and_the_next_need_gets_a_new_subshell()
 {
    let (handle, _kernels, mut k) = session_with(false, with_subshells()).await;
    let (_, _busy_rx) = submit(&handle, ExecuteRequest::new("time.sleep(20)")).await;
    k.next_execute().await;
    let side = ExecuteRequest {
        subshell: true,
        timeout: Some(Duration::from_secs(2)),
        ..ExecuteRequest::new("while True: pass")
    };
    let t0 = Instant::now();
    // The submit waits (a moment) for the subshell being created.
    let submitting = {
        let handle = handle.clone();
        tokio::spawn(async move { submit(&handle, side).await })
    };
    grant_subshell(&mut k, "sub-1").await;
    let (id, mut rx) = submitting.await.expect("joined");
    let stuck = k.next_execute().await;
    assert_eq!(subshell_of(&stuck), Some("sub-1"));
    assert_eq!(
        settle(&mut rx, Duration::from_secs(60)).await,
        RunStatus::Timeout
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    assert_eq!(
        k.interrupted(),
        0,
        "the main shell's run is not interrupted"
    );
    let r = handle
        .call(cmd::GetRun { run: id.clone() })
        .await
        .expect("run");
    assert!(
        r.notices
            .iter()
            .any(|n| n.contains("cannot be interrupted")),
        "{:?}",
        r.notices
    );
    // Late output of the abandoned code stays out of every live record.
    k.stdout(&stuck, "late\n");
    let ask = complete(&handle);
    grant_subshell(&mut k, "sub-2").await;
    let req = k.next_of(Channel::Shell, "complete_request").await;
    assert_eq!(subshell_of(&req), Some("sub-2"));
    k.emit(
        Channel::Shell,
        &req,
        "complete_reply",
        json!({"matches": []}),
    );
    ask.await.expect("joined").expect("answered");
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_kernel_that_does_not_answer_create_subshell_gives_session_busy_after_the_deadline() {
    let (handle, _kernels, mut k) = session_with(false, with_subshells()).await;
    let (_, _busy_rx) = submit(&handle, ExecuteRequest::new("time.sleep(20)")).await;
    k.next_execute().await;
    let t0 = Instant::now();
    let ask = complete(&handle);
    k.next_of(Channel::Control, "create_subshell_request").await;
    let err = ask.await.expect("joined").expect_err("no subshell");
    assert_eq!(err.code(), ErrorCode::SessionBusy);
    assert_eq!(t0.elapsed(), Duration::from_secs(5));
    // Given up for this kernel: the next request is refused at once.
    let t1 = Instant::now();
    let err = complete(&handle).await.expect("joined").expect_err("busy");
    assert_eq!(err.code(), ErrorCode::SessionBusy);
    assert_eq!(t1.elapsed(), Duration::ZERO);
    handle.call(cmd::Destroy).await.expect("destroyed");
}
