//! A run queued to follow another only if that one ends `ok` (`ExecuteRequest::after_ok`:
//! how a notebook batch with `stop_on_error` queues its next cell while one runs).

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn a_run_queued_after_one_that_fails_ends_cancelled_without_reaching_the_kernel() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (first, mut first_rx) = submit(&handle, ExecuteRequest::new("1/0")).await;
    let follower = ExecuteRequest {
        after_ok: Some(first.clone()),
        ..ExecuteRequest::new("2")
    };
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
    let follower = ExecuteRequest {
        after_ok: Some(first),
        ..ExecuteRequest::new("2")
    };
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
