//! Running code for the session actor: the queue, sending `execute_request` (after an
//! `is_complete_request` for kernels that need it), routing kernel messages to runs, stdin,
//! completion (reply + idle), deadlines (iopub grace, timeouts, interrupt escalation, the
//! terminal probe), cancellation and bookkeeping of finished runs.

use super::*;

impl Actor {
    pub(super) async fn send_input(
        &mut self,
        run_id: &str,
        value: String,
    ) -> Result<watch::Receiver<RunStatus>, SessionError> {
        let run = self.runs.get_mut(run_id).ok_or_else(|| not_found(run_id))?;
        let Some(request) = run.input_request.take() else {
            return Err(SessionError::new(
                ErrorCode::NotAwaitingInput,
                format!(
                    "Run '{run_id}' is {} and not waiting for input.",
                    run.status.as_str()
                ),
            ));
        };
        run.prompt = None;
        run.set_status(RunStatus::Running);
        let rx = run.watch();
        if let Some(k) = self.kernel.as_mut() {
            let msg = k.reply(&request, "input_reply", json!({"value": value}));
            if let Err(e) = k.send(Channel::Stdin, &msg).await {
                tracing::warn!("input_reply not sent: {e}");
            }
        }
        Ok(rx)
    }

    pub(super) async fn cancel(&mut self, run_id: &str) -> Result<(), SessionError> {
        let status = self
            .runs
            .get(run_id)
            .ok_or_else(|| not_found(run_id))?
            .status;
        match status {
            RunStatus::Queued => {
                self.queue.retain(|r| r != run_id);
                if let Some(run) = self.runs.get_mut(run_id) {
                    run.notices
                        .push("Cancelled before it started; it never ran.".into());
                    run.set_status(RunStatus::Cancelled);
                }
                self.finish_bookkeeping(run_id);
            }
            RunStatus::Running | RunStatus::AwaitingInput => self.interrupt_run(run_id).await,
            _ => {}
        }
        Ok(())
    }

    pub(super) async fn interrupt_run(&mut self, run_id: &str) {
        if let Some(run) = self.runs.get_mut(run_id) {
            run.interrupted_at.get_or_insert_with(Instant::now);
            run.last_interrupt_at = Some(Instant::now());
            run.input_request = None;
            run.prompt = None;
            if run.status == RunStatus::AwaitingInput {
                run.set_status(RunStatus::Running);
            }
        }
        if let Some(k) = self.kernel.as_mut() {
            k.interrupt().await;
        }
    }

    // ---- running ----

    /// Send the next queued run if the kernel is idle.
    pub(super) async fn start_next(&mut self) {
        if self.current.is_some() || self.kernel.is_none() {
            return;
        }
        let Some(run_id) = self.queue.pop_front() else {
            return;
        };
        let generation = self.generation;
        let state_reset = self.last_run_generation.is_some_and(|g| g != generation);
        self.last_run_generation = Some(generation);
        let notices = std::mem::take(&mut self.pending_notices);
        let quirks = self.quirks;
        let Some(run) = self.runs.get_mut(&run_id) else {
            return;
        };
        run.generation = generation;
        run.state_reset = state_reset;
        run.quirks = quirks;
        if state_reset {
            run.notices.push(format!(
                "State reset: this ran in a new kernel (generation {generation}); variables from earlier runs are gone."
            ));
        }
        run.notices.extend(notices);
        run.started_at = Some(Instant::now());
        run.set_status(RunStatus::Running);
        self.current = Some(run_id.clone());
        if quirks.check_complete {
            self.check_completeness(&run_id).await;
        } else {
            self.send_execute(&run_id).await;
        }
    }

    /// Ask whether the run's code is complete before executing it (see [`Quirks::check_complete`]);
    /// the reply (or a short deadline) continues in [`Self::completeness_known`].
    pub(super) async fn check_completeness(&mut self, run_id: &str) {
        let (Some(kernel), Some(run)) = (self.kernel.as_mut(), self.runs.get_mut(run_id)) else {
            return;
        };
        let msg = kernel.request("is_complete_request", json!({"code": run.code}));
        run.completeness_check = Some((msg.msg_id().to_string(), Instant::now()));
        if let Err(e) = kernel.send(Channel::Shell, &msg).await {
            tracing::warn!(session = %self.id, "is_complete_request not sent: {e}");
        }
    }

    /// The is_complete_reply (or `None` after the deadline): execute, or end the run without
    /// running incomplete code that would leave the kernel waiting for more lines.
    pub(super) async fn completeness_known(&mut self, run_id: &str, reply: Option<Value>) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.completeness_check = None;
        if run.interrupted_at.is_some() {
            // Cancelled or interrupted before it was sent: it never runs.
            run.notices
                .push("Interrupted before the code was sent to the kernel; it never ran.".into());
            run.set_status(RunStatus::Interrupted);
            self.current = None;
            self.finish_bookkeeping(run_id);
            Box::pin(self.start_next()).await;
            return;
        }
        if let Some(r) = reply.filter(|r| r["status"] == "incomplete") {
            let indent = r["indent"].as_str().unwrap_or_default();
            run.error = Some(crate::session::types::ErrorInfo {
                ename: "IncompleteInput".into(),
                evalue: "The code is incomplete (an unclosed bracket, string or block?); nothing was run.".into(),
                traceback: vec![format!(
                    "The kernel would wait for more lines{}. Complete the code and run it again.",
                    if indent.is_empty() { String::new() } else { format!(" (suggested indent {indent:?})") }
                )],
            });
            run.set_status(RunStatus::Error);
            self.current = None;
            self.finish_bookkeeping(run_id);
            Box::pin(self.start_next()).await;
            return;
        }
        self.send_execute(run_id).await;
    }

    /// Send the run's execute_request.
    pub(super) async fn send_execute(&mut self, run_id: &str) {
        let (Some(kernel), Some(run)) = (self.kernel.as_mut(), self.runs.get_mut(run_id)) else {
            return;
        };
        let msg = kernel.request(
            "execute_request",
            json!({
                "code": run.code,
                "silent": false,
                "store_history": run.store_history,
                "user_expressions": {},
                "allow_stdin": true,
                "stop_on_error": false,
            }),
        );
        run.msg_id = Some(msg.msg_id().to_string());
        self.by_msg
            .insert(msg.msg_id().to_string(), run_id.to_string());
        if let Err(e) = kernel.send(Channel::Shell, &msg).await {
            tracing::warn!(session = %self.id, "execute_request not sent: {e}");
        }
    }

    pub(super) async fn handle_kernel_event(&mut self, ev: KernelEvent) {
        if let KernelEvent::Message(Channel::Shell, msg) = &ev
            && let Some(run_id) = self.current.clone()
            && let Some(run) = self.runs.get(&run_id)
            && run.completeness_check.as_ref().map(|(id, _)| id.as_str()) == msg.parent_msg_id()
        {
            let content = msg.content.clone();
            self.completeness_known(&run_id, Some(content)).await;
            return;
        }
        self.apply_kernel_event_sync(ev);
        // Answer an input_request from the call's stdin list.
        if let Some(run_id) = self.current.clone() {
            let answer = self.runs.get_mut(&run_id).and_then(|run| {
                if run.input_request.is_some() && !run.stdin_answers.is_empty() {
                    let req = run.input_request.take()?;
                    run.prompt = None;
                    run.set_status(RunStatus::Running);
                    Some((req, run.stdin_answers.pop_front().unwrap_or_default()))
                } else {
                    None
                }
            });
            if let (Some((req, value)), Some(k)) = (answer, self.kernel.as_mut()) {
                let msg = k.reply(&req, "input_reply", json!({"value": value}));
                let _ = k.send(Channel::Stdin, &msg).await;
            }
        }
        self.check_done().await;
    }

    /// Route one kernel message to its run (no awaits: usable while draining a dead kernel).
    pub(super) fn apply_kernel_event_sync(&mut self, ev: KernelEvent) {
        let KernelEvent::Message(channel, msg) = ev else {
            if let KernelEvent::ChannelClosed(ch, e) = ev {
                tracing::debug!(session = %self.id, "{ch} reader ended: {e}");
            }
            return;
        };
        if channel == Channel::Shell
            && let Some(waiter) = msg.parent_msg_id().and_then(|p| self.pending.remove(p))
        {
            let _ = waiter.send(Ok(msg.content));
            return;
        }
        if channel == Channel::Iopub && msg.msg_type() == "update_display_data" {
            // It may update a display made by any earlier run (`display_id`), not just this one.
            for run in self.runs.values_mut() {
                run.update_display(&msg.content);
            }
            return;
        }
        let Some(run_id) = msg
            .parent_msg_id()
            .and_then(|p| self.by_msg.get(p))
            .cloned()
        else {
            if channel == Channel::Iopub && msg.msg_type() == "stream" {
                tracing::debug!(session = %self.id, "output with no run: {}", msg.content["text"]);
            }
            return;
        };
        let is_current = self.current.as_deref() == Some(run_id.as_str());
        let Some(run) = self.runs.get_mut(&run_id) else {
            return;
        };
        match channel {
            Channel::Iopub => run.apply_iopub(&msg),
            Channel::Shell if msg.msg_type() == "execute_reply" && is_current => {
                run.apply_reply(&msg.content)
            }
            Channel::Stdin if msg.msg_type() == "input_request" && is_current => {
                run.prompt = Some(crate::session::types::Prompt {
                    text: msg.content["prompt"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    password: msg.content["password"].as_bool().unwrap_or(false),
                });
                run.input_request = Some(msg);
                if run.stdin_answers.is_empty() {
                    run.set_status(RunStatus::AwaitingInput);
                }
            }
            _ => {}
        }
    }

    /// Finish the current run once its reply and idle are in.
    pub(super) async fn check_done(&mut self) {
        let Some(run_id) = self.current.clone() else {
            return;
        };
        let Some(run) = self.runs.get_mut(&run_id) else {
            return;
        };
        // No idle comes for aborted replies, except for the run an interrupt aborted (IRkernel
        // sends it after draining its queue: wait for it so the next request is not drained too).
        let no_idle_expected = run.reply_aborted() && run.interrupted_at.is_none();
        if run.reply.is_none() || !(run.idle || no_idle_expected) {
            return;
        }
        let status = run.status_from_reply();
        run.set_status(status);
        self.current = None;
        self.finish_bookkeeping(&run_id);
        self.start_next().await;
    }

    /// Deadlines: iopub grace after the reply, run timeouts, and interrupt escalation.
    pub(super) async fn check_deadlines(&mut self) {
        let now = Instant::now();
        let Some(run_id) = self.current.clone() else {
            return;
        };
        let iopub_grace = self.limits.iopub_grace();
        let interrupt_grace = self.limits.interrupt_grace();
        let Some(run) = self.runs.get_mut(&run_id) else {
            return;
        };
        if run.reply_at.is_some_and(|at| now >= at + iopub_grace) && !run.idle {
            run.notices.push(
                "The kernel replied but never reported idle; output may be incomplete.".into(),
            );
            run.idle = true;
            self.check_done().await;
            return;
        }
        if run
            .completeness_check
            .as_ref()
            .is_some_and(|(_, at)| now >= *at + COMPLETENESS_TIMEOUT)
        {
            // The kernel does not answer is_complete_request: just run the code.
            self.completeness_known(&run_id, None).await;
            return;
        }
        if self.quirks.stdin_is_terminal
            && run.status == RunStatus::Running
            && run.interrupted_at.is_none()
            && run
                .last_terminal_probe
                .unwrap_or(run.started_at.unwrap_or(now))
                + TERMINAL_PROBE_INTERVAL
                <= now
        {
            run.last_terminal_probe = Some(now);
            let pid = self.kernel.as_ref().map(|k| k.pid());
            let reading = pid.is_some_and(|pid| {
                quirks::any_reads_terminal(&crate::kernel::process::descendants(pid as i32))
            });
            run.terminal_reads = if reading { run.terminal_reads + 1 } else { 0 };
            if run.terminal_reads >= 2 {
                run.stdin_refused = true;
                run.error = Some(crate::session::types::ErrorInfo {
                    ename: "StdinNotSupported".into(),
                    evalue: "the code waited for input on the kernel's terminal, which this kernel (bash_kernel) never forwards; it was interrupted".into(),
                    traceback: vec!["Pass input another way, e.g. `read x <<< 'value'` or `echo value | cmd`.".into()],
                });
                self.interrupt_run(&run_id).await;
            }
            return;
        }
        let started = run.started_at.unwrap_or(now);
        if let Some(t) = run.timeout
            && !run.timed_out
            && now >= started + t
        {
            run.timed_out = true;
            run.notices.push(format!(
                "Timed out after {} s; the kernel was interrupted.",
                t.as_secs_f64()
            ));
            self.interrupt_run(&run_id).await;
            return;
        }
        if let (Some(at), Some(last)) = (run.interrupted_at, run.last_interrupt_at)
            && run.reply.is_none()
            && now < at + interrupt_grace
            && now >= last + INTERRUPT_REPEAT
        {
            // A signal that arrives before the kernel starts the code is ignored (ipykernel
            // only turns SIGINT into KeyboardInterrupt while executing): send it again.
            run.last_interrupt_at = Some(now);
            if let Some(k) = self.kernel.as_mut() {
                k.interrupt().await;
            }
            return;
        }
        if let Some(at) = run.interrupted_at
            && now >= at + interrupt_grace
            && run.reply.is_none()
        {
            run.notices.push(format!(
                    "The kernel did not stop within {} s of the interrupt, so it was restarted; all state in it is lost.",
                    interrupt_grace.as_secs()
                ));
            if !run.timed_out {
                run.set_status(RunStatus::Interrupted);
            } else {
                run.set_status(RunStatus::Timeout);
            }
            self.current = None;
            self.finish_bookkeeping(&run_id);
            self.pending_notices.push(
                    "The previous kernel was restarted after an interrupt did not take effect; this run executed in a new kernel.".into(),
                );
            let old = self.kernel.take();
            self.start_kernel(StartReason::Recover, old);
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let run = self.runs.get(self.current.as_ref()?)?;
        let mut deadlines = Vec::new();
        if let (Some(at), false) = (run.reply_at, run.idle) {
            deadlines.push(at + self.limits.iopub_grace());
        }
        if let Some((_, at)) = &run.completeness_check {
            deadlines.push(*at + COMPLETENESS_TIMEOUT);
        }
        if let (Some(t), false) = (run.timeout, run.timed_out) {
            deadlines.push(run.started_at? + t);
        }
        if let Some(at) = run.interrupted_at {
            deadlines.push(at + self.limits.interrupt_grace());
            if let (Some(last), None) = (run.last_interrupt_at, &run.reply) {
                deadlines.push(last + INTERRUPT_REPEAT);
            }
        }
        if self.quirks.stdin_is_terminal
            && run.status == RunStatus::Running
            && run.interrupted_at.is_none()
        {
            deadlines
                .push(run.last_terminal_probe.unwrap_or(run.started_at?) + TERMINAL_PROBE_INTERVAL);
        }
        deadlines.into_iter().min()
    }

    // ---- bookkeeping ----

    pub(super) fn cancel_queued(&mut self, reason: &str) {
        for run_id in std::mem::take(&mut self.queue) {
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.notices.push(reason.to_string());
                run.set_status(RunStatus::Cancelled);
            }
            self.finish_bookkeeping(&run_id);
        }
    }

    /// Count history, remember the finished run, drop the oldest beyond the cap.
    pub(super) fn finish_bookkeeping(&mut self, run_id: &str) {
        if let Some(run) = self.runs.get_mut(run_id)
            && run.store_history
            && run.started_at.is_some()
        {
            let entry = run.history_entry();
            self.journal_append(&JournalRecord::Entry(entry.clone()));
            self.history.push(entry);
        }
        self.finished_order.push_back(run_id.to_string());
        let mut kept_bytes: usize = self
            .finished_order
            .iter()
            .filter_map(|r| self.runs.get(r))
            .map(|r| r.stored_bytes())
            .sum();
        while self.finished_order.len() > KEPT_FINISHED_RUNS
            || (kept_bytes > KEPT_FINISHED_BYTES && self.finished_order.len() > 1)
        {
            if let Some(run) = self.finished_order.front().and_then(|r| self.runs.get(r)) {
                kept_bytes -= run.stored_bytes();
            }
            if let Some(old) = self.finished_order.pop_front()
                && let Some(run) = self.runs.remove(&old)
                && let Some(m) = run.msg_id
            {
                self.by_msg.remove(&m);
            }
        }
    }

    pub(super) async fn shell_request(
        &mut self,
        msg_type: String,
        content: Value,
        idle_only: bool,
        reply: oneshot::Sender<Result<Value, SessionError>>,
    ) {
        if idle_only && let Some(run) = &self.current {
            let _ = reply.send(Err(SessionError::new(
                ErrorCode::SessionBusy,
                format!("Session '{}' is running {run}; try again when it has finished (or interrupt it).", self.id),
            )));
            return;
        }
        let Some(kernel) = self.kernel.as_mut() else {
            let _ = reply.send(Err(SessionError::new(
                ErrorCode::SessionDead,
                format!(
                    "Session '{}' has no running kernel right now ({:?}).",
                    self.id,
                    self.status()
                ),
            )));
            return;
        };
        let msg = kernel.request(&msg_type, content);
        match kernel.send(Channel::Shell, &msg).await {
            Ok(()) => {
                self.pending.insert(msg.msg_id().to_string(), reply);
            }
            Err(e) => {
                let _ = reply.send(Err(SessionError::new(
                    ErrorCode::InternalError,
                    format!("{msg_type} not sent: {e}"),
                )));
            }
        }
    }
}
