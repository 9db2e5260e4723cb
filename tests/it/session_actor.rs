//! The session actor against a scripted kernel, in-process, under `tokio::time::pause()`.
//!
//! The fake implements the kernel seam (`KernelIo`): every message the actor sends arrives in
//! the test's [`Script::sent`], and the test decides what the kernel answers and when. With
//! time paused, the actor's deadlines (timeouts, interrupt grace and repeats, the iopub grace)
//! pass in virtual time as soon as every task is idle, so each case takes milliseconds and
//! asserts exact virtual instants.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::{Channel, ExitInfo, KernelEvent, ShutdownRung};
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
    let restarting = {
        let h = handle.clone();
        tokio::spawn(async move {
            h.call(cmd::Restart {
                clear_history: false,
            })
            .await
        })
    };
    let _k2 = kernels.recv().await.expect("a new kernel");
    restarting.await.expect("joined").expect("restarted");
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

#[tokio::test(start_paused = true)]
async fn another_clients_cell_enters_the_history_marked_and_never_the_agents_run() {
    let (handle, _kernels, mut k1) = session(false).await;
    // A person's request, sent to the kernel by another client: the actor never saw it.
    let theirs = kernel_mcp::wire::Message::new(
        "execute_request",
        json!({"code": "print('person')"}),
        "person",
    );
    let (run, mut rx) = submit(&handle, ExecuteRequest::new("print('agent')")).await;
    let ours = k1.next_execute().await;
    // The kernel interleaves both clients' iopub; only ours belongs to the run.
    k1.emit(
        Channel::Iopub,
        &theirs,
        "execute_input",
        json!({"code": "print('person')", "execution_count": 7}),
    );
    k1.stdout(&ours, "agent\n");
    k1.stdout(&theirs, "person\n");
    k1.emit(
        Channel::Iopub,
        &theirs,
        "error",
        json!({"ename": "E", "evalue": "v", "traceback": []}),
    );
    k1.idle(&theirs);
    k1.reply(&ours, "ok");
    k1.idle(&ours);
    assert_eq!(
        settle(&mut rx, Duration::from_secs(10)).await,
        RunStatus::Ok
    );
    let result = handle.call(cmd::GetRun { run: run.clone() }).await.unwrap();
    assert_eq!(
        result.stdout, "agent\n",
        "nothing of the person's in the agent's run"
    );
    let cmd::HistoryPage { entries, total } = handle
        .call(cmd::History {
            start: None,
            end: None,
        })
        .await
        .unwrap();
    assert_eq!(total, 2, "{entries:?}");
    let (_, person) = &entries[0];
    assert!(person.other_client);
    assert_eq!(person.code, "print('person')");
    assert_eq!(person.stdout, "person\n");
    assert_eq!(person.execution_count, Some(7));
    assert_eq!(person.status, RunStatus::Error);
    let (_, agent) = &entries[1];
    assert!(!agent.other_client);
    assert_eq!(agent.stdout, "agent\n");
    // A silent request of another client (no execute_input) leaves no entry.
    let silent = kernel_mcp::wire::Message::new("execute_request", json!({}), "person");
    k1.stdout(&silent, "quiet\n");
    k1.idle(&silent);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        handle
            .call(cmd::History {
                start: None,
                end: None
            })
            .await
            .unwrap()
            .total,
        2
    );
}
