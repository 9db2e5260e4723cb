//! The session actor: one task per session owning its kernel, queue and runs as plain local
//! state (no mutex). Callers talk to it through [`super::SessionHandle`] commands with a oneshot
//! reply. The loop `select!`s over commands, kernel messages, the kernel's exit, a kernel start
//! finishing and the nearest deadline, turns each into an `Event` and handles it.
//!
//! Semantics (DESIGN §3): one run at a time, FIFO queue; a run is done on `execute_reply` and
//! iopub `idle` (bounded wait for idle; none expected for aborted replies); on kernel death the
//! running run ends `kernel_died`, queued runs are cancelled and a new kernel is started
//! (generation + 1); a run past its `timeout_s` is interrupted, and if still busy after the
//! grace, its kernel is restarted.
//!
//! This file holds the state, the loop, the commands and the records it hands out;
//! `lifecycle.rs` starts, replaces and stops kernels; `running.rs` runs code.

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

mod lifecycle;
mod running;

/// How long a kernel gets to answer `is_complete_request` before the code runs anyway.
const COMPLETENESS_TIMEOUT: Duration = Duration::from_secs(2);
/// How often an interrupt is repeated while the run has not stopped (before the grace ends).
const INTERRUPT_REPEAT: Duration = Duration::from_secs(1);
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
        let mut run = run;
        // The kernel it is expected to run in; set again when it starts.
        run.generation = self.generation.max(1);
        let rx = run.watch();
        self.queue.push_back(req.run_id.clone());
        self.runs.insert(req.run_id.clone(), run);
        Ok((req.run_id, rx))
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
