//! A notebook batch's next cell sent ahead into the kernel's queue (on a kernel that says it
//! is IPython's, which aborts its queue after a failed request sent with `stop_on_error`):
//! it goes out while the cell before it runs, its messages reach it before its turn, a
//! failure, a cancel or a restart before it starts leaves it cancelled (aborted by the
//! kernel, or sent again to a new kernel), and a kernel that ran it anyway is said so.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, Follows, RunId, RunStatus, SessionHandle};
use kernel_mcp::wire::Message;
use serde_json::json;
use tokio::sync::{mpsc, watch};

const WITHIN: Duration = Duration::from_secs(60);

type Rx = watch::Receiver<RunStatus>;
type Kernels = mpsc::UnboundedReceiver<Script>;

/// A session on a kernel that says it is IPython's, with a batch of three cells queued: the
/// first ran `ok`; the second (`b`) was just sent, with `stop_on_error`; the third (`c`),
/// sent ahead behind it. Answers the runs and requests of `b` and `c`.
async fn batch_with_c_sent_ahead() -> (
    SessionHandle,
    Kernels,
    Script,
    [(RunId, Rx); 2],
    [Message; 2],
) {
    let info = json!({"implementation": "ipython", "language_info": {"name": "python"}});
    let (handle, kernels, mut k1) = session_with(false, info).await;
    let (a, mut a_rx) = submit(&handle, ExecuteRequest::new("a")).await;
    let (b, b_rx) = submit(&handle, following(&a, "b")).await;
    let (c, c_rx) = submit(&handle, following(&b, "c")).await;
    let req_a = k1.next_execute().await;
    assert_eq!(req_a.content["code"], "a");
    assert_eq!(
        req_a.content["stop_on_error"], false,
        "a cell that follows nothing has nothing sent ahead behind it"
    );
    k1.reply(&req_a, "ok");
    k1.idle(&req_a);
    assert_eq!(settle(&mut a_rx, WITHIN).await, RunStatus::Ok);
    let req_b = k1.next_execute().await;
    assert_eq!(req_b.content["code"], "b");
    assert_eq!(req_b.content["stop_on_error"], true);
    let req_c = k1.next_execute().await;
    assert_eq!(
        req_c.content["code"], "c",
        "c goes to the kernel before b is answered"
    );
    assert_eq!(*c_rx.borrow(), RunStatus::Queued);
    (handle, kernels, k1, [(b, b_rx), (c, c_rx)], [req_b, req_c])
}

fn following(run: &RunId, code: &str) -> ExecuteRequest {
    ExecuteRequest {
        follows: Some(Follows {
            run: run.clone(),
            only_if_ok: true,
        }),
        ..ExecuteRequest::new(code)
    }
}

async fn notices(handle: &SessionHandle, run: &RunId) -> Vec<String> {
    handle
        .call(cmd::GetRun { run: run.clone() })
        .await
        .expect("the run")
        .notices
}

#[tokio::test(start_paused = true)]
async fn the_cell_sent_ahead_gets_its_own_output_even_before_the_cell_before_it_is_answered() {
    let (handle, _kernels, k1, [(b, mut b_rx), (c, mut c_rx)], [req_b, req_c]) =
        batch_with_c_sent_ahead().await;
    k1.stdout(&req_b, "from b\n");
    k1.idle(&req_b);
    // The kernel's iopub for c can be read before b's reply on the shell channel.
    k1.stdout(&req_c, "from c\n");
    k1.reply(&req_b, "ok");
    k1.reply(&req_c, "ok");
    k1.idle(&req_c);
    assert_eq!(settle(&mut b_rx, WITHIN).await, RunStatus::Ok);
    assert_eq!(settle(&mut c_rx, WITHIN).await, RunStatus::Ok);
    for (run, text) in [(&b, "from b\n"), (&c, "from c\n")] {
        let r = handle
            .call(cmd::GetRun { run: run.clone() })
            .await
            .expect("the run");
        assert_eq!(r.stdout, text, "{r:?}");
    }
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_failing_cell_leaves_the_one_sent_ahead_aborted_by_the_kernel_and_cancelled() {
    let (handle, _kernels, mut k1, [(_, mut b_rx), (c, mut c_rx)], [req_b, req_c]) =
        batch_with_c_sent_ahead().await;
    k1.reply(&req_b, "error");
    k1.idle(&req_b);
    assert_eq!(settle(&mut b_rx, WITHIN).await, RunStatus::Error);
    // The batch withdraws the next cell once one fails: nothing to interrupt, the kernel
    // aborts it.
    handle
        .call(cmd::Cancel { run: c.clone() })
        .await
        .expect("cancel c");
    k1.reply(&req_c, "aborted");
    k1.idle(&req_c);
    assert_eq!(settle(&mut c_rx, WITHIN).await, RunStatus::Cancelled);
    assert_eq!(k1.interrupted(), 0, "nothing was interrupted");
    let said = notices(&handle, &c).await;
    assert!(
        said.iter()
            .any(|n| n.starts_with("Not run") && n.contains("ended error")),
        "{said:?}"
    );
    let (d, mut d_rx) = submit(&handle, ExecuteRequest::new("d")).await;
    let next = k1.next_execute().await;
    assert_eq!(next.content["code"], "d", "c is not sent again");
    k1.reply(&next, "ok");
    k1.idle(&next);
    assert_eq!(settle(&mut d_rx, WITHIN).await, RunStatus::Ok, "{d}");
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_cell_sent_ahead_that_the_kernel_ran_anyway_ends_as_it_ran_and_says_so() {
    let (handle, _kernels, k1, [(_, mut b_rx), (c, mut c_rx)], [req_b, req_c]) =
        batch_with_c_sent_ahead().await;
    k1.reply(&req_b, "error");
    k1.idle(&req_b);
    k1.stdout(&req_c, "ran\n");
    k1.reply(&req_c, "ok");
    k1.idle(&req_c);
    assert_eq!(settle(&mut b_rx, WITHIN).await, RunStatus::Error);
    assert_eq!(settle(&mut c_rx, WITHIN).await, RunStatus::Ok);
    let said = notices(&handle, &c).await;
    assert!(
        said.iter().any(|n| n.contains("the kernel ran it")),
        "{said:?}"
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_batch_interrupts_its_cell_and_the_one_sent_ahead_ends_cancelled() {
    let (handle, _kernels, k1, [(b, mut b_rx), (c, mut c_rx)], [req_b, req_c]) =
        batch_with_c_sent_ahead().await;
    // As a batch is cancelled: the cell queued ahead first, then the running one.
    handle
        .call(cmd::Cancel { run: c.clone() })
        .await
        .expect("cancel c");
    assert_eq!(*c_rx.borrow(), RunStatus::Queued, "the kernel has it still");
    handle.call(cmd::Cancel { run: b }).await.expect("cancel b");
    assert_eq!(k1.interrupted(), 1);
    k1.reply(&req_b, "error");
    k1.idle(&req_b);
    k1.reply(&req_c, "aborted");
    k1.idle(&req_c);
    assert_eq!(settle(&mut b_rx, WITHIN).await, RunStatus::Interrupted);
    assert_eq!(settle(&mut c_rx, WITHIN).await, RunStatus::Cancelled);
    assert_eq!(
        k1.interrupted(),
        1,
        "the request the kernel aborted is not interrupted"
    );
    let said = notices(&handle, &c).await;
    assert!(
        said.iter()
            .any(|n| n.contains("already in the kernel's queue")),
        "{said:?}"
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}

#[tokio::test(start_paused = true)]
async fn a_restart_before_the_cell_sent_ahead_starts_ends_it_cancelled_without_waiting() {
    let (handle, mut kernels, _k1, [(_, mut b_rx), (_, mut c_rx)], _) =
        batch_with_c_sent_ahead().await;
    let _k2 = restart(&handle, &mut kernels).await;
    assert_eq!(settle(&mut b_rx, WITHIN).await, RunStatus::Cancelled);
    assert_eq!(
        settle(&mut c_rx, WITHIN).await,
        RunStatus::Cancelled,
        "the old kernel's answer never comes; c follows b, which did not end ok"
    );
    handle.call(cmd::Destroy).await.expect("destroyed");
}
