//! The session actor beside another client's cell (a person's, from JupyterLab or `jupyter
//! console --existing`), against the scripted kernel under paused time: the agent's run waits
//! for the cell in the actor and its `timeout_s` counts only its own code; nothing the agent
//! does (its deadline, `interrupt_session`, `cancel_execution`, `queue_timeout_s`) interrupts
//! or restarts the other client's cell, and the run's notices say whose cell it waited for.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};
use kernel_mcp::wire::Message;
use serde_json::json;
use tokio::time::Instant;

/// Another client's execute_request, as its `status: busy` and `execute_input` show it.
fn person_cell(k: &Script, session: &str) -> Message {
    let cell = Message::new(
        "execute_request",
        json!({"code": "while True: pass"}),
        session,
    );
    k.emit(
        Channel::Iopub,
        &cell,
        "status",
        json!({"execution_state": "busy"}),
    );
    k.emit(
        Channel::Iopub,
        &cell,
        "execute_input",
        json!({"code": "while True: pass", "execution_count": 7}),
    );
    cell
}

fn ends(k: &Script, cell: &Message) {
    k.emit(
        Channel::Iopub,
        cell,
        "status",
        json!({"execution_state": "idle"}),
    );
}

/// No execute_request reached the kernel so far.
fn nothing_sent(k: &mut Script) -> bool {
    while let Ok((ch, msg)) = k.sent.try_recv() {
        if ch == Channel::Shell && msg.msg_type() == "execute_request" {
            return false;
        }
    }
    true
}

#[tokio::test(start_paused = true)]
async fn a_run_waits_for_another_clients_cell_and_its_timeout_counts_only_its_own_code() {
    let (handle, mut kernels, mut k1) = session(false).await;
    handle.tell(cmd::NoteClient {
        session: "jlab-1".into(),
        who: "a person through the Jupyter API".into(),
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let cell = person_cell(&k1, "jlab-1");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let req = ExecuteRequest {
        timeout: Some(Duration::from_secs(2)),
        ..ExecuteRequest::new("1 + 1")
    };
    let t0 = Instant::now();
    let (run, mut rx) = submit(&handle, req).await;
    // The person's cell ignores SIGINT and runs a minute: the agent's 2 s timeout never
    // touches it, and the agent's code is not sent meanwhile.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(nothing_sent(&mut k1), "the run waits in the actor");
    assert_eq!(k1.interrupted(), 0, "the person's cell was interrupted");
    assert_eq!(k1.shutdowns.load(Ordering::SeqCst), 0);
    assert!(kernels.try_recv().is_err(), "a new kernel was started");
    let queued = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert_eq!(queued.status, RunStatus::Queued);
    let notices = queued.notices.join(" ");
    assert!(
        notices.contains("another client's cell")
            && notices.contains("a person through the Jupyter API"),
        "{notices}"
    );
    assert!(queued.queued_ms >= 60_000, "{}", queued.queued_ms);

    // The person's cell ends: the agent's code runs, and its own 2 s start now.
    ends(&k1, &cell);
    let sent = k1.next_execute().await;
    assert_eq!(
        t0.elapsed(),
        Duration::from_secs(60) + Duration::from_millis(0)
    );
    k1.reply(&sent, "ok");
    k1.idle(&sent);
    assert_eq!(settle(&mut rx, Duration::from_secs(5)).await, RunStatus::Ok);
    let done = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    assert!(done.queued_ms >= 60_000, "{}", done.queued_ms);
    let notices = done.notices.join(" ");
    assert!(notices.contains("Waited 60"), "{notices}");
    assert!(!notices.contains("Queued:"), "{notices}");
    assert_eq!(k1.interrupted(), 0);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn queue_timeout_cancels_a_run_held_behind_another_clients_cell_without_touching_it() {
    let (handle, _kernels, mut k1) = session(false).await;
    let cell = person_cell(&k1, "console-9");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let req = ExecuteRequest {
        timeout: Some(Duration::from_secs(1)),
        queue_timeout: Some(Duration::from_secs(3)),
        ..ExecuteRequest::new("1 + 1")
    };
    let t0 = Instant::now();
    let (run, mut rx) = submit(&handle, req).await;
    assert_eq!(
        settle(&mut rx, Duration::from_secs(30)).await,
        RunStatus::Cancelled
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
    let r = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run");
    let notices = r.notices.join(" ");
    assert!(
        notices.contains("queue_timeout_s") && notices.contains("never ran"),
        "{notices}"
    );
    assert!(
        notices.contains("client session console-"),
        "names the client: {notices}"
    );
    assert!(nothing_sent(&mut k1));
    assert_eq!(k1.interrupted(), 0);
    // The next run goes once the cell ends.
    ends(&k1, &cell);
    let (_, mut next) = submit(&handle, ExecuteRequest::new("2")).await;
    let sent = k1.next_execute().await;
    k1.reply(&sent, "ok");
    k1.idle(&sent);
    assert_eq!(
        settle(&mut next, Duration::from_secs(5)).await,
        RunStatus::Ok
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn interrupt_session_leaves_another_clients_cell_alone_and_says_whose_it_is() {
    let (handle, _kernels, k1) = session(false).await;
    handle.tell(cmd::NoteClient {
        session: "jlab-2".into(),
        who: "a person through the Jupyter API".into(),
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let cell = person_cell(&k1, "jlab-2");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let (run, _rx) = submit(&handle, ExecuteRequest::new("1")).await;
    let cmd::Interrupted {
        run: interrupted,
        notice,
        ..
    } = handle.call(cmd::Interrupt).await.expect("interrupt");
    assert_eq!(interrupted, None);
    let notice = notice.expect("a notice");
    assert!(
        notice.contains("a person through the Jupyter API") && notice.contains(run.as_str()),
        "{notice}"
    );
    assert_eq!(k1.interrupted(), 0);
    // A person's interrupt through the Jupyter API does reach the kernel.
    handle
        .call(cmd::InterruptKernel {
            by: "a person through the Jupyter API".into(),
        })
        .await
        .expect("interrupt");
    assert_eq!(k1.interrupted(), 1);
    ends(&k1, &cell);
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_run_the_kernel_queued_behind_another_clients_cell_is_stopped_only_once_it_starts() {
    let (handle, _kernels, mut k1) = session(false).await;
    let req = ExecuteRequest {
        timeout: Some(Duration::from_secs(2)),
        ..ExecuteRequest::new("import time; time.sleep(100)")
    };
    let (run, mut rx) = submit(&handle, req).await;
    let sent = k1.next_execute().await;
    // The kernel had another client's cell queued first: it runs that one now.
    let cell = person_cell(&k1, "console-3");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(k1.interrupted(), 0, "the timeout counted the other cell");
    assert_eq!(
        handle
            .call(cmd::GetRun { run: run.clone() })
            .await
            .expect("run")
            .status,
        RunStatus::Running
    );
    // Cancelling it does not interrupt the other cell either.
    handle
        .call(cmd::Cancel { run: run.clone() })
        .await
        .expect("cancel");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(k1.interrupted(), 0);
    // The other cell ends and ours begins: it is interrupted at once.
    ends(&k1, &cell);
    k1.emit(
        Channel::Iopub,
        &sent,
        "status",
        json!({"execution_state": "busy"}),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(k1.interrupted(), 1);
    k1.reply(&sent, "error");
    k1.idle(&sent);
    assert_eq!(
        settle(&mut rx, Duration::from_secs(10)).await,
        RunStatus::Cancelled
    );
    let r = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("run");
    let notices = r.notices.join(" ");
    assert!(
        notices.contains("behind another client's cell"),
        "{notices}"
    );
    assert!(
        r.queued_ms >= 40_000,
        "the wait in the kernel is queue time: {}",
        r.queued_ms
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_restart_is_the_one_way_to_stop_another_clients_cell_and_the_next_run_says_so() {
    let (handle, mut kernels, k1) = session(false).await;
    let _cell = person_cell(&k1, "console-5");
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle
        .call(cmd::Restart {
            clear_history: false,
        })
        .await
        .expect("restarted");
    let mut k2 = kernels.recv().await.expect("a new kernel");
    let (run, mut rx) = submit(&handle, ExecuteRequest::new("1")).await;
    let sent = k2.next_execute().await;
    k2.reply(&sent, "ok");
    k2.idle(&sent);
    assert_eq!(settle(&mut rx, Duration::from_secs(5)).await, RunStatus::Ok);
    let notices = handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("run")
        .notices
        .join(" ");
    assert!(
        notices.contains("also stopped another client's cell") && notices.contains("console-"),
        "{notices}"
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}
