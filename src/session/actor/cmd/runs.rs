//! Commands on runs: submit one, read its record, status, pages and last line, answer its
//! `input()`, cancel it, or cancel every queued run.

use tokio::sync::{oneshot, watch};

use super::{Activity, Answer, SessionCommand};
use crate::kernel::Channel;
use crate::session::actor::{Actor, ExecuteRequest, Settled, Submitted};
use crate::session::error::SessionError;
use crate::session::history::HistoryEntry;
use crate::session::ids::RunId;
use crate::session::run::{Part, Run, page_part};
use crate::session::text::StreamPage;
use crate::session::types::{ExecutionResult, RunStatus};
use crate::wire::Message;

/// Queue a run (or, with `request.subshell`, start it beside the queue); answers its id and a
/// receiver of its status. Errors: `SESSION_DEAD`, `STATE_CHANGED`, `QUEUE_FULL`
/// (`SESSION_BUSY` for a side run where the kernel has no subshell and a run executes).
pub struct Submit {
    pub request: ExecuteRequest,
    /// Where the run's record goes once it settles (final, or awaiting input); see
    /// [`Submit::settled`].
    pub deliver: Option<oneshot::Sender<ExecutionResult>>,
}

impl SessionCommand for Submit {
    type Output = Submitted;
    const ACTIVITY: Activity = Activity::Work;
}

impl Submit {
    /// Submit `request`.
    pub fn new(request: ExecuteRequest) -> Submit {
        Submit {
            request,
            deliver: None,
        }
    }

    /// Submit `request`, and receive its record once it settles: one handoff where watching
    /// the status and then asking for the record takes three.
    pub fn settled(request: ExecuteRequest) -> (Submit, Settled) {
        let (tx, rx) = oneshot::channel();
        let submit = Submit {
            request,
            deliver: Some(tx),
        };
        (submit, rx)
    }

    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        if self.request.subshell {
            return actor.submit_side(self.request, answer, self.deliver).await;
        }
        let submitted = actor.enqueue(self.request);
        if let (Ok((id, _)), Some(tx)) = (&submitted, self.deliver) {
            actor.settle_waiters.push((id.clone(), tx));
        }
        // The run starts (its execute_request goes out when the kernel is free) before the
        // caller hears of it: the kernel gets the code first, and the caller's thread wakes
        // while the kernel runs it.
        if submitted.is_ok() {
            actor.advance().await;
        }
        let _ = answer.send(submitted);
    }
}

/// The run's record now (every part bounded). Errors: `EXECUTION_NOT_FOUND`.
pub struct GetRun {
    pub run: RunId,
}

impl SessionCommand for GetRun {
    type Output = ExecutionResult;
    const ACTIVITY: Activity = Activity::Use;
}

impl GetRun {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let bounds = actor.bounds;
        let record = actor
            .runs
            .get_mut(self.run.as_str())
            .map(|r| r.snapshot(&bounds))
            .ok_or_else(|| SessionError::RunNotFound(self.run.to_string()));
        let _ = answer.send(record);
    }
}

/// A receiver of the run's status changes. Errors: `EXECUTION_NOT_FOUND`.
pub struct WatchRun {
    pub run: RunId,
}

impl SessionCommand for WatchRun {
    type Output = watch::Receiver<RunStatus>;
    const ACTIVITY: Activity = Activity::Use;
}

impl WatchRun {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let rx = actor
            .runs
            .get(self.run.as_str())
            .map(|r| r.watch())
            .ok_or_else(|| SessionError::RunNotFound(self.run.to_string()));
        let _ = answer.send(rx);
    }
}

/// A page of one part of a run (stdout, stderr, result, traceback): bytes
/// `[offset, offset + limit)` of its full text. Errors: `EXECUTION_NOT_FOUND`.
pub struct Page {
    pub run: RunId,
    pub part: Part,
    /// Where the page starts, in bytes.
    pub offset: usize,
    /// The most bytes it holds.
    pub limit: usize,
}

impl SessionCommand for Page {
    type Output = StreamPage;
    const ACTIVITY: Activity = Activity::Use;
}

impl Page {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let page = actor
            .runs
            .get_mut(self.run.as_str())
            .map(|r| page_part(r, self.part, self.offset, self.limit))
            .ok_or_else(|| SessionError::RunNotFound(self.run.to_string()));
        let _ = answer.send(page);
    }
}

/// The run's latest output line (or its status), for progress messages; `None` for a run
/// the session does not hold.
pub struct RunTail {
    pub run: RunId,
}

impl SessionCommand for RunTail {
    type Output = Option<String>;
    const ACTIVITY: Activity = Activity::Use;
}

impl RunTail {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let tail = actor.runs.get_mut(self.run.as_str()).map(|r| r.last_line());
        let _ = answer.send(Ok(tail));
    }
}

/// The run's outputs so far as a history entry (what a notebook cell shows of it), when
/// they changed since `seen` (a count [`RunEntry`] answered before; 0 at first): the count
/// now and the entry, or `None` when nothing changed. Errors: `EXECUTION_NOT_FOUND`.
pub struct RunEntry {
    pub run: RunId,
    pub seen: u64,
}

impl SessionCommand for RunEntry {
    type Output = Option<(u64, HistoryEntry)>;
    const ACTIVITY: Activity = Activity::Use;
}

impl RunEntry {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let entry = actor
            .runs
            .get_mut(self.run.as_str())
            .map(|r| {
                let now = r.output.changes();
                (now != self.seen).then(|| (now, r.history_entry()))
            })
            .ok_or_else(|| SessionError::RunNotFound(self.run.to_string()));
        let _ = answer.send(entry);
    }
}

/// Answer the run's `input()` prompt with `value`; answers a receiver of its status.
/// Errors: `EXECUTION_NOT_FOUND`, `NOT_AWAITING_INPUT`.
pub struct SendInput {
    pub run: RunId,
    pub value: String,
}

impl SessionCommand for SendInput {
    type Output = watch::Receiver<RunStatus>;
    const ACTIVITY: Activity = Activity::Work;
}

impl SendInput {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let _ = answer.send(self.send(actor).await);
    }

    async fn send(self, actor: &mut Actor) -> Result<watch::Receiver<RunStatus>, SessionError> {
        let id = self.run;
        let run = actor
            .runs
            .get_mut(id.as_str())
            .ok_or_else(|| SessionError::RunNotFound(id.to_string()))?;
        let Some((request, _)) = run.input.take() else {
            return Err(SessionError::NotAwaitingInput {
                status: run.status().as_str(),
                run: id,
            });
        };
        run.set_status(RunStatus::Running);
        let rx = run.watch();
        actor.answer_input(&request, self.value).await;
        Ok(rx)
    }
}

/// Remove a queued run (it never runs), or interrupt a running one; a finished run is left
/// as it is. Errors: `EXECUTION_NOT_FOUND`.
pub struct Cancel {
    pub run: RunId,
}

impl SessionCommand for Cancel {
    type Output = ();
    const ACTIVITY: Activity = Activity::Work;
}

impl Cancel {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let _ = answer.send(self.cancel(actor).await);
    }

    async fn cancel(self, actor: &mut Actor) -> Result<(), SessionError> {
        let id = self.run;
        let status = actor
            .runs
            .get(id.as_str())
            .ok_or_else(|| SessionError::RunNotFound(id.to_string()))?
            .status();
        if status == RunStatus::Queued {
            if actor.cancel_queued_run(&id, "Cancelled before it started; it never ran.") {
                actor.runs.finished(id);
            }
            return Ok(());
        }
        match status {
            RunStatus::Running | RunStatus::AwaitingInput
                if actor.runs.current_id() == Some(&id) =>
            {
                actor.interrupt_current().await;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Cancel every queued run (the running one goes on); answers their ids.
pub struct ClearQueue;

impl SessionCommand for ClearQueue {
    type Output = Vec<RunId>;
    const ACTIVITY: Activity = Activity::Work;
}

impl ClearQueue {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let ids: Vec<RunId> = actor.runs.queued().map(|r| r.id.clone()).collect();
        for id in &ids {
            let notice = "Cancelled by clear_queue before it started; it never ran.";
            if actor.cancel_queued_run(id, notice) {
                actor.record_finished(id.clone());
            }
        }
        let _ = answer.send(Ok(ids));
    }
}

impl Actor {
    /// Queue a run for `req`. Errors: as [`Submit`]'s.
    pub(in crate::session::actor) fn enqueue(
        &mut self,
        req: ExecuteRequest,
    ) -> Result<Submitted, SessionError> {
        self.check_generation(req.expected_generation)?;
        let mut run = Run::new(
            req.run_id.clone(),
            self.desc.id.clone(),
            req.code,
            req.store_history,
            req.timeout,
            req.stdin,
        );
        run.notices.extend(req.notices);
        run.queue_timeout = req.queue_timeout;
        run.follows = req.follows;
        run.trace = crate::telemetry::RunTrace::queued(
            &req.trace,
            &run.session_id,
            run.id.as_str(),
            &run.code,
        );
        // The kernel it is expected to run in; set again when it starts.
        run.generation = self.generation.max(1);
        let rx = run.watch();
        self.runs
            .enqueue(run)
            .map_err(|full| SessionError::QueueFull {
                session: self.desc.id.clone(),
                waiting: full.waiting,
            })?;
        Ok((req.run_id, rx))
    }

    /// Fails unless the session has (or is starting) a kernel, at `expected` when given.
    /// Errors: `SESSION_DEAD`, `STATE_CHANGED`.
    pub(in crate::session::actor) fn check_generation(
        &self,
        expected: Option<u64>,
    ) -> Result<(), SessionError> {
        if self.kernel.is_none() && self.starting.is_none() {
            let why = match &self.start_failure {
                Some(e) => format!("its kernel could not be started: {e}"),
                None => "its kernel could not be started".into(),
            };
            return Err(SessionError::Dead {
                session: self.desc.id.clone(),
                why,
            });
        }
        if let Some(expected) = expected {
            let upcoming = if self.kernel.is_some() {
                self.generation
            } else {
                self.generation + 1
            };
            if expected != upcoming {
                return Err(SessionError::StateChanged {
                    session: self.desc.id.clone(),
                    generation: upcoming,
                    expected,
                });
            }
        }
        Ok(())
    }

    /// Send `input_reply` with `value` to the kernel's `input_request`.
    pub(in crate::session::actor) async fn answer_input(
        &mut self,
        request: &Message,
        value: String,
    ) {
        let Some(kernel) = self.kernel.as_ref() else {
            return;
        };
        let msg = kernel.reply(
            request,
            "input_reply",
            serde_json::json!({ "value": value }),
        );
        if let Err(e) = self.send(Channel::Stdin, &msg).await {
            tracing::warn!(session = %self.desc.id, "input_reply not sent: {e}");
        }
    }
}
