//! Timeouts and interrupts: a timeout interrupts, repeats the interrupt each second and
//! restarts the kernel after the grace (never an adopted one); an interrupt is resent until
//! the run stops, stops repeating once the kernel reported the error, and one that never
//! takes leaves the run running until a restart stops it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};
use serde_json::json;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_timeout_interrupts_repeats_the_interrupt_then_restarts_the_kernel_after_the_grace() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let req = ExecuteRequest {
        timeout: Some(Duration::from_secs(2)),
        ..ExecuteRequest::new("while True: pass")
    };
    let t0 = Instant::now();
    let (run, mut rx) = submit(&handle, req).await;
    k1.next_execute().await;
    assert_eq!(
        settle(&mut rx, Duration::from_secs(60)).await,
        RunStatus::Timeout
    );
    let took = t0.elapsed();
    assert_eq!(took, Duration::from_secs(7), "2 s timeout + 5 s grace");
    assert_eq!(
        k1.interrupted(),
        5,
        "sent at 2 s, then again each second until 6 s"
    );
    assert_eq!(
        k1.shutdowns.load(Ordering::SeqCst),
        1,
        "the old kernel is shut down"
    );
    let result = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert!(
        result.notices.iter().any(|n| n.contains("restarted")),
        "{:?}",
        result.notices
    );
    let mut k2 = kernels.recv().await.expect("a new kernel");
    let (_, mut next) = submit(&handle, ExecuteRequest::new("1")).await;
    let req = k2.next_execute().await;
    k2.reply(&req, "ok");
    k2.idle(&req);
    assert_eq!(
        settle(&mut next, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    let info = handle.call(cmd::Info).await.expect("info");
    assert_eq!(info.generation, 2);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_in_an_adopted_kernel_ends_the_run_but_never_replaces_the_kernel() {
    let (handle, mut kernels, mut k1) = adopted_session().await;
    let req = ExecuteRequest {
        timeout: Some(Duration::from_secs(2)),
        ..ExecuteRequest::new("while True: pass")
    };
    let (run, mut rx) = submit(&handle, req).await;
    let stuck = k1.next_execute().await;
    assert_eq!(
        settle(&mut rx, Duration::from_secs(60)).await,
        RunStatus::Timeout
    );
    assert_eq!(k1.interrupted(), 5, "interrupted as any kernel is");
    assert_eq!(
        k1.shutdowns.load(Ordering::SeqCst),
        0,
        "an adopted kernel is never shut down to replace it"
    );
    let result = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    let notices = result.notices.join(" ");
    assert!(notices.contains("cannot restart"), "{notices}");
    assert!(!notices.contains("state in it is lost"), "{notices}");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(kernels.try_recv().is_err(), "a new kernel was started");

    // The person stops the code; the next run goes to the same kernel, state kept.
    k1.reply(&stuck, "error");
    k1.idle(&stuck);
    let (next_run, mut next) = submit(&handle, ExecuteRequest::new("1")).await;
    let req = k1.next_execute().await;
    k1.reply(&req, "ok");
    k1.idle(&req);
    assert_eq!(
        settle(&mut next, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    let r = handle
        .call(cmd::GetRun {
            run: next_run.clone(),
        })
        .await
        .expect("the run");
    assert!(!r.state_reset, "{:?}", r.notices);
    assert_eq!(r.generation, 1);
    assert_eq!(handle.call(cmd::Info).await.expect("info").generation, 1);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_is_resent_until_the_run_stops_and_keeps_the_kernel() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let (_, mut rx) = submit(&handle, ExecuteRequest::new("sleep")).await;
    let req = k1.next_execute().await;
    let interrupted = handle.call(cmd::Interrupt).await.expect("interrupt").run;
    assert!(interrupted.is_some());
    assert_eq!(k1.interrupted(), 1);
    // The first two are lost (sent before the code started); the third stops it.
    while k1.interrupted() < 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    k1.emit(
        Channel::Iopub,
        &req,
        "error",
        json!({"ename": "KeyboardInterrupt", "evalue": "", "traceback": []}),
    );
    k1.reply(&req, "error");
    k1.idle(&req);
    assert_eq!(
        settle(&mut rx, Duration::from_secs(10)).await,
        RunStatus::Interrupted
    );
    assert_eq!(handle.call(cmd::Info).await.expect("info").generation, 1);
    assert!(kernels.try_recv().is_err(), "no new kernel was started");
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_that_never_takes_leaves_the_run_running_and_never_restarts() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let (run, mut rx) = submit(&handle, ExecuteRequest::new("ignore SIGINT")).await;
    let req = k1.next_execute().await;
    handle.call(cmd::Interrupt).await.expect("interrupt");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(*rx.borrow_and_update(), RunStatus::Running);
    assert_eq!(
        k1.interrupted(),
        5,
        "repeated until the 5 s grace ended, then no more"
    );
    assert!(kernels.try_recv().is_err(), "no restart");
    let r = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert!(
        r.notices.iter().any(|n| n.contains("still going")),
        "the result says the run goes on: {:?}",
        r.notices
    );
    // It can still finish normally.
    k1.stdout(&req, "done\n");
    k1.reply(&req, "ok");
    k1.idle(&req);
    settle(&mut rx, Duration::from_secs(10)).await;
    assert_eq!(handle.call(cmd::Info).await.expect("info").generation, 1);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

/// Once a restart stops a run the interrupt could not, its notices no longer say it goes on.
#[tokio::test(start_paused = true)]
async fn a_restart_after_an_interrupt_that_never_took_says_the_run_was_stopped() {
    let (handle, mut kernels, mut k1) = session(false).await;
    let (run, mut rx) = submit(&handle, ExecuteRequest::new("ignore SIGINT")).await;
    k1.next_execute().await;
    handle.call(cmd::Interrupt).await.expect("interrupt");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let _k2 = restart(&handle, &mut kernels).await;
    assert_eq!(
        settle(&mut rx, Duration::from_secs(10)).await,
        RunStatus::Cancelled
    );
    let notices = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run")
        .notices;
    assert!(
        !notices.iter().any(|n| n.contains("still going")),
        "{notices:?}"
    );
    assert!(
        notices.iter().any(|n| n.contains("that stopped it")),
        "{notices:?}"
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_is_not_repeated_once_the_kernel_reported_the_error() {
    let (handle, _kernels, mut k1) = session(false).await;
    let (_, mut rx) = submit(&handle, ExecuteRequest::new("sleep")).await;
    let req = k1.next_execute().await;
    handle.call(cmd::Interrupt).await.expect("interrupt");
    assert_eq!(k1.interrupted(), 1);
    k1.emit(
        Channel::Iopub,
        &req,
        "error",
        json!({"ename": "KeyboardInterrupt", "evalue": "", "traceback": []}),
    );
    // The reply is slow (a loaded machine): no second SIGINT may land in the kernel's reply path.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(k1.interrupted(), 1, "not repeated after the error");
    k1.reply(&req, "error");
    k1.idle(&req);
    assert_eq!(
        settle(&mut rx, Duration::from_secs(10)).await,
        RunStatus::Interrupted
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}
