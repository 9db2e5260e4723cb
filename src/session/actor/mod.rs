//! The session actor: one task per session owning its kernel, queue, runs and history as plain
//! local state (no mutex). Callers talk to it through [`super::SessionHandle`] commands with a
//! oneshot reply. The loop `select!`s over commands, the kernel's events, a kernel start
//! finishing and the nearest deadline, turns each into an [`Event`] and handles it; then it
//! finishes the current run if it is complete and starts the next one (`advance`), the one
//! place a run begins.
//!
//! Every branch of the `select!` is cancel-safe: mpsc receivers, the kernel's `next_event`
//! (cancel-safe by the seam's contract), a `JoinHandle` and a sleep. The kernel is reached only
//! through the [`KernelIo`] seam, and every send to it has a deadline, so a stopped or wedged
//! kernel never blocks the actor.
//!
//! Semantics (docs/semantics.md): one run at a time, FIFO queue; a run is done on `execute_reply` and
//! iopub `idle`; on kernel death the running run ends `kernel_died`, queued runs are cancelled
//! and a new kernel is started (generation + 1); a run past its `timeout_s` is interrupted,
//! and if still busy after the grace, its kernel is restarted. An interrupt asked for by a
//! caller never restarts the kernel.
//!
//! This file holds the state, the loop and the records it hands out; `cmd/` the commands
//! callers send it, each a type with its answer and the method that applies it (and the
//! dispatch); `api.rs` the requests they hand it; `lifecycle.rs` starts, replaces and stops
//! kernels; `running.rs` runs code;
//! `subshell.rs` answers requests and runs side runs on a kernel subshell while a run
//! executes; `others.rs` records other clients' cells in history and `foreign.rs` keeps the
//! session's runs from waiting on, timing or stopping them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::error::SessionError;
use super::history::{History, HistoryEntry, Journal, JournalHeader, JournalRecord};
use super::ids::{MsgId, RunId};
use super::quirks::Quirks;
use super::run::{Bounds, Deadline};
use super::runs::RunTable;
use super::types::{ExecutionResult, RunStatus, SessionInfo, SessionStatus};
use crate::config::Limits;
use crate::kernel::{
    Channel, KernelEvent, KernelIo, KernelLauncher, KernelSpec, ShutdownRung, StartError,
};
use crate::wire::Message;

mod ahead;
mod api;
pub mod cmd;
mod expiry;
mod foreign;
mod fork;
mod lifecycle;
mod others;
mod running;
mod subshell;

use api::Reply;
pub use api::{ExecuteRequest, Follows, Settled, Submitted, WhileBusy};
use cmd::Command;
pub use subshell::{MAX_SIDE_RUNS, SIDE_RUN_TIMEOUT};

/// Longest a message may take to be handed to the kernel's transport.
const SEND_DEADLINE: Duration = Duration::from_secs(5);
/// Shell requests (complete, inspect, helper expressions) awaiting replies per session.
pub const MAX_PENDING_REQUESTS: usize = 64;

/// What a session is, besides its kernel: fixed for its life.
#[derive(Clone)]
pub struct SessionDesc {
    pub id: String,
    /// The kernelspec its kernels come from (names, language).
    pub spec: KernelSpec,
    pub cwd: PathBuf,
    /// Starts each of its kernels.
    pub launcher: Arc<dyn KernelLauncher>,
    /// Where its history journal goes; `None`: no journal.
    pub journal_dir: Option<PathBuf>,
    /// The journal belongs to one client (a connection's own `default`): it is marked private
    /// and never found by the session's name.
    pub journal_private: bool,
    /// The span the actor (and its kernel's start) log in: whoever reads the logs tells
    /// sessions apart by it (see `mcp/logging.rs`).
    pub span: tracing::Span,
    /// Told about its kernels and cancellations (the broker's endpoint); `None`: nobody.
    pub observer: Option<Arc<dyn super::observer::SessionObserver>>,
    /// The id Jupyter clients know its kernel by (`/api/kernels/{id}`, docs/jupyter.md): fixed
    /// for the session's life, across restarts, as a Jupyter server keeps a kernel's id. A
    /// kernel on a gateway answers with the gateway's own id instead.
    pub kernel_id: String,
}

/// What a session's first kernel start hands back: the session, and where its history is
/// journalled.
#[derive(Debug, Clone)]
pub struct Started {
    pub info: SessionInfo,
    pub journal: Option<PathBuf>,
}

/// Why a new kernel is being started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartReason {
    Create,
    Restart,
    Recover,
}

/// A shell request waiting for its reply.
struct Pending {
    msg_type: String,
    deadline: Instant,
    timeout: Duration,
    reply: Reply<Result<Value, SessionError>>,
}

/// What woke the actor. (A kernel message is the common case and is moved, not boxed: one
/// allocation per message would cost more than the size difference.)
#[allow(clippy::large_enum_variant)]
enum Event {
    Command(Option<Command>),
    Kernel(KernelEvent),
    Started(Result<Box<dyn KernelIo>, StartError>),
    Due(Due),
}

/// A deadline that came.
#[derive(Debug, Clone)]
enum Due {
    Run(Deadline),
    /// The oldest pending shell request went unanswered.
    Request,
    /// A side run's deadline (see `subshell.rs`).
    Side(RunId, Deadline),
    /// The kernel did not answer `create_subshell_request`.
    Subshell,
    /// A fork held the runs for too long.
    ForkHold,
    /// A run's `queue_timeout_s` passed before its code started (see `foreign.rs`).
    Queue(RunId),
}

type Starting = (
    StartReason,
    JoinHandle<Result<Box<dyn KernelIo>, StartError>>,
);

pub struct Actor {
    desc: SessionDesc,
    limits: Arc<Limits>,
    bounds: Bounds,
    commands: mpsc::Receiver<Command>,
    kernel: Option<Box<dyn KernelIo>>,
    kernel_info: Value,
    /// How the current kernel bends the protocol.
    quirks: Quirks,
    generation: u64,
    starting: Option<Starting>,
    /// Why the last kernel start failed, until a start succeeds (for `SESSION_DEAD`).
    start_failure: Option<String>,
    restart_waiters: Vec<Reply<Result<SessionInfo, SessionError>>>,
    create_waiter: Option<Reply<Result<Started, SessionError>>>,
    runs: RunTable,
    /// Generation of the kernel the last started run executed in.
    last_run_generation: Option<u64>,
    /// Executed blocks in memory (bounded; the journal keeps every one).
    history: History,
    /// Where history is journalled; `None` if there is no journal.
    journal: Option<Journal>,
    /// The latest display update per `display_id` that changed history, journalled when the
    /// next run finishes (so a loop of updates writes one record per id and run).
    display_updates: HashMap<String, super::history::HistoryOutput>,
    /// Shell requests awaiting their reply, by msg_id.
    pending: HashMap<MsgId, Pending>,
    created_at: chrono::DateTime<chrono::Utc>,
    last_activity: chrono::DateTime<chrono::Utc>,
    /// Notices for the next run (e.g. the kernel was replaced after a crash).
    pending_notices: Vec<String>,
    /// Callers waiting for a run to settle (see [`Settled`]).
    settle_waiters: Vec<(RunId, Reply<ExecutionResult>)>,
    /// Idle time after which the registry expires the session; `None`: never.
    expires_after: Option<Duration>,
    /// Start of the current idle period for expiry (see `expiry.rs`).
    idle_since: chrono::DateTime<chrono::Utc>,
    /// The kernel subshell and what waits for it (see `subshell.rs`).
    subshells: subshell::Subshells,
    /// While a fork of this session's kernel is being taken, no run starts; until then
    /// at the latest.
    fork_hold: Option<Instant>,
    /// Other clients' cells in progress (see `others.rs`).
    others: others::OtherCells,
    /// Other clients' requests the kernel is handling (see `foreign.rs`).
    other_requests: foreign::OtherRequests,
    /// An MCP client has worked in the session: run code, sent a request (a checkpoint's
    /// restore, completion…), answered input, cancelled, interrupted. Whether or not any of it
    /// left a history entry (what the Jupyter face's DELETE asks).
    agent_used: bool,
    /// Bumped whenever the history changes (an entry added, a display updated, entries
    /// deleted or cleared): what a live notebook mirror waits on.
    history_version: watch::Sender<u64>,
    /// The state last counted in the sessions-by-state metric (see `lifecycle.rs`).
    counted_state: Option<&'static str>,
}

impl Actor {
    /// Spawn the actor on `runtime`; it starts the kernel at once. `created` gets the outcome
    /// of that start.
    pub fn spawn(
        runtime: &tokio::runtime::Handle,
        desc: SessionDesc,
        limits: Arc<Limits>,
        commands: mpsc::Receiver<Command>,
        created: Reply<Result<Started, SessionError>>,
        history_version: watch::Sender<u64>,
    ) -> JoinHandle<()> {
        let now = chrono::Utc::now();
        let mut actor = Actor {
            runs: RunTable::new(limits.queue_length),
            bounds: Bounds {
                part_bytes: limits.stream_bytes,
                ..Bounds::default()
            },
            desc,
            limits,
            commands,
            kernel: None,
            kernel_info: Value::Null,
            quirks: Quirks::default(),
            generation: 0,
            starting: None,
            start_failure: None,
            restart_waiters: Vec::new(),
            create_waiter: Some(created),
            last_run_generation: None,
            history: History::default(),
            journal: None,
            display_updates: HashMap::new(),
            pending: HashMap::new(),
            created_at: now,
            last_activity: now,
            pending_notices: Vec::new(),
            settle_waiters: Vec::new(),
            expires_after: None,
            idle_since: now,
            subshells: Default::default(),
            fork_hold: None,
            others: Default::default(),
            other_requests: Default::default(),
            agent_used: false,
            history_version,
            counted_state: None,
        };
        let span = actor.desc.span.clone();
        runtime.spawn(
            async move {
                actor.journal = actor.open_journal();
                actor.start_kernel(StartReason::Create, None);
                actor.run().await;
                crate::telemetry::metrics::session_state(actor.counted_state.take(), None);
            }
            .instrument(span),
        )
    }

    async fn run(&mut self) {
        loop {
            let due = self.next_deadline();
            let event = tokio::select! {
                c = self.commands.recv() => Event::Command(c),
                e = next_event(&mut self.kernel) => Event::Kernel(e),
                s = wait_started(&mut self.starting) => Event::Started(s),
                d = sleep_until(due) => Event::Due(d),
            };
            match event {
                Event::Command(None) => {
                    self.destroy().await;
                    return;
                }
                Event::Command(Some(cmd)) => {
                    if self.handle_command(cmd).await.is_break() {
                        return;
                    }
                }
                Event::Kernel(ev) => self.handle_kernel_event(ev).await,
                Event::Started(result) => self.kernel_started(result),
                Event::Due(Due::Run(d)) => self.run_deadline(d).await,
                Event::Due(Due::Request) => self.expire_requests(),
                Event::Due(Due::Side(id, d)) => self.side_run_deadline(id, d),
                Event::Due(Due::Subshell) => self.subshell_timed_out().await,
                Event::Due(Due::ForkHold) => self.fork_hold_expired(),
                Event::Due(Due::Queue(id)) => self.queue_deadline(id),
            }
            self.advance().await;
            self.deliver_settled();
            self.count_state();
        }
    }

    /// Send each waiting caller its run's record once the run has settled; forget callers
    /// that went away and runs that are gone.
    fn deliver_settled(&mut self) {
        if self.settle_waiters.is_empty() {
            return;
        }
        let bounds = self.bounds;
        let waiters = std::mem::take(&mut self.settle_waiters);
        for (id, reply) in waiters {
            if reply.is_closed() {
                continue;
            }
            let Some(run) = self.runs.get_mut(id.as_str()) else {
                continue;
            };
            let status = run.status();
            if status.is_final() || status == RunStatus::AwaitingInput {
                let _ = reply.send(run.snapshot(&bounds));
            } else {
                self.settle_waiters.push((id, reply));
            }
        }
    }

    /// The nearest deadline: the current run's, a side run's, the subshell's creation, or the
    /// oldest pending request's.
    fn next_deadline(&self) -> Option<(Instant, Due)> {
        let run = self.runs.current().and_then(|run| {
            let timing = super::run::Timing {
                iopub_grace: self.limits.iopub_grace(),
                interrupt_grace: self.limits.interrupt_grace(),
                timeout: run.timeout,
                probe_terminal: self.quirks.stdin_is_terminal,
            };
            let awaiting = run.status() == RunStatus::AwaitingInput;
            run.phase
                .next_deadline(&timing, awaiting)
                .map(|(at, d)| (at, Due::Run(d)))
        });
        let request = self
            .pending
            .values()
            .map(|p| p.deadline)
            .min()
            .map(|at| (at, Due::Request));
        let subshell = self.subshells.deadline().map(|at| (at, Due::Subshell));
        let fork = self.fork_hold.map(|at| (at, Due::ForkHold));
        let queue = self.queue_deadline_due();
        [run, request, self.side_deadline(), subshell, fork, queue]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at)
    }

    /// Hand `msg` to the kernel within [`SEND_DEADLINE`]. Errors: no kernel, the transport
    /// refused it, or the deadline passed.
    async fn send(
        &mut self,
        channel: Channel,
        msg: &Message,
    ) -> Result<(), crate::kernel::SendError> {
        let Some(kernel) = self.kernel.as_mut() else {
            return Err(crate::kernel::SendError::NoKernel);
        };
        match tokio::time::timeout(SEND_DEADLINE, kernel.send(channel, msg)).await {
            Ok(r) => r,
            Err(_) => Err(crate::kernel::SendError::Timeout {
                channel,
                after_s: SEND_DEADLINE.as_secs(),
            }),
        }
    }

    /// Interrupt the kernel, bounded by [`SEND_DEADLINE`]; failures are logged.
    async fn interrupt_kernel(&mut self) {
        self.observe_cancel();
        let run = self.runs.current().map(|r| r.trace.span());
        let span = crate::telemetry::spans::interrupt(run.as_ref(), &self.desc.id);
        let Some(kernel) = self.kernel.as_mut() else {
            return;
        };
        let outcome = tokio::time::timeout(SEND_DEADLINE, kernel.interrupt())
            .instrument(span)
            .await;
        if !matches!(outcome, Ok(Ok(()))) {
            tracing::warn!(session = %self.desc.id, "interrupt not delivered: {outcome:?}");
        }
    }

    /// Tell the observer that what runs in the session is being cancelled.
    fn observe_cancel(&self) {
        if let Some(o) = &self.desc.observer {
            o.run_cancelled();
        }
    }

    /// The language name: from language_info when known, else the kernelspec's.
    fn language(&self) -> String {
        self.kernel_info["language_info"]["name"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| self.desc.spec.language.clone())
    }

    fn open_journal(&self) -> Option<Journal> {
        let dir = self.desc.journal_dir.as_ref()?;
        let header = JournalHeader {
            session_id: self.desc.id.clone(),
            kernel: self.desc.spec.name.clone(),
            display_name: self.desc.spec.display_name.clone(),
            language: self.desc.spec.language.clone(),
            created_at: self
                .created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            private: self.desc.journal_private,
            sandbox: self.desc.launcher.sandbox(),
            cwd: self
                .desc
                .launcher
                .sandbox()
                .restricts()
                .then(|| self.desc.cwd.display().to_string()),
        };
        match Journal::create(dir, &header) {
            Ok(j) => {
                tracing::info!(session = %self.desc.id, path = %j.path().display(), "history journal");
                Some(j)
            }
            Err(e) => {
                tracing::warn!(session = %self.desc.id, "history journal not created: {e}");
                None
            }
        }
    }

    /// Append to the journal. A failed write turns the journal off for this session (a
    /// half-written file must not grow further) and says so in the next run's notices.
    fn journal_append(&mut self, record: &JournalRecord) {
        if let Some(j) = self.journal.as_mut()
            && let Err(e) = j.append(record)
        {
            tracing::warn!(session = %self.desc.id, "history journal write failed: {e}");
            self.journal = None;
            self.pending_notices.push(format!(
                "History is no longer journalled to disk (a write failed: {e}); it is still kept in memory while the server runs."
            ));
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
        let Some(kernel) = &self.kernel else {
            return SessionStatus::Dead;
        };
        // Some kernels (IRkernel) skip heartbeats while they run code: only an idle kernel
        // that misses them is reported unresponsive.
        match self.runs.current().map(|r| r.status()) {
            Some(RunStatus::AwaitingInput) => SessionStatus::AwaitingInput,
            Some(_) => SessionStatus::Busy,
            None if !kernel.responsive() => SessionStatus::Unresponsive,
            None => SessionStatus::Idle,
        }
    }

    fn info(&self) -> SessionInfo {
        let rfc = |t: &chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        SessionInfo {
            session_id: self.desc.id.clone(),
            kernel: self.desc.spec.name.clone(),
            language: self.language(),
            display_name: self.desc.spec.display_name.clone(),
            status: self.status(),
            generation: self.generation,
            pid: self.kernel.as_ref().and_then(|k| k.pid()),
            memory_mib: self
                .kernel
                .as_ref()
                .and_then(|k| k.memory_bytes())
                .map(|b| b / (1024 * 1024)),
            dropped_messages: self.kernel.as_ref().map_or(0, |k| k.dropped_messages()),
            cwd: self.desc.cwd.display().to_string(),
            created_at: rfc(&self.created_at),
            last_activity: rfc(&self.last_activity),
            history_count: self.history.len(),
            queue_length: self.runs.queue_len(),
            current_run_id: self.runs.current_id().map(|r| r.to_string()),
            kernel_info: kernel_info_summary(&self.kernel_info),
            server_instance: crate::instance::current().id.clone(),
            server_started_at: crate::instance::current().started_at.clone(),
            expires_at: self.expires_at().map(|t| rfc(&t)),
            connection_file: self
                .kernel
                .as_ref()
                .and_then(|k| k.connection_file())
                .map(|p| p.display().to_string()),
            attached: self.desc.launcher.adopts(),
            location: self.desc.launcher.location().to_string(),
            sandbox: self.desc.launcher.sandbox(),
            kernel_id: Some(
                self.kernel
                    .as_ref()
                    .and_then(|k| k.kernel_id())
                    .unwrap_or(&self.desc.kernel_id)
                    .to_string(),
            ),
            forked_from: self.desc.launcher.forked_from().map(String::from),
            owner: None,
        }
    }

    /// Tell whoever watches the history (a notebook mirror) that it changed.
    fn history_changed(&self) {
        self.history_version.send_modify(|v| *v = v.wrapping_add(1));
    }
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

/// The kernel's next event; pends while there is no kernel.
async fn next_event(kernel: &mut Option<Box<dyn KernelIo>>) -> KernelEvent {
    match kernel {
        Some(k) => k.next_event().await,
        None => std::future::pending().await,
    }
}

async fn wait_started(starting: &mut Option<Starting>) -> Result<Box<dyn KernelIo>, StartError> {
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

async fn sleep_until(deadline: Option<(Instant, Due)>) -> Due {
    match deadline {
        Some((at, due)) => {
            tokio::time::sleep_until(at).await;
            due
        }
        None => std::future::pending().await,
    }
}
