//! The session actor: one task per session owning its kernel, queue and runs as plain local
//! state (no mutex). Callers talk to it through [`super::SessionHandle`] commands with a oneshot
//! reply. The loop `select!`s over commands, kernel messages, the kernel's exit, a kernel start
//! finishing and the nearest deadline, turns each into an [`Event`] and handles it.
//!
//! Semantics (DESIGN §3): one run at a time, FIFO queue; a run is done on `execute_reply` and
//! iopub `idle` (bounded wait for idle; none expected for aborted replies); on kernel death the
//! running run ends `kernel_died`, queued runs are cancelled and a new kernel is started
//! (generation + 1); a run past its `timeout_s` is interrupted, and if still busy after the
//! grace, its kernel is restarted.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::error::{ErrorCode, SessionError};
use super::export::ExportContext;
use super::history::{HistoryEntry, Journal, JournalHeader, JournalRecord, slice_range};
use super::quirks::{self, Quirks};
use super::run::Run;
use super::types::{ExecutionResult, RunStatus, SessionInfo, SessionStatus};
use crate::config::Limits;
use crate::kernel::{
    Channel, ExitInfo, Kernel, KernelEvent, KernelSpec, LaunchOptions, ShutdownRung, StartError,
};

/// How long a kernel gets to answer `is_complete_request` before the code runs anyway.
const COMPLETENESS_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a kernel whose stdin is a terminal is checked for code blocked reading it.
const TERMINAL_PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// Finished runs kept for `get_execution` per session (oldest dropped first).
const KEPT_FINISHED_RUNS: usize = 256;
/// Output bytes kept across a session's finished runs; the oldest runs are forgotten beyond it.
const KEPT_FINISHED_BYTES: usize = 256 * 1024 * 1024;

/// A validated execute request.
#[derive(Debug, Clone)]
pub struct ExecuteRequest {
    pub run_id: String,
    pub code: String,
    pub store_history: bool,
    pub timeout: Option<Duration>,
    pub stdin: Vec<String>,
    pub expected_generation: Option<u64>,
}

/// What a submitted run gives back: its id and a receiver of its status changes.
pub type Submitted = (String, watch::Receiver<RunStatus>);

/// Commands to the actor; each carries its reply channel.
pub enum Command {
    Submit(
        ExecuteRequest,
        oneshot::Sender<Result<Submitted, SessionError>>,
    ),
    GetRun(String, oneshot::Sender<Option<ExecutionResult>>),
    WatchRun(
        String,
        oneshot::Sender<Result<watch::Receiver<RunStatus>, SessionError>>,
    ),
    StreamPage(
        String,
        String,
        usize,
        usize,
        oneshot::Sender<Option<super::output::StreamPage>>,
    ),
    RunTail(String, oneshot::Sender<Option<String>>),
    Info(oneshot::Sender<SessionInfo>),
    Interrupt(oneshot::Sender<(SessionInfo, Option<String>)>),
    Restart(bool, oneshot::Sender<Result<SessionInfo, SessionError>>),
    SendInput(
        String,
        String,
        oneshot::Sender<Result<watch::Receiver<RunStatus>, SessionError>>,
    ),
    Cancel(String, oneshot::Sender<Result<(), SessionError>>),
    Destroy(oneshot::Sender<ShutdownRung>),
    /// Entries `[start, end)` (Python slice) with their indices, and the total count.
    History(
        Option<i64>,
        Option<i64>,
        oneshot::Sender<(Vec<(usize, HistoryEntry)>, usize)>,
    ),
    /// Delete entries `[start, end)`; replies with the number deleted.
    DeleteHistory(Option<i64>, Option<i64>, oneshot::Sender<usize>),
    /// A shell request (`complete_request`, `inspect_request`, a silent `execute_request`…)
    /// answered with the reply's content. With `idle_only`, fails at once while a run executes.
    Request {
        msg_type: String,
        content: Value,
        idle_only: bool,
        reply: oneshot::Sender<Result<Value, SessionError>>,
    },
    /// The export context (kernel names, language_info) of this session.
    ExportContext(oneshot::Sender<ExportContext>),
}

/// Why a new kernel is being started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartReason {
    Create,
    Restart,
    Recover,
}

enum Event {
    Command(Option<Command>),
    Kernel(KernelEvent),
    Exited(ExitInfo),
    Started(Result<Kernel, StartError>),
    Tick,
}

pub struct Actor {
    id: String,
    spec: KernelSpec,
    opts: LaunchOptions,
    limits: Arc<Limits>,
    commands: mpsc::Receiver<Command>,
    kernel: Option<Kernel>,
    exit_rx: Option<watch::Receiver<Option<ExitInfo>>>,
    kernel_info: Value,
    /// How the current kernel bends the protocol.
    quirks: Quirks,
    generation: u64,
    starting: Option<(StartReason, JoinHandle<Result<Kernel, StartError>>)>,
    restart_waiters: Vec<oneshot::Sender<Result<SessionInfo, SessionError>>>,
    create_waiter: Option<oneshot::Sender<Result<SessionInfo, SessionError>>>,
    runs: HashMap<String, Run>,
    /// msg_id of an execute_request → run_id.
    by_msg: HashMap<String, String>,
    finished_order: VecDeque<String>,
    queue: VecDeque<String>,
    current: Option<String>,
    /// Generation of the kernel the last started run executed in.
    last_run_generation: Option<u64>,
    history: Vec<HistoryEntry>,
    /// Where history is journalled; `None` if the journal could not be created.
    journal: Option<Journal>,
    /// Shell requests awaiting their reply, by msg_id.
    pending: HashMap<String, oneshot::Sender<Result<Value, SessionError>>>,
    created_at: chrono::DateTime<chrono::Utc>,
    last_activity: chrono::DateTime<chrono::Utc>,
    /// Notices for the next run (e.g. the kernel was replaced after a crash).
    pending_notices: Vec<String>,
}

impl Actor {
    /// Spawn the actor; it starts the kernel at once. `created` gets the outcome of that start.
    pub fn spawn(
        runtime: &tokio::runtime::Handle,
        id: String,
        spec: KernelSpec,
        opts: LaunchOptions,
        limits: Arc<Limits>,
        commands: mpsc::Receiver<Command>,
        created: oneshot::Sender<Result<SessionInfo, SessionError>>,
    ) -> JoinHandle<()> {
        let now = chrono::Utc::now();
        let mut actor = Actor {
            id,
            spec,
            opts,
            limits,
            commands,
            kernel: None,
            exit_rx: None,
            kernel_info: Value::Null,
            quirks: Quirks::default(),
            generation: 0,
            starting: None,
            restart_waiters: Vec::new(),
            create_waiter: Some(created),
            runs: HashMap::new(),
            by_msg: HashMap::new(),
            finished_order: VecDeque::new(),
            queue: VecDeque::new(),
            current: None,
            last_run_generation: None,
            history: Vec::new(),
            journal: None,
            pending: HashMap::new(),
            created_at: now,
            last_activity: now,
            pending_notices: Vec::new(),
        };
        actor.journal = actor.open_journal();
        runtime.spawn(async move {
            actor.start_kernel(StartReason::Create, None);
            actor.run().await;
        })
    }

    async fn run(&mut self) {
        loop {
            let deadline = self.next_deadline();
            let event = tokio::select! {
                c = self.commands.recv() => Event::Command(c),
                e = recv_kernel(&mut self.kernel) => Event::Kernel(e),
                x = wait_exit(&mut self.exit_rx) => Event::Exited(x),
                s = wait_started(&mut self.starting) => Event::Started(s),
                _ = sleep_until(deadline) => Event::Tick,
            };
            match event {
                Event::Command(None) => {
                    self.destroy().await;
                    return;
                }
                Event::Command(Some(Command::Destroy(reply))) => {
                    let rung = self.destroy().await;
                    let _ = reply.send(rung);
                    return;
                }
                Event::Command(Some(cmd)) => self.handle_command(cmd).await,
                Event::Kernel(ev) => self.handle_kernel_event(ev).await,
                Event::Exited(info) => self.kernel_died(info),
                Event::Started(result) => self.kernel_started(result).await,
                Event::Tick => self.check_deadlines().await,
            }
        }
    }

    // ---- kernel lifecycle ----

    /// Start a kernel in the background, after shutting `old` down if given.
    fn start_kernel(&mut self, reason: StartReason, old: Option<Kernel>) {
        for (_, waiter) in self.pending.drain() {
            let _ = waiter.send(Err(SessionError::new(
                ErrorCode::SessionBusy,
                "The kernel was replaced before it answered; try again.",
            )));
        }
        self.exit_rx = None;
        let spec = self.spec.clone();
        let opts = self.opts.clone();
        let grace = self.limits.shutdown_grace();
        self.starting = Some((
            reason,
            tokio::spawn(async move {
                if let Some(old) = old {
                    old.shutdown(grace).await;
                }
                Kernel::start(&spec, &opts).await
            }),
        ));
    }

    async fn kernel_started(&mut self, result: Result<Kernel, StartError>) {
        let reason = self
            .starting
            .take()
            .map(|(r, _)| r)
            .unwrap_or(StartReason::Recover);
        match result {
            Ok(kernel) => {
                self.generation += 1;
                if self.kernel_info["language_info"] != kernel.info["language_info"] {
                    self.journal_append(&JournalRecord::LanguageInfo(
                        kernel.info["language_info"].clone(),
                    ));
                }
                self.kernel_info = kernel.info.clone();
                self.quirks = Quirks::from_kernel_info(&kernel.info);
                self.exit_rx = Some(kernel.exit_watch());
                self.kernel = Some(kernel);
                tracing::info!(session = %self.id, generation = self.generation, ?reason, "kernel ready");
                let info = self.info();
                if let Some(w) = self.create_waiter.take() {
                    let _ = w.send(Ok(info.clone()));
                }
                for w in self.restart_waiters.drain(..) {
                    let _ = w.send(Ok(info.clone()));
                }
                self.start_next().await;
            }
            Err(e) => {
                tracing::warn!(session = %self.id, "kernel start failed: {e}");
                let err = SessionError::new(ErrorCode::KernelStartFailed, e.to_string())
                    .with_details(json!({"kernel": self.spec.name}));
                if let Some(w) = self.create_waiter.take() {
                    let _ = w.send(Err(err.clone()));
                }
                for w in self.restart_waiters.drain(..) {
                    let _ = w.send(Err(err.clone()));
                }
                let reason = format!("The session's kernel could not be started: {e}");
                self.cancel_queued(&reason);
            }
        }
    }

    /// The kernel process exited on its own (crash, `os._exit`, external kill).
    fn kernel_died(&mut self, info: ExitInfo) {
        let Some(mut kernel) = self.kernel.take() else {
            self.exit_rx = None;
            return;
        };
        // Apply what the readers already delivered before declaring the death.
        while let Some(ev) = kernel.try_recv() {
            self.apply_kernel_event_sync(ev);
        }
        let tail = kernel.output_tail();
        tracing::warn!(session = %self.id, "kernel died: {info}");
        if let Some(run_id) = self.current.take() {
            if let Some(run) = self.runs.get_mut(&run_id) {
                if run.interrupted_at.is_some() {
                    run.notices.push(format!(
                        "The kernel exited when it was interrupted ({info}); some kernels (e.g. xeus-python) do that instead of stopping the code."
                    ));
                }
                run.notices.push(format!(
                    "The kernel died ({info}); its state is lost. A new kernel is being started for the next run."
                ));
                if !tail.trim().is_empty() {
                    run.notices.push(format!(
                        "The kernel's last output:\n{}",
                        last_lines(&tail, 20)
                    ));
                }
                run.set_status(RunStatus::KernelDied);
            }
            self.finish_bookkeeping(&run_id);
        }
        self.cancel_queued(&format!(
            "Cancelled: the kernel died ({info}) before this run started; it was not run in the new kernel."
        ));
        self.pending_notices.push(format!(
            "The previous kernel died ({info}); this run executed in a new kernel."
        ));
        drop(kernel);
        self.start_kernel(StartReason::Recover, None);
    }

    async fn destroy(&mut self) -> ShutdownRung {
        self.cancel_queued("Cancelled: the session was destroyed.");
        if let Some(run_id) = self.current.take()
            && let Some(run) = self.runs.get_mut(&run_id)
        {
            run.notices
                .push("The session was destroyed while this run was executing.".into());
            run.set_status(RunStatus::Cancelled);
        }
        if let Some((_, handle)) = self.starting.take() {
            handle.abort();
            // Aborting drops the starting kernel, which kills its process group.
            let _ = handle.await;
        }
        let err = SessionError::gone(&self.id);
        if let Some(w) = self.create_waiter.take() {
            let _ = w.send(Err(err.clone()));
        }
        for w in self.restart_waiters.drain(..) {
            let _ = w.send(Err(err.clone()));
        }
        self.exit_rx = None;
        match self.kernel.take() {
            Some(k) => k.shutdown(self.limits.shutdown_grace()).await,
            None => ShutdownRung::Graceful,
        }
    }

    // ---- commands ----

    async fn handle_command(&mut self, cmd: Command) {
        self.last_activity = chrono::Utc::now();
        match cmd {
            Command::Submit(req, reply) => {
                let _ = reply.send(self.submit(req));
                self.start_next().await;
            }
            Command::GetRun(run_id, reply) => {
                let limit = self.limits.stream_bytes;
                let r = self.runs.get_mut(&run_id).map(|r| r.to_result(limit));
                let _ = reply.send(r);
            }
            Command::WatchRun(run_id, reply) => {
                let r = self
                    .runs
                    .get(&run_id)
                    .map(|r| r.watch())
                    .ok_or_else(|| not_found(&run_id));
                let _ = reply.send(r);
            }
            Command::StreamPage(run_id, stream, offset, limit, reply) => {
                let page = self
                    .runs
                    .get_mut(&run_id)
                    .map(|r| super::output::page(r.stream_text(&stream), offset, limit));
                let _ = reply.send(page);
            }
            Command::RunTail(run_id, reply) => {
                let _ = reply.send(self.runs.get(&run_id).map(|r| r.last_line()));
            }
            Command::Info(reply) => {
                let _ = reply.send(self.info());
            }
            Command::Interrupt(reply) => {
                let current = self.current.clone();
                if let Some(run_id) = &current {
                    self.interrupt_run(run_id).await;
                }
                let _ = reply.send((self.info(), current));
            }
            Command::Restart(clear_history, reply) => {
                if clear_history {
                    self.history.clear();
                    self.journal_append(&JournalRecord::Cleared);
                }
                self.restart(reply)
            }
            Command::History(start, end, reply) => {
                let range = slice_range(self.history.len(), start, end);
                let entries = range
                    .clone()
                    .map(|i| (i, self.history[i].clone()))
                    .collect();
                let _ = reply.send((entries, self.history.len()));
            }
            Command::DeleteHistory(start, end, reply) => {
                let mut range = slice_range(self.history.len(), start, end);
                if end.is_none() {
                    // Only `start` given: that one entry, not everything after it.
                    range.end = (range.start + 1).min(self.history.len());
                }
                let removed: Vec<String> = self.history.drain(range).map(|e| e.run_id).collect();
                if !removed.is_empty() {
                    self.journal_append(&JournalRecord::Deleted(removed.clone()));
                }
                let _ = reply.send(removed.len());
            }
            Command::Request {
                msg_type,
                content,
                idle_only,
                reply,
            } => {
                self.shell_request(msg_type, content, idle_only, reply)
                    .await
            }
            Command::ExportContext(reply) => {
                let _ = reply.send(ExportContext {
                    session_id: self.id.clone(),
                    kernel: self.spec.name.clone(),
                    display_name: self.spec.display_name.clone(),
                    language: self.language(),
                    language_info: self.kernel_info["language_info"].clone(),
                    exported_at: chrono::Utc::now()
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                });
            }
            Command::SendInput(run_id, value, reply) => {
                let _ = reply.send(self.send_input(&run_id, value).await);
            }
            Command::Cancel(run_id, reply) => {
                let _ = reply.send(self.cancel(&run_id).await);
            }
            Command::Destroy(_) => unreachable!("handled in the loop"),
        }
    }

    fn submit(&mut self, req: ExecuteRequest) -> Result<Submitted, SessionError> {
        if self.kernel.is_none() && self.starting.is_none() {
            return Err(SessionError::new(
                ErrorCode::SessionDead,
                format!(
                    "Session '{}' has no kernel (its start failed). Call restart_session to try again, or destroy_session.",
                    self.id
                ),
            ));
        }
        if let Some(expected) = req.expected_generation {
            let upcoming = if self.kernel.is_some() {
                self.generation
            } else {
                self.generation + 1
            };
            if expected != upcoming {
                return Err(SessionError::new(
                    ErrorCode::StateChanged,
                    format!("Session '{}' is at generation {upcoming}, not {expected}: its kernel was replaced and earlier state is gone. Re-run the setup code, then pass expected_generation={upcoming}.", self.id),
                )
                .with_details(json!({"generation": upcoming, "expected_generation": expected})));
            }
        }
        if self.queue.len() >= self.limits.queue_length {
            return Err(SessionError::new(
                ErrorCode::QueueFull,
                format!(
                    "Session '{}' already has {} runs waiting. Wait for them (get_execution) or cancel some (cancel_execution).",
                    self.id,
                    self.queue.len()
                ),
            ));
        }
        let run = Run::new(
            req.run_id.clone(),
            self.id.clone(),
            req.code,
            req.store_history,
            req.timeout,
            req.stdin,
        );
        let rx = run.watch();
        self.queue.push_back(req.run_id.clone());
        self.runs.insert(req.run_id.clone(), run);
        Ok((req.run_id, rx))
    }

    fn restart(&mut self, reply: oneshot::Sender<Result<SessionInfo, SessionError>>) {
        self.restart_waiters.push(reply);
        if self.starting.is_some() {
            return; // A start is under way; its outcome answers this restart too.
        }
        if let Some(run_id) = self.current.take() {
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.notices
                    .push("The session was restarted while this run was executing.".into());
                run.set_status(RunStatus::Cancelled);
            }
            self.finish_bookkeeping(&run_id);
        }
        self.cancel_queued("Cancelled: the session was restarted before this run started.");
        let old = self.kernel.take();
        self.start_kernel(StartReason::Restart, old);
    }

    async fn send_input(
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

    async fn cancel(&mut self, run_id: &str) -> Result<(), SessionError> {
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

    async fn interrupt_run(&mut self, run_id: &str) {
        if let Some(run) = self.runs.get_mut(run_id) {
            run.interrupted_at.get_or_insert_with(Instant::now);
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
    async fn start_next(&mut self) {
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
    async fn check_completeness(&mut self, run_id: &str) {
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
    async fn completeness_known(&mut self, run_id: &str, reply: Option<Value>) {
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
            run.error = Some(super::types::ErrorInfo {
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
    async fn send_execute(&mut self, run_id: &str) {
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

    async fn handle_kernel_event(&mut self, ev: KernelEvent) {
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
    fn apply_kernel_event_sync(&mut self, ev: KernelEvent) {
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
                run.prompt = Some(super::types::Prompt {
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
    async fn check_done(&mut self) {
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
    async fn check_deadlines(&mut self) {
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
                run.error = Some(super::types::ErrorInfo {
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

    fn next_deadline(&self) -> Option<Instant> {
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

    fn cancel_queued(&mut self, reason: &str) {
        for run_id in std::mem::take(&mut self.queue) {
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.notices.push(reason.to_string());
                run.set_status(RunStatus::Cancelled);
            }
            self.finish_bookkeeping(&run_id);
        }
    }

    /// Count history, remember the finished run, drop the oldest beyond the cap.
    fn finish_bookkeeping(&mut self, run_id: &str) {
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

    async fn shell_request(
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

    /// The language name: from language_info when known, else the kernelspec's.
    fn language(&self) -> String {
        self.kernel_info["language_info"]["name"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| self.spec.language.clone())
    }

    fn open_journal(&self) -> Option<Journal> {
        let header = JournalHeader {
            session_id: self.id.clone(),
            kernel: self.spec.name.clone(),
            display_name: self.spec.display_name.clone(),
            language: self.spec.language.clone(),
            created_at: self
                .created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        match Journal::dir().and_then(|d| Journal::create(&d, &header)) {
            Ok(j) => {
                tracing::info!(session = %self.id, path = %j.path().display(), "history journal");
                Some(j)
            }
            Err(e) => {
                tracing::warn!(session = %self.id, "history journal not created: {e}");
                None
            }
        }
    }

    fn journal_append(&mut self, record: &JournalRecord) {
        if let Some(j) = self.journal.as_mut()
            && let Err(e) = j.append(record)
        {
            tracing::warn!(session = %self.id, "history journal write failed: {e}");
        }
    }

    /// The session's status, derived from what it holds.
    fn status(&self) -> SessionStatus {
        if let Some((reason, _)) = &self.starting {
            return if *reason == StartReason::Create {
                SessionStatus::Starting
            } else {
                SessionStatus::Restarting
            };
        }
        if self.kernel.is_none() {
            return SessionStatus::Dead;
        }
        match self.current.as_ref().and_then(|r| self.runs.get(r)) {
            Some(run) if run.status == RunStatus::AwaitingInput => SessionStatus::AwaitingInput,
            Some(_) => SessionStatus::Busy,
            None => SessionStatus::Idle,
        }
    }

    fn info(&self) -> SessionInfo {
        let rfc = |t: &chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        SessionInfo {
            session_id: self.id.clone(),
            kernel: self.spec.name.clone(),
            language: self.language(),
            display_name: self.spec.display_name.clone(),
            status: self.status(),
            generation: self.generation,
            pid: self.kernel.as_ref().map(|k| k.pid()),
            cwd: self.opts.cwd.display().to_string(),
            created_at: rfc(&self.created_at),
            last_activity: rfc(&self.last_activity),
            history_count: self.history.len(),
            queue_length: self.queue.len(),
            current_run_id: self.current.clone(),
            kernel_info: kernel_info_summary(&self.kernel_info),
        }
    }
}

fn not_found(run_id: &str) -> SessionError {
    SessionError::new(
        ErrorCode::ExecutionNotFound,
        format!(
            "Run '{run_id}' not found in this session (finished runs are kept for a while, then forgotten)."
        ),
    )
}

/// implementation, implementation_version, language_info, protocol_version, banner.
fn kernel_info_summary(info: &Value) -> Value {
    if info.is_null() {
        return Value::Null;
    }
    json!({
        "implementation": info["implementation"],
        "implementation_version": info["implementation_version"],
        "language_info": info["language_info"],
        "protocol_version": info["protocol_version"],
        "banner": info["banner"],
    })
}

/// The last `n` lines of the kernel's own output, without ipykernel's start-up TCP warning.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .trim_end()
        .lines()
        .filter(|l| !l.contains("running over TCP without encryption"))
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The next kernel message; pends while there is no kernel or its readers have all ended
/// (the exit watch reports the death).
async fn recv_kernel(kernel: &mut Option<Kernel>) -> KernelEvent {
    match kernel {
        Some(k) => match k.recv().await {
            Some(ev) => ev,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

async fn wait_exit(rx: &mut Option<watch::Receiver<Option<ExitInfo>>>) -> ExitInfo {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    let exit = rx.wait_for(|e| e.is_some()).await.map(|v| *v);
    match exit {
        Ok(v) => v.unwrap_or(ExitInfo {
            code: None,
            signal: None,
        }),
        Err(_) => std::future::pending().await,
    }
}

async fn wait_started(
    starting: &mut Option<(StartReason, JoinHandle<Result<Kernel, StartError>>)>,
) -> Result<Kernel, StartError> {
    let Some((_, handle)) = starting else {
        return std::future::pending().await;
    };
    match handle.await {
        Ok(r) => r,
        Err(e) => Err(StartError::Launch {
            kernel: String::new(),
            detail: format!("the start task failed: {e}"),
        }),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
