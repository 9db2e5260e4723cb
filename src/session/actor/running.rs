//! Running code for the session actor: starting the next queued run (after an
//! `is_complete_request` for kernels that need it), routing kernel messages to runs, stdin,
//! finishing a run once its reply and idle are in, and the run deadlines (iopub grace,
//! timeouts, interrupt repeats and escalation, the terminal probe).

use super::*;
use crate::session::run::{Executing, Interrupting, Phase};
use crate::session::types::ErrorInfo;

/// In a run's notice while an interrupt did not stop it (dropped once a restart does).
pub(super) const STILL_GOING: &str = "the run is still going.";

impl Actor {
    /// Finish the current run if it is complete, then start queued runs while the kernel is
    /// free. The one place a run begins.
    pub(super) async fn advance(&mut self) {
        self.settle_side_runs();
        self.start_runs().await;
        self.send_ahead().await;
    }

    async fn start_runs(&mut self) {
        loop {
            if let Some(run) = self.runs.current_mut()
                && run.phase.executing().is_some_and(|e| e.is_complete())
            {
                let status = run.final_status();
                trace_timing(run);
                run.set_status(status);
                // History and the journal first: a run the caller has heard of is in the
                // journal, even if the server is killed the next moment.
                self.finish_current();
            }
            if self.runs.current().is_some() || self.kernel.is_none() || self.fork_hold.is_some() {
                return;
            }
            // A death already received is handled before a run goes to that kernel: the run
            // then waits for the replacement instead of ending `kernel_died`.
            self.handle_received_events().await;
            if self.kernel.is_none() {
                return;
            }
            if self.hold_for_other_cell() {
                return;
            }
            let generation = self.generation;
            let state_reset = self.last_run_generation.is_some_and(|g| g != generation);
            let notices = std::mem::take(&mut self.pending_notices);
            let quirks = self.quirks;
            self.skip_unmet_queued();
            let Some(run) = self.runs.start_next() else {
                self.pending_notices = notices;
                return;
            };
            self.last_run_generation = Some(generation);
            run.generation = generation;
            run.state_reset = state_reset;
            run.quirks = quirks;
            if state_reset {
                run.notices.push(format!(
                    "State reset: this ran in a new kernel (generation {generation}); variables from earlier runs are gone."
                ));
            }
            run.notices.extend(notices);
            if let Some(o) = &self.desc.observer {
                run.notices.extend(o.run_notices(&run.code));
            }
            Self::note_wait(run);
            run.started_at = Some(Instant::now());
            run.set_status(RunStatus::Running);
            let code = run.code.clone();
            let sent_ahead = run.phase.executing().and_then(|e| e.sent_ahead());
            if sent_ahead.is_some() && sent_ahead == Some(generation) {
                self.promote_sent_ahead().await;
            } else if quirks.check_complete {
                self.check_completeness(code).await;
            } else {
                self.send_execute().await;
            }
            // A send that failed leaves the run to its deadlines; a complete one loops.
        }
    }

    /// Handle the kernel events already received (without waiting for more).
    async fn handle_received_events(&mut self) {
        while let Some(ev) = self.kernel.as_mut().and_then(|k| k.try_next_event()) {
            self.handle_kernel_event(ev).await;
        }
    }

    /// Ask whether the current run's code is complete before executing it (see
    /// [`Quirks::check_complete`]); the reply (or a short deadline) continues in
    /// [`Self::completeness_known`].
    async fn check_completeness(&mut self, code: String) {
        let Some(kernel) = self.kernel.as_ref() else {
            return;
        };
        let msg = kernel.request("is_complete_request", json!({ "code": code }));
        if let Some(run) = self.runs.current_mut() {
            run.phase = Phase::CheckingComplete {
                msg_id: MsgId::from(msg.msg_id()),
                since: Instant::now(),
                interrupted: false,
            };
        }
        if let Err(e) = self.send(Channel::Shell, &msg).await {
            tracing::warn!(session = %self.desc.id, "is_complete_request not sent: {e}");
        }
    }

    /// The is_complete_reply (or `None` after the deadline): execute, or end the run without
    /// running code that would leave the kernel waiting for more lines.
    async fn completeness_known(&mut self, reply: Option<Value>) {
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        if run.phase.was_interrupted() {
            run.notices
                .push("Interrupted before the code was sent to the kernel; it never ran.".into());
            run.set_status(RunStatus::Interrupted);
            self.finish_current();
            return;
        }
        // The kernel's verdict stands only if a block is really left open (see
        // `Quirks::check_complete`); Octave itself reports other incomplete input.
        let open = crate::session::octave::open_block(&run.code);
        if let Some(r) = reply.filter(|r| r["status"] == "incomplete" && open) {
            let indent = r["indent"].as_str().unwrap_or_default();
            let hint = if indent.is_empty() {
                String::new()
            } else {
                format!(" (suggested indent {indent:?})")
            };
            run.output.error = Some(ErrorInfo {
                ename: "IncompleteInput".into(),
                evalue: "The code is incomplete (an unclosed bracket, string or block?); nothing was run.".into(),
                traceback: vec![format!(
                    "The kernel would wait for more lines{hint}. Complete the code and run it again."
                )],
            });
            run.set_status(RunStatus::Error);
            self.finish_current();
            return;
        }
        self.send_execute().await;
    }

    /// Send the current run's execute_request; the run is then executing.
    async fn send_execute(&mut self) {
        let Some(id) = self.runs.current_id().cloned() else {
            return;
        };
        let Some((msg, stop_on_error)) = self.execute_message(&id) else {
            return;
        };
        if let Some(run) = self.runs.current_mut() {
            let mut e = Executing::new(Instant::now());
            e.stop_on_error = stop_on_error;
            run.phase = Phase::Executing(e);
        }
        if let Err(e) = self.send(Channel::Shell, &msg).await {
            tracing::warn!(session = %self.desc.id, "execute_request not sent: {e}");
        }
    }

    pub(super) async fn handle_kernel_event(&mut self, ev: KernelEvent) {
        match ev {
            KernelEvent::Exited(info) => self.kernel_died(info),
            KernelEvent::ChannelClosed(ch, e) => {
                tracing::debug!(session = %self.desc.id, "{ch} reader ended: {e}");
            }
            KernelEvent::Message(Channel::Shell, msg) if self.is_completeness_reply(&msg) => {
                self.completeness_known(Some(msg.content)).await;
            }
            KernelEvent::Message(Channel::Control, msg)
                if msg.msg_type() == "create_subshell_reply" =>
            {
                self.subshell_reply(&msg).await;
            }
            KernelEvent::Message(channel, msg) => {
                if self.apply_message(channel, msg) {
                    self.current_began().await;
                }
                self.answer_from_stdin_list().await;
            }
        }
    }

    fn is_completeness_reply(&self, msg: &Message) -> bool {
        matches!(
            self.runs.current().map(|r| &r.phase),
            Some(Phase::CheckingComplete { msg_id, .. }) if Some(msg_id.as_str()) == msg.parent_msg_id()
        )
    }

    /// Route one kernel message to its run or waiting request (no awaits: usable while
    /// draining a dead kernel). True when it was an iopub message of the current run.
    pub(super) fn apply_message(&mut self, channel: Channel, msg: Message) -> bool {
        if channel == Channel::Shell
            && let Some(p) = msg.parent_msg_id().and_then(|p| self.pending.remove(p))
        {
            let _ = p.reply.send(Ok(msg.content));
            return false;
        }
        if channel == Channel::Iopub
            && matches!(
                msg.msg_type(),
                "update_display_data" | "display_data" | "execute_result"
            )
            && msg.content["transient"]["display_id"].is_string()
        {
            // It updates the displays with that id made by any earlier run, as nbclient and
            // JupyterLab do, and their history entries; a display is then shown as well.
            self.update_displays(&msg.content);
            if msg.msg_type() == "update_display_data" {
                return false;
            }
        }
        if channel == Channel::Shell
            && let Some(e) = self
                .runs
                .current_mut()
                .and_then(|r| r.phase.executing_mut())
            && e.reply_probe
                .as_ref()
                .is_some_and(|m| Some(m.as_str()) == msg.parent_msg_id())
        {
            // The kernel answered a later shell request: it is done with the execute request.
            e.reply_dropped = e.reply.is_none();
            return false;
        }
        let generation = self.generation;
        let Some((run, is_current)) = msg.parent_msg_id().and_then(|p| self.runs.by_parent(p))
        else {
            if channel == Channel::Iopub && msg.parent_msg_id().is_some() {
                // Another client's request (a person's cell): never part of a run of ours.
                if msg.msg_type() == "status" {
                    self.other_status(&msg);
                }
                self.other_client_iopub(&msg);
            }
            return false;
        };
        // A request sent ahead is answered like the current one's while it waits its turn.
        let live = is_current
            || run.status() == RunStatus::Queued
                && run
                    .phase
                    .executing()
                    .is_some_and(|e| e.sent_ahead() == Some(generation));
        match channel {
            Channel::Iopub => {
                run.apply_iopub(&msg);
                if let Some(e) = run.phase.executing_mut().filter(|e| e.ahead.is_some()) {
                    // A request sent ahead begins with its code (`execute_input`): the kernel
                    // publishes busy and idle around one it aborts too.
                    if msg.msg_type() == "status" {
                        return false;
                    }
                    if !is_current {
                        e.began = true;
                    }
                }
                return is_current;
            }
            Channel::Shell if msg.msg_type() == "execute_reply" && live => {
                run.apply_reply(msg.content);
            }
            Channel::Stdin if msg.msg_type() == "input_request" && live => {
                let prompt = crate::session::types::Prompt {
                    text: msg.content["prompt"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    password: msg.content["password"].as_bool().unwrap_or(false),
                };
                if run.stdin_answers.is_empty() && is_current {
                    run.set_status(RunStatus::AwaitingInput);
                }
                run.input = Some((msg, prompt));
            }
            _ => {}
        }
        false
    }

    /// Apply a display update (by `display_id`) to every run still held and to history.
    fn update_displays(&mut self, content: &serde_json::Value) {
        for run in self.runs.all_mut() {
            run.output.update_display(content);
        }
        let item = crate::session::display::output_item("display_data", content);
        let update = crate::session::display::history_output(&item);
        if let Some(id) = update.display_id.clone()
            && self.history.update_display(&update)
        {
            self.display_updates.insert(id, update);
            self.history_changed();
        }
    }

    /// Answer an input_request from the call's `stdin` list.
    pub(super) async fn answer_from_stdin_list(&mut self) {
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        if run.input.is_none() || run.stdin_answers.is_empty() {
            return;
        }
        let (Some((request, _)), Some(value)) = (run.input.take(), run.stdin_answers.pop_front())
        else {
            return;
        };
        self.answer_input(&request, value).await;
    }

    /// A run deadline came: the single place each is handled.
    pub(super) async fn run_deadline(&mut self, due: Deadline) {
        let now = Instant::now();
        if self.runs.current().is_none() {
            return;
        }
        match due {
            Deadline::CompletenessUnknown => self.completeness_known(None).await,
            Deadline::IdleMissing => self.idle_missing(),
            Deadline::RunTimeout => self.run_timed_out(now).await,
            Deadline::RepeatInterrupt => {
                // A signal that arrives before the kernel starts the code is ignored (ipykernel
                // only turns SIGINT into KeyboardInterrupt while executing): send it again.
                if let Some(i) = self.executing_mut().and_then(|e| e.interrupt.as_mut()) {
                    i.last_sent = now;
                }
                self.interrupt_kernel().await;
            }
            Deadline::InterruptGraceOver => self.interrupt_grace_over(),
            Deadline::ProbeReply => self.probe_reply().await,
            Deadline::TerminalProbe => self.terminal_probe(now).await,
        }
    }

    /// The current run's executing phase, if it executes.
    fn executing_mut(&mut self) -> Option<&mut Executing> {
        self.runs.current_mut()?.phase.executing_mut()
    }

    /// The kernel replied but never reported idle: the run ends without waiting for it.
    fn idle_missing(&mut self) {
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        run.notices
            .push("The kernel replied but never reported idle; output may be incomplete.".into());
        if let Some(e) = run.phase.executing_mut() {
            e.idle = true;
        }
    }

    /// The run passed its `timeout_s`: interrupt the kernel (the grace counts from now).
    async fn run_timed_out(&mut self, now: Instant) {
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        let limit = run.timeout.unwrap_or_default();
        run.notices.push(format!(
            "Timed out after {} s; the kernel was interrupted.",
            limit.as_secs_f64()
        ));
        if let Some(e) = run.phase.executing_mut() {
            e.timed_out = true;
            // An interrupt that gave up starts over, so the grace counts from now.
            if e.interrupt.is_none_or(|i| i.gave_up) {
                e.interrupt = Some(Interrupting::new(now));
            }
        }
        if run.status() == RunStatus::AwaitingInput {
            run.set_status(RunStatus::Running);
        }
        run.input = None;
        self.interrupt_kernel().await;
    }

    /// The kernel did not stop within the interrupt's grace: a timed-out run ends (its kernel
    /// restarted when it is ours), a caller's interrupt gives up and says the code goes on.
    fn interrupt_grace_over(&mut self) {
        let grace = self.limits.interrupt_grace().as_secs();
        let not_ours = self.not_ours();
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        let Some(e) = run.phase.executing_mut() else {
            return;
        };
        match (e.timed_out, not_ours) {
            (true, None) => {
                drop(crate::telemetry::spans::restart(
                    Some(&run.trace.span()),
                    &run.session_id,
                    "interrupt_not_taken",
                ));
                run.notices.push(format!(
                    "The kernel did not stop within {grace} s of the interrupt, so it was restarted; all state in it is lost."
                ));
                run.set_status(RunStatus::Timeout);
                self.finish_current();
                self.pending_notices.push(
                    "The previous kernel was restarted after an interrupt did not take effect; this run executed in a new kernel.".into(),
                );
                let old = self.kernel.take();
                self.start_kernel(StartReason::Recover, old);
            }
            // Someone else's kernel: the run ends, the kernel and its state stay as they are
            // (still running the code), and the person has to stop it.
            (true, Some(why)) => {
                run.notices.push(format!(
                    "The kernel did not stop within {grace} s of the interrupt. {why} The kernel is still running this code, with its state kept: stop the code (or restart the kernel) where the kernel was started."
                ));
                run.set_status(RunStatus::Timeout);
                self.finish_current();
                self.pending_notices.push(
                    "An earlier run timed out while the adopted kernel kept running its code; this run executed once the kernel was free (its state was kept).".into(),
                );
            }
            (false, not_ours) => {
                if let Some(i) = e.interrupt.as_mut() {
                    i.gave_up = true;
                }
                run.notices.push(match not_ours {
                    None => format!(
                        "The kernel did not stop within {grace} s of the interrupt; {STILL_GOING} Restarting the session stops it, and loses the kernel's state."
                    ),
                    Some(why) => format!(
                        "The kernel did not stop within {grace} s of the interrupt; {STILL_GOING} {why} Stop the code where the kernel was started."
                    ),
                });
            }
        }
    }

    /// The kernel went idle without an execute_reply: ask `kernel_info_request` to learn
    /// whether the reply is only late.
    async fn probe_reply(&mut self) {
        let Some(kernel) = self.kernel.as_ref() else {
            return;
        };
        let msg = kernel.request("kernel_info_request", json!({}));
        if let Some(e) = self.executing_mut() {
            e.reply_probe = Some(MsgId::from(msg.msg_id()));
        }
        tracing::debug!(session = %self.desc.id, "idle without execute_reply; probing with kernel_info_request");
        if let Err(e) = self.send(Channel::Shell, &msg).await {
            tracing::warn!(session = %self.desc.id, "kernel_info_request not sent: {e}");
        }
    }

    /// Check whether the code reads the kernel's terminal (which bash_kernel never forwards):
    /// two checks in a row that say so stop the run with `StdinNotSupported`.
    async fn terminal_probe(&mut self, now: Instant) {
        let reading = self.kernel.as_ref().is_some_and(|k| k.reads_terminal());
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        let Some(e) = run.phase.executing_mut() else {
            return;
        };
        e.probe = (now, if reading { e.probe.1 + 1 } else { 0 });
        if e.probe.1 >= 2 {
            e.stdin_refused = true;
            e.interrupt = Some(Interrupting::new(now));
            run.output.error = Some(ErrorInfo {
                ename: "StdinNotSupported".into(),
                evalue: "the code waited for input on the kernel's terminal, which this kernel (bash_kernel) never forwards; it was interrupted".into(),
                traceback: vec!["Pass input another way, e.g. `read x <<< 'value'` or `echo value | cmd`.".into()],
            });
            self.interrupt_kernel().await;
        }
    }

    /// The current run has its final status: record it in history and the journal, and keep
    /// it among the finished runs.
    pub(super) fn finish_current(&mut self) {
        let Some(id) = self.runs.clear_current() else {
            return;
        };
        self.record_finished(id);
    }

    /// Record a run that has its final status.
    pub(super) fn record_finished(&mut self, id: RunId) {
        if let Some(run) = self.runs.get_mut(id.as_str())
            && run.store_history
            && run.started_at.is_some()
        {
            let entry = run.history_entry();
            self.journal_append(&JournalRecord::Entry(entry.clone()));
            self.history.push(entry);
            self.history_changed();
        }
        self.runs.finished(id);
        for (_, update) in std::mem::take(&mut self.display_updates) {
            self.journal_append(&JournalRecord::DisplayUpdated(update));
        }
    }

    /// The runs at the head of the queue that were to follow a run only if it ended `ok`
    /// (see [`ExecuteRequest::follows`]) when it did not: each ends `cancelled`, never run.
    fn skip_unmet_queued(&mut self) {
        while let Some(next) = self.runs.next_queued()
            && let Some(Follows {
                run: before,
                only_if_ok: true,
            }) = next.follows.clone()
        {
            let ended = self.runs.get(before.as_str()).map(|r| r.status());
            if ended == Some(RunStatus::Ok) {
                return;
            }
            let id = next.id.clone();
            let how = ended.map_or("unknown", |s| s.as_str());
            let why =
                format!("it was to follow run {before} only if that ended ok, and it ended {how}.");
            if self.in_kernel_ahead(next) {
                // The kernel aborts it (or ran it already): it ends as the kernel answers.
                if let Some(a) = self
                    .runs
                    .get_mut(id.as_str())
                    .and_then(|r| r.phase.executing_mut())
                    .and_then(|e| e.ahead.as_mut())
                {
                    a.unmet = Some(why);
                }
                return;
            }
            self.runs.dequeue(id.as_str());
            self.cancel_taken(vec![id], &format!("Not run: {why}"));
        }
    }

    /// End every queued run `cancelled`, with `reason` as its notice.
    pub(super) fn cancel_queued(&mut self, reason: &str) {
        let ids = self.runs.drain_queue();
        self.cancel_taken(ids, reason);
    }

    /// End the queued runs `cancelled` but those that follow a run (the next cell of a
    /// notebook batch): a restart or a new kernel keeps them, as the batch's next request.
    pub(super) fn cancel_queued_but_followers(&mut self, reason: &str) {
        let ids = self.runs.take_queued(|r| r.follows.is_none());
        self.cancel_taken(ids, reason);
    }

    /// End runs `ids`, already out of the queue, `cancelled` with `reason` as their notice.
    fn cancel_taken(&mut self, ids: Vec<RunId>, reason: &str) {
        for id in ids {
            if let Some(run) = self.runs.get_mut(id.as_str()) {
                run.notices.push(reason.to_string());
                run.set_status(RunStatus::Cancelled);
            }
            self.record_finished(id);
        }
    }
}

/// Where a finished run's time went, as a `kernel_mcp::timing` trace event (enable it with
/// `KERNEL_MCP_LOG=kernel_mcp::timing=trace`; docs/performance.md reads these): queued until
/// sent, then from the send the reply, the last iopub message and the actor's completion.
fn trace_timing(run: &crate::session::run::Run) {
    if !tracing::enabled!(target: "kernel_mcp::timing", tracing::Level::TRACE) {
        return;
    }
    let Some(e) = run.phase.executing() else {
        return;
    };
    let us = |a: Instant, b: Instant| b.saturating_duration_since(a).as_micros() as u64;
    tracing::trace!(
        target: "kernel_mcp::timing",
        run = %run.id,
        queued_us = us(run.queued_at, e.started_at),
        reply_us = e.reply.as_ref().map(|r| us(e.started_at, r.1)),
        last_iopub_us = e.last_output.map(|t| us(e.started_at, t)),
        done_us = us(e.started_at, Instant::now()),
        "run done"
    );
}
