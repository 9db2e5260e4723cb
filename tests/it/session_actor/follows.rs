//! A run queued to follow another (`ExecuteRequest::follows`: how a notebook batch queues its
//! next cell while one runs): with `only_if_ok` it runs only if that one ended `ok`; a restart
//! or a kernel's death before it starts leaves it to run in the new kernel, as the batch's
//! next request would, while the other queued runs are cancelled.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::{ExitInfo, KernelEvent};
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, Follows, RunId, RunStatus};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn a_run_queued_after_one_that_fails_ends_cancelled_without_reaching_the_kernel() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (first, mut first_rx) = submit(&handle, ExecuteRequest::new("1/0")).await;
    let follower = following(&first, true, "2");
    let (second, mut second_rx) = submit(&handle, follower).await;
    let (_, mut third_rx) = submit(&handle, ExecuteRequest::new("3")).await;

    let req = k1.next_execute().await;
    assert_eq!(req.content["code"], "1/0");
    k1.emit(
        kernel_mcp::kernel::Channel::Iopub,
        &req,
        "error",
        json!({"ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": []}),
    );
    k1.reply(&req, "error");
    k1.idle(&req);
    assert_eq!(settle(&mut first_rx, WITHIN).await, RunStatus::Error);
    assert_eq!(settle(&mut second_rx, WITHIN).await, RunStatus::Cancelled);

    let next = k1.next_execute().await;
    assert_eq!(
        next.content["code"], "3",
        "the kernel's next request is the run after the one that was not run"
    );
    k1.reply(&next, "ok");
    k1.idle(&next);
    assert_eq!(settle(&mut third_rx, WITHIN).await, RunStatus::Ok);

    let skipped = handle
        .call(cmd::GetRun { run: second })
        .await
        .expect("the run not run");
    assert!(
        skipped
            .notices
            .iter()
            .any(|n| n.contains("Not run") && n.contains(first.as_str())),
        "{:?}",
        skipped.notices
    );
    let history = handle
        .call(cmd::History {
            start: None,
            end: None,
        })
        .await
        .expect("history");
    let codes: Vec<_> = history
        .entries
        .iter()
        .map(|(_, e)| e.code.clone())
        .collect();
    assert_eq!(codes, ["1/0", "3"], "a run never run is not in the history");
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_run_queued_after_one_that_ends_ok_runs_next() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (first, mut first_rx) = submit(&handle, ExecuteRequest::new("1")).await;
    let follower = following(&first, true, "2");
    let (_, mut second_rx) = submit(&handle, follower).await;
    for code in ["1", "2"] {
        let req = k1.next_execute().await;
        assert_eq!(req.content["code"], code);
        k1.reply(&req, "ok");
        k1.idle(&req);
    }
    assert_eq!(settle(&mut first_rx, WITHIN).await, RunStatus::Ok);
    assert_eq!(settle(&mut second_rx, WITHIN).await, RunStatus::Ok);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

fn following(run: &RunId, only_if_ok: bool, code: &str) -> ExecuteRequest {
    ExecuteRequest {
        follows: Some(Follows {
            run: run.clone(),
            only_if_ok,
        }),
        ..ExecuteRequest::new(code)
    }
}

#[tokio::test(start_paused = true)]
async fn a_restart_cancels_the_queued_runs_but_the_follower_which_runs_in_the_new_kernel() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let (first, mut first_rx) = submit(&handle, ExecuteRequest::new("sleep")).await;
    let (_, mut follower_rx) = submit(&handle, following(&first, false, "next cell")).await;
    let (_, mut other_rx) = submit(&handle, ExecuteRequest::new("another caller's")).await;
    k1.next_execute().await;
    let mut k2 = restart(&handle, &mut kernels).await;
    assert_eq!(settle(&mut first_rx, WITHIN).await, RunStatus::Cancelled);
    assert_eq!(settle(&mut other_rx, WITHIN).await, RunStatus::Cancelled);
    let req = k2.next_execute().await;
    assert_eq!(req.content["code"], "next cell", "the follower runs in k2");
    k2.reply(&req, "ok");
    k2.idle(&req);
    assert_eq!(settle(&mut follower_rx, WITHIN).await, RunStatus::Ok);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_kernel_death_leaves_the_follower_to_run_in_the_new_kernel_saying_so() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let (first, mut first_rx) = submit(&handle, ExecuteRequest::new("crash")).await;
    let (next, mut follower_rx) = submit(&handle, following(&first, false, "next cell")).await;
    k1.next_execute().await;
    let _ = k1.events.send(KernelEvent::Exited(ExitInfo::signaled(9)));
    assert_eq!(settle(&mut first_rx, WITHIN).await, RunStatus::KernelDied);
    let mut k2 = kernels.recv().await.expect("a new kernel");
    let req = k2.next_execute().await;
    assert_eq!(req.content["code"], "next cell");
    k2.reply(&req, "ok");
    k2.idle(&req);
    assert_eq!(settle(&mut follower_rx, WITHIN).await, RunStatus::Ok);
    let notices = handle
        .call(cmd::GetRun { run: next })
        .await
        .expect("the follower")
        .notices;
    assert!(
        notices
            .iter()
            .any(|n| n.contains("executed in a new kernel")),
        "{notices:?}"
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}
