//! Another client's cells on the same kernel: they enter the session's history marked as
//! another client's, never the agent's run, and a silent request leaves no entry.

use std::time::Duration;

use crate::common::scripted::*;
use kernel_mcp::kernel::Channel;
use kernel_mcp::session::cmd;
use kernel_mcp::session::{ExecuteRequest, RunStatus};
use serde_json::json;

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
