//! Sending a notebook batch's next cell ahead: while one of a batch's cells runs, the cell
//! queued to follow it only if it ends `ok` ([`Follows`] with `only_if_ok`) goes into the
//! kernel's shell queue at once, so the kernel starts it the moment the one before ends, as
//! JupyterLab's "run all" does (docs/performance.md measures what it saves). Only on the
//! session's own kernel, and only where the kernel aborts its queue after a request sent with
//! `stop_on_error` fails ([`Quirks::aborts_queue_on_error`]): a cell that fails, is interrupted
//! or times out leaves the one sent ahead aborted by the kernel, never run.
//!
//! A run sent ahead stays queued (its messages reach it by its `msg_id`) until the run before
//! it ends; it then becomes current without a second request. A new kernel loses the request:
//! the run is sent again there, if it still runs. A cancelled run sent ahead cannot be taken
//! back from the kernel: it ends when the kernel aborts it, or is stopped as it starts.
//!
//! Spec (`stop_on_error`, `aborted` replies):
//! <https://jupyter-client.readthedocs.io/en/latest/messaging.html#execute>

use super::*;
use crate::session::run::{Executing, Interrupting, Phase, Run, SentAhead};
use crate::wire::Execute;

impl Actor {
    /// Whether `run` goes to the kernel with `stop_on_error`: a notebook batch's cell that runs
    /// only if the one before it ended `ok`, on a kernel of ours that aborts its queue.
    pub(super) fn aborts_after(&self, run: &Run) -> bool {
        self.quirks.aborts_queue_on_error
            && self.not_ours().is_none()
            && run.follows.as_ref().is_some_and(|f| f.only_if_ok)
    }

    /// The `execute_request` for `run`, indexed to it (not yet sent).
    pub(super) fn execute_message(&mut self, run_id: &RunId) -> Option<(Message, bool)> {
        let kernel = self.kernel.as_ref()?;
        let run = self.runs.get(run_id.as_str())?;
        let stop_on_error = self.aborts_after(run);
        let content = Execute {
            code: &run.code,
            silent: false,
            store_history: run.store_history,
            allow_stdin: true,
            stop_on_error,
        };
        let mut msg = kernel.request("execute_request", content.content());
        // The run's trace context, for code in the kernel that traces itself (docs/telemetry.md).
        let carried = crate::telemetry::context::carried(&run.trace.span());
        if !carried.is_empty() {
            msg.metadata = Value::Object(carried);
        }
        self.runs
            .index_msg(MsgId::from(msg.msg_id()), run_id.clone());
        Some((msg, stop_on_error))
    }

    /// Send the next queued run ahead when it follows the current run only if that ends `ok`
    /// and the current run was sent with `stop_on_error` and is still running undisturbed.
    pub(super) async fn send_ahead(&mut self) {
        let Some(current) = self.runs.current() else {
            return;
        };
        let undisturbed = current.phase.executing().is_some_and(|e| {
            e.stop_on_error
                && e.reply.is_none()
                && e.interrupt.is_none()
                && !e.timed_out
                && !e.cancel_on_start
                && e.behind.is_none()
        });
        let Some(next) = self.runs.next_queued() else {
            return;
        };
        let follows_current = next
            .follows
            .as_ref()
            .is_some_and(|f| f.only_if_ok && f.run == current.id);
        if !undisturbed
            || !follows_current
            || !matches!(next.phase, Phase::Queued)
            || next.queue_timeout.is_some()
            || self.fork_hold.is_some()
        {
            return;
        }
        let id = next.id.clone();
        let Some((msg, stop_on_error)) = self.execute_message(&id) else {
            return;
        };
        let generation = self.generation;
        if let Some(run) = self.runs.get_mut(id.as_str()) {
            let mut e = Executing::new(Instant::now());
            e.stop_on_error = stop_on_error;
            e.ahead = Some(Box::new(SentAhead {
                generation,
                unmet: None,
            }));
            run.phase = Phase::Executing(e);
        }
        tracing::trace!(target: "kernel_mcp::timing", run = %id, "sent ahead");
        if let Err(e) = self.send(Channel::Shell, &msg).await {
            tracing::warn!(session = %self.desc.id, "execute_request sent ahead not sent: {e}");
            // Sent again when its turn comes.
            if let Some(run) = self.runs.get_mut(id.as_str()) {
                run.phase = Phase::Queued;
            }
        }
    }

    /// The current run was sent ahead and is now the kernel's: its clock starts now, a prompt
    /// that came meanwhile is shown (or answered), and a run cancelled meanwhile that the kernel
    /// already started is stopped.
    pub(super) async fn promote_sent_ahead(&mut self) {
        let now = Instant::now();
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        if run.input.is_some() && run.stdin_answers.is_empty() {
            run.set_status(RunStatus::AwaitingInput);
        }
        let Some(e) = run.phase.executing_mut() else {
            return;
        };
        e.started_at = now;
        e.probe = (now, 0);
        let stop = e.cancel_on_start && e.began && e.reply.is_none() && e.interrupt.is_none();
        if stop {
            e.interrupt = Some(Interrupting::new(now));
            self.interrupt_kernel().await;
        }
        self.answer_from_stdin_list().await;
    }

    /// Whether queued run `run` has its request in the session's kernel now.
    pub(super) fn in_kernel_ahead(&self, run: &Run) -> bool {
        run.phase
            .executing()
            .is_some_and(|e| e.sent_ahead() == Some(self.generation) && self.kernel.is_some())
    }

    /// A new kernel is starting: requests sent ahead to the old one are gone, so their runs
    /// are queued as never sent.
    pub(super) fn forget_sent_ahead(&mut self) {
        let ids: Vec<RunId> = self.runs.queued().map(|r| r.id.clone()).collect();
        for id in ids {
            if let Some(run) = self.runs.get_mut(id.as_str())
                && run.phase.executing().is_some_and(|e| e.ahead.is_some())
            {
                run.phase = Phase::Queued;
            }
        }
    }

    /// Cancel queued run `id` with `notice`. A run whose request is in the kernel already is
    /// left queued, to end `cancelled` once the kernel aborts it or as soon as it starts.
    /// True when it ended now.
    pub(super) fn cancel_queued_run(&mut self, id: &RunId, notice: &str) -> bool {
        let ahead = self
            .runs
            .get(id.as_str())
            .is_some_and(|r| self.in_kernel_ahead(r));
        let Some(run) = self.runs.get_mut(id.as_str()) else {
            return false;
        };
        if ahead {
            if let Some(e) = run.phase.executing_mut() {
                e.cancel_on_start = true;
            }
            run.notices.push(
                "Cancelled before it started, but its request was already in the kernel's queue: the kernel aborts it when the run before it is stopped, or it is interrupted as it starts."
                    .into(),
            );
            return false;
        }
        run.notices.push(notice.to_string());
        run.set_status(RunStatus::Cancelled);
        self.runs.dequeue(id.as_str());
        true
    }
}
