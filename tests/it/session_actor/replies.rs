//! How a run ends from the kernel's messages: a reply without idle finishes after the iopub
//! grace, idle without a reply does not finish it, a reply the kernel dropped after an
//! interrupt is settled by a probe (`kernel_info_request`) and a reply that comes after the
//! probe still decides the run; an unanswered shell request is forgotten at its deadline.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};
use serde_json::json;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_reply_without_idle_finishes_after_the_iopub_grace_with_a_notice() {
    let (handle, _kernels, mut k1) = session(false).await;
    let t0 = Instant::now();
    let (run, mut rx) = submit(&handle, ExecuteRequest::new("x")).await;
    let req = k1.next_execute().await;
    k1.stdout(&req, "out\n");
    k1.reply(&req, "ok");
    assert_eq!(
        settle(&mut rx, Duration::from_secs(60)).await,
        RunStatus::Ok
    );
    assert_eq!(t0.elapsed(), Limits::default().iopub_grace());
    let r = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert_eq!(r.stdout, "out\n");
    assert!(
        r.notices.iter().any(|n| n.contains("never reported idle")),
        "{:?}",
        r.notices
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn an_idle_without_a_reply_keeps_the_run_going_until_the_reply() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (_, mut rx) = submit(&handle, ExecuteRequest::new("x")).await;
    let req = k1.next_execute().await;
    k1.idle(&req);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(
        *rx.borrow_and_update(),
        RunStatus::Running,
        "idle alone does not finish a run"
    );
    k1.reply(&req, "ok");
    assert_eq!(settle(&mut rx, Duration::from_secs(5)).await, RunStatus::Ok);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

/// Seen in CI and the soak: a SIGINT that lands in ipykernel's request handler outside the
/// user's code makes it log "KeyboardInterrupt caught in kernel", publish `idle` and send no
/// `execute_reply`. The run used to stay `running` for ever, with every later run queued
/// behind it.
#[tokio::test(start_paused = true)]
async fn an_interrupt_that_made_the_kernel_drop_its_reply_ends_the_run_once_a_later_request_is_answered()
 {
    let (handle, _kernels, mut k1) = session(false).await;
    let (run, mut rx) = submit(&handle, ExecuteRequest::new("while True: pass")).await;
    let (_, mut queued) = submit(&handle, ExecuteRequest::new("keep")).await;
    let req = k1.next_execute().await;
    handle.call(cmd::Interrupt).await.expect("interrupt");
    let t0 = Instant::now();
    k1.idle(&req);
    let (ch, probe) = k1.next_sent().await;
    assert_eq!(
        (ch, probe.msg_type()),
        (Channel::Shell, "kernel_info_request")
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(1), "the reply gets 1 s");
    assert_eq!(k1.interrupted(), 1, "no SIGINT after idle");
    assert_eq!(*rx.borrow_and_update(), RunStatus::Running);
    k1.emit(
        Channel::Shell,
        &probe,
        "kernel_info_reply",
        json!({"status": "ok"}),
    );
    assert_eq!(
        settle(&mut rx, Duration::from_secs(1)).await,
        RunStatus::Interrupted
    );
    let result = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert!(
        result.notices.iter().any(|n| n.contains("without a reply")),
        "{:?}",
        result.notices
    );
    let next = k1.next_execute().await;
    k1.reply(&next, "ok");
    k1.idle(&next);
    assert_eq!(
        settle(&mut queued, Duration::from_secs(5)).await,
        RunStatus::Ok,
        "the queue goes on in the same kernel"
    );
    assert_eq!(k1.shutdowns.load(Ordering::SeqCst), 0, "no restart");
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_reply_that_comes_after_the_probe_was_sent_still_decides_the_run() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (_, mut rx) = submit(&handle, ExecuteRequest::new("x")).await;
    let req = k1.next_execute().await;
    k1.idle(&req);
    let (_, probe) = k1.next_sent().await;
    assert_eq!(probe.msg_type(), "kernel_info_request");
    k1.reply(&req, "ok");
    k1.emit(
        Channel::Shell,
        &probe,
        "kernel_info_reply",
        json!({"status": "ok"}),
    );
    assert_eq!(settle(&mut rx, Duration::from_secs(5)).await, RunStatus::Ok);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_shell_request_is_forgotten_at_its_deadline() {
    let (handle, _kernels, mut k1) = session(false).await;
    let t0 = Instant::now();
    let err = handle
        .call(cmd::Request {
            msg_type: "complete_request".into(),
            content: json!({"code": "x", "cursor_pos": 1}),
            busy: kernel_mcp::session::WhileBusy::Refuse,
            timeout: Duration::from_secs(10),
        })
        .await
        .expect_err("no reply came");
    assert_eq!(t0.elapsed(), Duration::from_secs(10));
    assert_eq!(err.code().as_str(), "SESSION_BUSY");
    let (ch, msg) = k1.next_sent().await;
    assert_eq!((ch, msg.msg_type()), (Channel::Shell, "complete_request"));
    // A late reply to the forgotten request goes nowhere and breaks nothing.
    k1.emit(
        Channel::Shell,
        &msg,
        "complete_reply",
        json!({"matches": []}),
    );
    assert_eq!(handle.call(cmd::Info).await.expect("info").session_id, "s");
    handle.call(cmd::Destroy).await.expect("destroyed");
}
