//! The actor's answers to commands: submit, read runs and pages, interrupt, cancel, input,
//! history, shell requests. Each handler changes state and replies; starting the next run is
//! left to the loop's `advance`.

use std::ops::ControlFlow;

use super::*;
use crate::session::run::{Interrupting, Phase, Run, page_part};

impl Actor {
    /// Answer `cmd`; `Break` when the session is over (destroyed).
    pub(super) async fn handle_command(&mut self, cmd: Command) -> ControlFlow<()> {
        let now = chrono::Utc::now();
        if !matches!(cmd, Command::CheckExpired(_)) {
            self.last_activity = now;
        }
        if !matches!(cmd, Command::CheckExpired(_) | Command::Info(_)) {
            self.idle_since = now;
        }
        self.agent_used |= matches!(
            cmd,
            Command::Submit(..)
                | Command::Request { .. }
                | Command::SendInput(..)
                | Command::Cancel(..)
                | Command::Interrupt(_)
                | Command::Fork { .. }
                | Command::ClearQueue(_)
                | Command::DeleteHistory { .. }
        );
        match cmd {
            Command::Renew(after, reply) => {
                if let Some(after) = after {
                    self.expires_after = after;
                }
                let _ = reply.send(self.info());
            }
            Command::CheckExpired(reply) => {
                let _ = reply.send(self.check_expired());
            }
            Command::ClearQueue(reply) => {
                let _ = reply.send(self.clear_queue());
            }
            Command::Submit(req, reply, settled) if req.subshell => {
                self.submit_side(req, reply, settled).await
            }
            Command::Submit(req, reply, settled) => {
                let submitted = self.submit(req);
                if let (Ok((id, _)), Some(tx)) = (&submitted, settled) {
                    self.settle_waiters.push((id.clone(), tx));
                }
                // The run starts (its execute_request goes out when the kernel is free) before
                // the caller hears of it: the kernel gets the code first, and the caller's
                // thread wakes while the kernel runs it.
                if submitted.is_ok() {
                    self.advance().await;
                }
                let _ = reply.send(submitted);
            }
            Command::GetRun(id, reply) => {
                let bounds = self.bounds;
                let _ = reply.send(self.runs.get_mut(id.as_str()).map(|r| r.snapshot(&bounds)));
            }
            Command::WatchRun(id, reply) => {
                let _ = reply.send(self.runs.get(id.as_str()).map(|r| r.watch()));
            }
            Command::Page {
                run,
                part,
                offset,
                limit,
                reply,
            } => {
                let page = self
                    .runs
                    .get_mut(run.as_str())
                    .map(|r| page_part(r, part, offset, limit));
                let _ = reply.send(page);
            }
            Command::RunTail(id, reply) => {
                let _ = reply.send(self.runs.get_mut(id.as_str()).map(|r| r.last_line()));
            }
            Command::Info(reply) => {
                let _ = reply.send(self.info());
            }
            Command::Interrupt(reply) => {
                let current = self.runs.current_id().cloned();
                let notice = match current {
                    Some(_) => self.interrupt_current().await,
                    None => self.other_cell_notice(),
                };
                let _ = reply.send((self.info(), current, notice));
            }
            Command::InterruptKernel(by, reply) => {
                let current = self.runs.current_id().cloned();
                let behind = self
                    .runs
                    .current()
                    .and_then(|r| r.phase.executing())
                    .is_some_and(|e| e.behind.is_some() && !e.began);
                if current.is_some() && !behind {
                    let notice = format!("Interrupted by {by}, not by this session.");
                    if let Some(run) = self.runs.current_mut()
                        && !run.notices.contains(&notice)
                    {
                        run.notices.push(notice);
                    }
                    self.interrupt_current().await;
                } else {
                    // Whatever the kernel runs (another client's cell): the caller's to stop.
                    self.interrupt_kernel().await;
                }
                let _ = reply.send((self.info(), current));
            }
            Command::NoteClient { session, who } => self.note_client(session, who),
            Command::UsedByAgents(reply) => {
                let used = self.agent_used
                    || self.runs.current_id().is_some()
                    || self.runs.queue_len() > 0;
                let _ = reply.send(used);
            }
            Command::Restart {
                clear_history,
                reply,
            } => {
                if clear_history {
                    self.history.clear();
                    self.journal_append(&JournalRecord::Cleared);
                    self.history_changed();
                }
                self.restart(reply)
            }
            Command::History { start, end, reply } => {
                let _ = reply.send((self.history.slice(start, end), self.history.len()));
            }
            Command::DeleteHistory { start, end, reply } => {
                let removed = self.history.delete(start, end).map_err(|e| {
                    SessionError::InvalidArgument(format!("Nothing was deleted: {e}."))
                });
                if let Ok(removed) = &removed {
                    self.journal_append(&JournalRecord::Deleted(removed.clone()));
                    self.history_changed();
                }
                let _ = reply.send(removed.map(|r| r.len()));
            }
            Command::Request {
                msg_type,
                content,
                busy,
                timeout,
                reply,
            } => {
                self.shell_request(msg_type, content, busy, timeout, reply)
                    .await
            }
            Command::Fork {
                content,
                timeout,
                reply,
            } => self.begin_fork(content, timeout, reply).await,
            Command::EndFork(reply) => {
                self.fork_hold = None;
                let _ = reply.send(());
            }
            Command::SeedHistory(entries, reply) => {
                self.seed_history(entries);
                let _ = reply.send(());
            }
            Command::SendInput(id, value, reply) => {
                let _ = reply.send(self.send_input(&id, value).await);
            }
            Command::Cancel(id, reply) => {
                let _ = reply.send(self.cancel(&id).await);
            }
            Command::Destroy(reply) => {
                let rung = self.destroy().await;
                let _ = reply.send(rung);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

impl Actor {
    pub(super) fn submit(&mut self, req: ExecuteRequest) -> Result<Submitted, SessionError> {
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
    pub(super) fn check_generation(&self, expected: Option<u64>) -> Result<(), SessionError> {
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

    /// Interrupt the current run: an interrupt that is already under way and has not given
    /// up goes on; one that gave up starts over (its grace counts again). A run that waits
    /// in the kernel behind another client's cell is stopped when it starts instead (that
    /// cell is never interrupted for it): the notice saying so is returned.
    pub(super) async fn interrupt_current(&mut self) -> Option<String> {
        let now = Instant::now();
        if let Some(notice) = self.defer_interrupt() {
            return Some(notice);
        }
        let run = self.runs.current_mut()?;
        if run.status() == RunStatus::AwaitingInput {
            run.set_status(RunStatus::Running);
        }
        run.input = None;
        match &mut run.phase {
            Phase::CheckingComplete { interrupted, .. } => {
                // The code was not sent: it never runs. Nothing to signal.
                *interrupted = true;
                return None;
            }
            Phase::Executing(e) => match &mut e.interrupt {
                Some(i) if !i.gave_up => i.last_sent = now,
                slot => *slot = Some(Interrupting::new(now)),
            },
            Phase::Queued | Phase::Done => return None,
        }
        self.interrupt_kernel().await;
        None
    }

    async fn cancel(&mut self, id: &RunId) -> Result<(), SessionError> {
        let status = self
            .runs
            .get(id.as_str())
            .ok_or_else(|| SessionError::RunNotFound(id.to_string()))?
            .status();
        match status {
            RunStatus::Queued => {
                self.runs.dequeue(id.as_str());
                if let Some(run) = self.runs.get_mut(id.as_str()) {
                    run.notices
                        .push("Cancelled before it started; it never ran.".into());
                    run.set_status(RunStatus::Cancelled);
                }
                self.runs.finished(id.clone());
            }
            RunStatus::Running | RunStatus::AwaitingInput if self.runs.current_id() == Some(id) => {
                self.interrupt_current().await;
            }
            _ => {}
        }
        Ok(())
    }

    async fn send_input(
        &mut self,
        id: &RunId,
        value: String,
    ) -> Result<watch::Receiver<RunStatus>, SessionError> {
        let run = self
            .runs
            .get_mut(id.as_str())
            .ok_or_else(|| SessionError::RunNotFound(id.to_string()))?;
        let Some((request, _)) = run.input.take() else {
            return Err(SessionError::NotAwaitingInput {
                run: id.clone(),
                status: run.status().as_str(),
            });
        };
        run.set_status(RunStatus::Running);
        let rx = run.watch();
        self.answer_input(&request, value).await;
        Ok(rx)
    }

    /// Send `input_reply` with `value` to the kernel's `input_request`.
    pub(super) async fn answer_input(&mut self, request: &Message, value: String) {
        let Some(kernel) = self.kernel.as_ref() else {
            return;
        };
        let msg = kernel.reply(request, "input_reply", json!({ "value": value }));
        if let Err(e) = self.send(Channel::Stdin, &msg).await {
            tracing::warn!(session = %self.desc.id, "input_reply not sent: {e}");
        }
    }

    /// A shell request: to the main shell when no run executes, else as `busy` says.
    async fn shell_request(
        &mut self,
        msg_type: String,
        content: Value,
        busy: WhileBusy,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
    ) {
        if self.runs.current_id().is_some() {
            match busy {
                WhileBusy::Refuse => {
                    let _ = reply.send(Err(self.busy_error()));
                }
                WhileBusy::Subshell => self.request_beside(msg_type, content, timeout, reply).await,
            }
            return;
        }
        self.send_request(msg_type, content, timeout, reply, None)
            .await;
    }

    /// Send a shell request (to `subshell` when given) and wait for its reply by msg_id.
    /// Returns false when it was not sent (the reply then has the error).
    pub(super) async fn send_request(
        &mut self,
        msg_type: String,
        content: Value,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
        subshell: Option<String>,
    ) -> bool {
        if self.pending.len() >= MAX_PENDING_REQUESTS {
            let _ = reply.send(Err(SessionError::LimitExceeded(format!(
                "Session '{}' already has {MAX_PENDING_REQUESTS} requests waiting for the kernel; wait for them.",
                self.desc.id
            ))));
            return false;
        }
        let Some(kernel) = self.kernel.as_ref() else {
            let why = format!("it is {}", self.status().as_str());
            let _ = reply.send(Err(SessionError::Dead {
                session: self.desc.id.clone(),
                why,
            }));
            return false;
        };
        let mut msg = kernel.request(&msg_type, content);
        msg.header.subshell_id = subshell;
        match self.send(Channel::Shell, &msg).await {
            Ok(()) => {
                let pending = Pending {
                    msg_type,
                    deadline: Instant::now() + timeout,
                    timeout,
                    reply,
                };
                self.pending.insert(MsgId::from(msg.msg_id()), pending);
                true
            }
            Err(e) => {
                let _ = reply.send(Err(SessionError::Internal(format!(
                    "{msg_type} not sent: {e}"
                ))));
                false
            }
        }
    }

    /// Answer every pending request past its deadline with an error, and forget it.
    pub(super) fn expire_requests(&mut self) {
        let now = Instant::now();
        let expired: Vec<MsgId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                let _ = p.reply.send(Err(SessionError::NoReply {
                    msg_type: p.msg_type,
                    timeout_s: p.timeout.as_secs(),
                }));
            }
        }
    }
}
