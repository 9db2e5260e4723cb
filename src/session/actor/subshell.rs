//! Kernel subshells (JEP 91) for the session actor: shell requests that answer while a run
//! executes, and side runs (`execute(subshell=true)`) that execute beside it.
//!
//! A kernel whose `kernel_info_reply` lists `"kernel subshells"` in `supported_features`
//! (ipykernel >= 7) runs a shell request whose header carries a `subshell_id` on that
//! subshell's own thread, so it is not queued behind the main shell's execute. The session
//! creates one subshell on first need (`create_subshell_request` on control) and keeps it for
//! its kernel's life: a new kernel (restart, recovery) starts without one, and the subshell
//! goes with its kernel. While it is being created, what needs it waits here, bounded by
//! [`SUBSHELL_CREATE_TIMEOUT`]; a kernel that has no subshells, refuses, or does not answer
//! keeps today's answers (`SESSION_BUSY`).
//!
//! Side runs are ordinary runs (their own run id and bounded output, correlated by the
//! execute_request's msg_id like every run) that skip the queue and the history. They cannot
//! be interrupted: SIGINT and `interrupt_request` reach the main shell's code, not theirs. A
//! side run past its time limit is given up (status `timeout`) and left in the kernel, and the
//! next need gets a fresh subshell (at most [`MAX_SUBSHELLS`] per kernel), so one stuck side
//! run does not leave the session blind again.

use super::*;
use crate::session::run::{Executing, Phase, Run, Timing};
use crate::wire::Execute;

/// How long the kernel may take to answer `create_subshell_request`.
pub const SUBSHELL_CREATE_TIMEOUT: Duration = Duration::from_secs(5);
/// A side run's time limit when the call gives none.
pub const SIDE_RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Side runs executing at once per session.
pub const MAX_SIDE_RUNS: usize = 8;
/// Subshells one kernel gets (one, plus a fresh one each time a side run is given up).
pub const MAX_SUBSHELLS: u32 = 4;

/// The session's subshell in its current kernel, and what waits for it.
#[derive(Default)]
pub(super) struct Subshells {
    state: State,
    /// Subshells asked for in this kernel.
    created: u32,
    waiting: Vec<Deferred>,
}

#[derive(Default)]
enum State {
    /// None asked for yet in this kernel.
    #[default]
    Absent,
    /// `create_subshell_request` is out.
    Creating {
        msg_id: MsgId,
        since: Instant,
    },
    Ready(String),
    /// The kernel could not give one; the reason, for the log.
    Failed(String),
}

/// What waits for the subshell being created.
pub(super) enum Deferred {
    Request {
        msg_type: String,
        content: Value,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
    },
    Run {
        req: ExecuteRequest,
        reply: Reply<Result<Submitted, SessionError>>,
        settled: Option<Reply<ExecutionResult>>,
    },
}

/// Whether a subshell can take a request now.
enum Availability {
    Ready(String),
    /// Being created: the caller's request waits in [`Subshells::waiting`].
    Pending,
    Unavailable,
}

impl Subshells {
    /// When the subshell being created is given up.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::Creating { since, .. } => Some(since + SUBSHELL_CREATE_TIMEOUT),
            _ => None,
        }
    }

    /// The id of the `create_subshell_request` out, if any.
    fn creating(&self) -> Option<&MsgId> {
        match &self.state {
            State::Creating { msg_id, .. } => Some(msg_id),
            _ => None,
        }
    }
}

impl Actor {
    /// The subshell, creating it on first need. Unavailable for kernels without subshells and
    /// after the kernel failed to give one.
    async fn subshell(&mut self) -> Availability {
        if !self.quirks.subshells || self.kernel.is_none() {
            return Availability::Unavailable;
        }
        match &self.subshells.state {
            State::Ready(id) => return Availability::Ready(id.clone()),
            State::Creating { .. } => return Availability::Pending,
            State::Failed(_) => return Availability::Unavailable,
            State::Absent if self.subshells.created >= MAX_SUBSHELLS => {
                return Availability::Unavailable;
            }
            State::Absent => {}
        }
        let Some(kernel) = self.kernel.as_ref() else {
            return Availability::Unavailable;
        };
        let msg = kernel.request("create_subshell_request", json!({}));
        self.subshells.created += 1;
        match self.send(Channel::Control, &msg).await {
            Ok(()) => {
                self.subshells.state = State::Creating {
                    msg_id: MsgId::from(msg.msg_id()),
                    since: Instant::now(),
                };
                Availability::Pending
            }
            Err(e) => {
                self.subshells.state = State::Failed(format!("create_subshell_request: {e}"));
                Availability::Unavailable
            }
        }
    }

    /// A shell request while a run executes: on the subshell, or `SESSION_BUSY` (today's
    /// answer) where there is none.
    pub(super) async fn request_beside(
        &mut self,
        msg_type: String,
        content: Value,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
    ) {
        match self.subshell().await {
            Availability::Ready(id) => {
                self.send_request(msg_type, content, timeout, reply, Some(id))
                    .await;
            }
            Availability::Pending => self.subshells.waiting.push(Deferred::Request {
                msg_type,
                content,
                timeout,
                reply,
            }),
            Availability::Unavailable => {
                let _ = reply.send(Err(self.busy_error()));
            }
        }
    }

    /// `SESSION_BUSY` for the current run (or for the fork that holds the runs).
    pub(super) fn busy_error(&self) -> SessionError {
        match self.runs.current_id() {
            Some(run) => SessionError::Busy {
                session: self.desc.id.clone(),
                run: run.clone(),
            },
            None => SessionError::Forking {
                session: self.desc.id.clone(),
            },
        }
    }

    /// `execute(subshell=true)`: a side run on the subshell, started at once. Without a
    /// subshell it is an ordinary run (out of history) when the session is idle, and
    /// `SESSION_BUSY` when a run executes.
    pub(super) async fn submit_side(
        &mut self,
        req: ExecuteRequest,
        reply: Reply<Result<Submitted, SessionError>>,
        settled: Option<Reply<ExecutionResult>>,
    ) {
        if let Err(e) = self.check_generation(req.expected_generation) {
            let _ = reply.send(Err(e));
            return;
        }
        match self.subshell().await {
            Availability::Ready(id) => {
                let submitted = self.start_side_run(req, id).await;
                self.answer_submit(submitted, reply, settled);
            }
            Availability::Pending => self.subshells.waiting.push(Deferred::Run {
                req,
                reply,
                settled,
            }),
            Availability::Unavailable => self.side_on_main_shell(req, reply, settled),
        }
    }

    /// A side run where no subshell can take it: queued as an ordinary run, out of history,
    /// when nothing runs; `SESSION_BUSY` otherwise.
    fn side_on_main_shell(
        &mut self,
        mut req: ExecuteRequest,
        reply: Reply<Result<Submitted, SessionError>>,
        settled: Option<Reply<ExecutionResult>>,
    ) {
        if self.runs.current_id().is_some() || self.runs.queue_len() > 0 || self.fork_hold.is_some()
        {
            let _ = reply.send(Err(self.busy_error()));
            return;
        }
        req.store_history = false;
        req.notices.push(
            "This kernel has no subshells (they need ipykernel 7 or later), so the code ran on the main shell; the session was idle.".into(),
        );
        let submitted = self.enqueue(req);
        self.answer_submit(submitted, reply, settled);
    }

    /// Reply to a submit, and keep its settle waiter when it was queued.
    fn answer_submit(
        &mut self,
        submitted: Result<Submitted, SessionError>,
        reply: Reply<Result<Submitted, SessionError>>,
        settled: Option<Reply<ExecutionResult>>,
    ) {
        if let (Ok((id, _)), Some(tx)) = (&submitted, settled) {
            self.settle_waiters.push((id.clone(), tx));
        }
        let _ = reply.send(submitted);
    }

    /// Send `req` to subshell `subshell_id` as a side run. Errors: `QUEUE_FULL` past
    /// [`MAX_SIDE_RUNS`], `SESSION_DEAD` without a kernel.
    async fn start_side_run(
        &mut self,
        req: ExecuteRequest,
        subshell_id: String,
    ) -> Result<Submitted, SessionError> {
        let waiting = self.runs.side_ids().len();
        if waiting >= MAX_SIDE_RUNS {
            return Err(SessionError::QueueFull {
                session: self.desc.id.clone(),
                waiting,
            });
        }
        let Some(kernel) = self.kernel.as_ref() else {
            return Err(SessionError::Dead {
                session: self.desc.id.clone(),
                why: format!("it is {}", self.status().as_str()),
            });
        };
        let content = Execute {
            code: &req.code,
            silent: false,
            store_history: false,
            allow_stdin: false,
            stop_on_error: false,
        };
        let mut msg = kernel.request("execute_request", content.content());
        msg.header.subshell_id = Some(subshell_id);
        let timeout = req.timeout.unwrap_or(SIDE_RUN_TIMEOUT);
        let mut run = Run::new(
            req.run_id.clone(),
            self.desc.id.clone(),
            req.code,
            false,
            Some(timeout),
            Vec::new(),
        );
        run.notices.extend(req.notices);
        run.generation = self.generation;
        run.quirks = self.quirks;
        let now = Instant::now();
        run.started_at = Some(now);
        run.phase = Phase::Executing(Executing::new(now));
        run.set_status(RunStatus::Running);
        let rx = run.watch();
        self.runs.start_side(run);
        self.runs
            .index_msg(MsgId::from(msg.msg_id()), req.run_id.clone());
        if let Err(e) = self.send(Channel::Shell, &msg).await {
            if let Some(run) = self.runs.get_mut(req.run_id.as_str()) {
                run.notices
                    .push(format!("The code could not be sent to the kernel: {e}"));
                run.set_status(RunStatus::Error);
            }
            self.record_finished(req.run_id.clone());
        }
        Ok((req.run_id, rx))
    }

    /// A control-channel reply to our `create_subshell_request`: the subshell is ready (or
    /// not), and what waited for it goes on. False if `msg` is not that reply.
    pub(super) async fn subshell_reply(&mut self, msg: &Message) -> bool {
        if self.subshells.creating().map(|m| m.as_str()) != msg.parent_msg_id() {
            return false;
        }
        let id = msg.content["subshell_id"]
            .as_str()
            .filter(|_| msg.content["status"] == "ok");
        self.subshells.state = match id {
            Some(id) => State::Ready(id.to_string()),
            None => State::Failed(format!("the kernel refused a subshell: {}", msg.content)),
        };
        if let State::Failed(why) = &self.subshells.state {
            tracing::warn!(session = %self.desc.id, "{why}");
        }
        self.resume_waiting().await;
        true
    }

    /// The subshell did not come in time: what waited gets today's answers.
    pub(super) async fn subshell_timed_out(&mut self) {
        if self
            .subshells
            .deadline()
            .is_some_and(|d| d <= Instant::now())
        {
            tracing::warn!(session = %self.desc.id, "no reply to create_subshell_request");
            self.subshells.state = State::Failed("no reply to create_subshell_request".into());
            self.resume_waiting().await;
        }
    }

    /// Send or answer everything that waited for the subshell.
    async fn resume_waiting(&mut self) {
        for waiting in std::mem::take(&mut self.subshells.waiting) {
            match waiting {
                // A run that ended meanwhile: the main shell is free again.
                Deferred::Request {
                    msg_type,
                    content,
                    timeout,
                    reply,
                } if self.runs.current_id().is_none() => {
                    self.send_request(msg_type, content, timeout, reply, None)
                        .await;
                }
                Deferred::Request {
                    msg_type,
                    content,
                    timeout,
                    reply,
                } => self.request_beside(msg_type, content, timeout, reply).await,
                Deferred::Run {
                    req,
                    reply,
                    settled,
                } => self.submit_side(req, reply, settled).await,
            }
        }
    }

    /// A new kernel (or none): its subshell, if any, went with the old one; what waited is
    /// answered `error`.
    pub(super) fn reset_subshells(&mut self, err: &SessionError) {
        for waiting in std::mem::take(&mut self.subshells.waiting) {
            match waiting {
                Deferred::Request { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                Deferred::Run { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
        self.subshells = Subshells::default();
    }

    /// The nearest deadline of the side runs.
    pub(super) fn side_deadline(&self) -> Option<(Instant, Due)> {
        self.runs
            .side_ids()
            .iter()
            .filter_map(|id| {
                let run = self.runs.get(id.as_str())?;
                let timing = Timing {
                    iopub_grace: self.limits.iopub_grace(),
                    interrupt_grace: self.limits.interrupt_grace(),
                    timeout: run.timeout,
                    probe_terminal: false,
                };
                let (at, d) = run.phase.next_deadline(&timing, false)?;
                Some((at, Due::Side(id.clone(), d)))
            })
            .min_by_key(|(at, _)| *at)
    }

    /// A side run's deadline came.
    pub(super) fn side_run_deadline(&mut self, id: RunId, due: Deadline) {
        let Some(run) = self.runs.get_mut(id.as_str()) else {
            return;
        };
        let Some(e) = run.phase.executing_mut() else {
            return;
        };
        match due {
            Deadline::IdleMissing => {
                e.idle = true;
                run.notices.push(
                    "The kernel replied but never reported idle; output may be incomplete.".into(),
                );
            }
            Deadline::ProbeReply => {
                // Idle came and the reply did not: the kernel is done with the request.
                e.reply_dropped = true;
            }
            Deadline::RunTimeout => {
                let limit = run.timeout.unwrap_or_default().as_secs_f64();
                run.notices.push(format!(
                    "Gave up after {limit} s. A subshell run cannot be interrupted (an interrupt reaches the main shell's run), so it may still be running in the kernel; what it prints from now on is dropped. Later requests use a new subshell."
                ));
                run.set_status(RunStatus::Timeout);
                self.record_finished(id);
                // The subshell is stuck behind that code: the next need creates another.
                if matches!(self.subshells.state, State::Ready(_)) {
                    self.subshells.state = State::Absent;
                }
            }
            // No interrupts and no terminal probe for side runs.
            _ => {}
        }
    }

    /// Finish the side runs whose reply and idle are in.
    pub(super) fn settle_side_runs(&mut self) {
        let done: Vec<RunId> = self
            .runs
            .side_ids()
            .iter()
            .filter(|id| {
                self.runs
                    .get(id.as_str())
                    .and_then(|r| r.phase.executing())
                    .is_some_and(|e| e.is_complete())
            })
            .cloned()
            .collect();
        for id in done {
            if let Some(run) = self.runs.get_mut(id.as_str()) {
                let status = run.final_status();
                run.set_status(status);
            }
            self.record_finished(id);
        }
    }

    /// End every side run with `status` and `notice` (the kernel died or was replaced, or the
    /// session ends).
    pub(super) fn end_side_runs(&mut self, status: RunStatus, notice: &str) {
        for id in self.runs.side_ids().to_vec() {
            if let Some(run) = self.runs.get_mut(id.as_str()) {
                run.notices.push(notice.to_string());
                run.set_status(status);
            }
            self.record_finished(id);
        }
    }
}
