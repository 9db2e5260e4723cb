//! A kernel that fails: its death ends the running run, cancels the queued ones and starts a
//! new kernel; one that takes no messages never blocks the actor, and destroy still returns.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::{ExitInfo, KernelEvent, ShutdownRung};
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};

#[tokio::test(start_paused = true)]
async fn death_ends_the_running_run_cancels_the_queued_ones_and_starts_a_new_kernel() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let (_, mut first) = submit(&handle, ExecuteRequest::new("a")).await;
    let (q1, mut second) = submit(&handle, ExecuteRequest::new("b")).await;
    let (_, mut third) = submit(&handle, ExecuteRequest::new("c")).await;
    let req = k1.next_execute().await;
    k1.stdout(&req, "partial\n");
    let _ = k1.events.send(KernelEvent::Exited(ExitInfo::signaled(9)));
    assert_eq!(
        settle(&mut first, Duration::from_secs(5)).await,
        RunStatus::KernelDied
    );
    assert_eq!(
        settle(&mut second, Duration::from_secs(5)).await,
        RunStatus::Cancelled
    );
    assert_eq!(
        settle(&mut third, Duration::from_secs(5)).await,
        RunStatus::Cancelled
    );
    let q = handle
        .call(cmd::GetRun { run: q1.clone() })
        .await
        .expect("the queued run");
    assert!(
        q.notices
            .iter()
            .any(|n| n.contains("not run in the new kernel")),
        "{:?}",
        q.notices
    );
    let mut k2 = kernels.recv().await.expect("a new kernel");
    let (_, mut next) = submit(&handle, ExecuteRequest::new("d")).await;
    let req = k2.next_execute().await;
    k2.reply(&req, "ok");
    k2.idle(&req);
    assert_eq!(
        settle(&mut next, Duration::from_secs(5)).await,
        RunStatus::Ok
    );
    assert_eq!(handle.call(cmd::Info).await.expect("info").generation, 2);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_kernel_that_takes_no_messages_never_blocks_the_actor_and_destroy_returns() {
    let (handle, _kernels, mut k1) = session(true).await;
    let (_, mut rx) = submit(&handle, ExecuteRequest::new("x")).await;
    k1.next_execute().await;
    // The send hangs; the actor gives up on it and keeps answering.
    let info = tokio::time::timeout(Duration::from_secs(30), handle.call(cmd::Info))
        .await
        .expect("info answers")
        .expect("info");
    assert_eq!(info.session_id, "s");
    let rung = tokio::time::timeout(Duration::from_secs(30), handle.call(cmd::Destroy))
        .await
        .expect("destroy returns")
        .expect("destroyed");
    assert_eq!(rung, ShutdownRung::Graceful);
    assert_eq!(
        settle(&mut rx, Duration::from_secs(1)).await,
        RunStatus::Cancelled
    );
}
