//! `fork_session` (docs/semantics.md, "Forking a session"): a new session whose kernel is a
//! copy of a live local IPython kernel, taken between two of its runs (`kernel::fork` has the
//! mechanics, the source's side is `session/actor/fork.rs`). The new session is filed like any
//! other (the table, its expiry, the broker's endpoint), with a launcher whose first kernel is
//! the fork.
//!
//! The fork runs under the source's launch options: its cwd, environment and memory limit,
//! under a supervisor of its own; its sandbox is the source's, inherited by the process
//! itself, which is why only sessions without a restricting sandbox policy can be forked. A
//! restart of the fork starts a fresh kernel the way the source's were started. Kernels that
//! cannot be forked (another language, a gateway's, an adopted one, ipykernel before 7, a
//! sandboxed one) are `UNSUPPORTED`, saying why and what to use instead.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::scope::key::{DEFAULT_SESSION, SessionKey};
use super::table::Live;
use super::{Registry, lock, session_span};
use crate::kernel::fork::{ForkError, ForkPlan, ForkedChild, ForkedLauncher, parse_scheduled};
use crate::kernel::{Kernel, LaunchOptions, StartError};
use crate::session::cmd;
use crate::session::{SessionDesc, SessionError, SessionHandle, SessionInfo, StartFailure};

/// How long the source may take to answer the helper's scheduling request.
const SCHEDULE_TIMEOUT: Duration = Duration::from_secs(30);

/// What to use where a kernel cannot be forked.
const INSTEAD: &str = "To carry state to a new session otherwise, checkpoint_session / restore it, or create_session and rerun_history.";

/// The session a fork is taken from, and what the fork runs under.
struct ForkSource {
    handle: SessionHandle,
    info: SessionInfo,
    desc: SessionDesc,
    /// The source kernel's pid.
    pid: u32,
    /// The source's launch options (none for a launcher without them).
    opts: Option<LaunchOptions>,
    startup_timeout: Duration,
    /// The fork's memory ceiling: the source's, within the caller's floors.
    max_memory_mib: u64,
}

impl Registry {
    /// Fork the session of `source` into a new session filed under `new`. The source is not
    /// disturbed: same pid, generation and status; runs submitted while the fork is taken
    /// wait for it (well under a second).
    /// Errors: `SESSION_NOT_FOUND` (the source), `INVALID_ARGUMENT` (`default`),
    /// `SESSION_ALREADY_EXISTS`, `LIMIT_EXCEEDED` (sessions), `SESSION_BUSY` (a run executes),
    /// `UNSUPPORTED` (this kernel cannot be forked), `KERNEL_START_FAILED` (the copy did not
    /// come up).
    pub async fn fork_session(
        &self,
        source: &SessionKey,
        new: &SessionKey,
    ) -> Result<SessionInfo, SessionError> {
        let source = self.get(source)?;
        self.room_for_fork(new)?;
        let source = self.fork_source(source, new).await?;
        let child = source.take_copy().await?;
        tracing::info!(source = %source.info.session_id, fork = new.name(), pid = child.pid(), "kernel forked");
        let deadline = Instant::now() + source.startup_timeout;
        let supervised = source.supervisor().is_some();
        let kernel = child
            .start(&source.desc.spec, source.info.sandbox, supervised, deadline)
            .await
            .map_err(|e| source.start_failed(e))?;
        self.file_fork(new, &source, kernel).await
    }

    /// Fails unless a fork may be filed under `new`: not `default`, within the session limit,
    /// and the name free.
    fn room_for_fork(&self, new: &SessionKey) -> Result<(), SessionError> {
        if new.name() == DEFAULT_SESSION {
            return Err(SessionError::InvalidArgument(
                "`default` is each connection's implicit session; give the fork another name."
                    .into(),
            ));
        }
        let live = self.live_count();
        if live >= self.limits.max_sessions {
            return Err(SessionError::LimitExceeded(format!(
                "This server already runs {live} sessions, its limit; destroy one you no longer need first."
            )));
        }
        if lock(&self.table).live(new.slot()).is_some() {
            return Err(SessionError::AlreadyExists(new.name().to_string()));
        }
        Ok(())
    }

    /// What the fork of `handle`'s session, for the caller of `new`, is taken from and runs
    /// under. Errors: `UNSUPPORTED`, `SESSION_DEAD` (see [`forkable`]).
    async fn fork_source(
        &self,
        handle: SessionHandle,
        new: &SessionKey,
    ) -> Result<ForkSource, SessionError> {
        let info = handle.call(cmd::Info).await?;
        let desc = handle.desc().clone();
        let pid = forkable(&info, &desc)?;
        let opts = desc.launcher.launch_options().cloned();
        let startup_timeout = opts
            .as_ref()
            .map(|o| o.startup_timeout)
            .unwrap_or(Duration::from_secs(self.limits.startup_timeout_s));
        let max_memory_mib = opts
            .as_ref()
            .map_or(self.limits.max_memory_mib, |o| o.max_memory_mib);
        // The fork is the new session of this caller: at most its memory ceiling.
        let max_memory_mib = super::floors::Floors {
            sandbox: info.sandbox,
            max_memory_mib,
        }
        .stricter(self.floors(new.viewer()))
        .max_memory_mib;
        Ok(ForkSource {
            handle,
            info,
            desc,
            pid,
            opts,
            startup_timeout,
            max_memory_mib,
        })
    }

    /// File the session whose first kernel is the fork's `kernel` under `new`, with a copy of
    /// the source's history; answers the new session.
    async fn file_fork(
        &self,
        new: &SessionKey,
        source: &ForkSource,
        kernel: Kernel,
    ) -> Result<SessionInfo, SessionError> {
        let (info, desc) = (&source.info, &source.desc);
        let launcher = ForkedLauncher::new(kernel, desc.launcher.clone(), info.session_id.clone());
        let observer = self.broker.as_ref().and_then(|b| {
            b.attach(
                new.name(),
                &desc.spec,
                &desc.cwd,
                self.artifacts_of(new.slot()),
            )
        });
        let fork_desc = SessionDesc {
            id: new.name().to_string(),
            spec: desc.spec.clone(),
            cwd: desc.cwd.clone(),
            launcher: Arc::new(launcher),
            journal_dir: self.journal_dir.clone(),
            journal_private: new.is_private(),
            span: session_span(new.slot()),
            observer,
            // A kernel of its own for Jupyter clients, as any new session's.
            kernel_id: uuid::Uuid::new_v4().to_string(),
        };
        let all = cmd::History {
            start: None,
            end: None,
        };
        let cmd::HistoryPage { entries, .. } = source.handle.call(all).await.unwrap_or_default();
        let (handle, created) = {
            let mut table = lock(&self.table);
            if table.live(new.slot()).is_some() {
                return Err(SessionError::AlreadyExists(new.name().to_string()));
            }
            let (handle, created) =
                SessionHandle::spawn(&self.runtime, fork_desc, self.limits.clone());
            let live = Live {
                handle: handle.clone(),
                journal: None,
                sandbox: info.sandbox,
            };
            table.insert(new.slot().clone(), live)?;
            (handle, created)
        };
        self.started(new.slot(), &handle, created, None).await?;
        let entries = entries.into_iter().map(|(_, e)| e).collect();
        let _ = handle.call(cmd::SeedHistory { entries }).await;
        handle.call(cmd::Info).await
    }
}

impl ForkSource {
    /// The supervisor the source's kernels run under, which the fork gets one of.
    fn supervisor(&self) -> Option<&Path> {
        self.opts.as_ref()?.supervisor.as_deref()
    }

    /// `KERNEL_START_FAILED` for the fork, from the kernel's own error.
    fn start_failed(&self, e: StartError) -> SessionError {
        SessionError::KernelStartFailed(StartFailure::Fork {
            kernel: self.info.kernel.clone(),
            forked_from: self.info.session_id.clone(),
            error: Arc::new(e),
        })
    }

    /// Have the source's kernel fork itself between two runs and meet the copy; the source's
    /// runs go on afterwards whatever happened. Errors: `SESSION_BUSY`, `UNSUPPORTED`,
    /// `KERNEL_START_FAILED`.
    async fn take_copy(&self) -> Result<ForkedChild, SessionError> {
        let (source, source_pid) = (&self.handle, self.pid);
        let plan = ForkPlan::prepare(&self.desc.spec.name).map_err(|e| self.start_failed(e))?;
        let env_hook = self.opts.as_ref().and_then(|o| o.env_hook.as_ref());
        let content = plan.request_content(
            self.supervisor().map(|s| (s, self.max_memory_mib)),
            &self.desc.spec,
            env_hook,
        );
        let fork = cmd::Fork {
            content,
            timeout: SCHEDULE_TIMEOUT,
        };
        let reply = match source.call(fork).await {
            Ok(reply) => reply,
            // Refused: nothing of ours holds the source.
            Err(e @ (SessionError::Busy { .. } | SessionError::Forking { .. })) => return Err(e),
            Err(e) => {
                let _ = source.call(cmd::EndFork).await;
                return Err(e);
            }
        };
        let child = match parse_scheduled(&reply, &self.desc.spec.name) {
            Ok(pid) if pid == source_pid => {
                let deadline = Instant::now() + self.startup_timeout;
                let met = plan.meet(source_pid, deadline).await;
                met.map_err(|e| self.start_failed(e))
            }
            Ok(pid) => Err(SessionError::Internal(format!(
                "The fork helper ran in pid {pid}, not in the session's kernel (pid {source_pid})."
            ))),
            Err(ForkError::Unsupported(why)) => Err(SessionError::Unsupported(format!(
                "Session '{}' cannot be forked: {why}. {INSTEAD}",
                self.info.session_id
            ))),
            Err(ForkError::Start(e)) => Err(self.start_failed(e)),
        };
        if let Ok(child) = &child
            && self.supervisor().is_some()
        {
            // The fork has a supervisor of its own: the source's lets go of it.
            crate::kernel::fork::release_from_source(source_pid, child.pid());
        }
        // The copy is taken (or will not be): the source's runs go on.
        let _ = source.call(cmd::EndFork).await;
        child
    }
}

/// The source kernel's pid, if this session's kernel can be forked. Errors: `UNSUPPORTED`
/// saying why, `SESSION_DEAD` without a kernel.
fn forkable(info: &SessionInfo, desc: &SessionDesc) -> Result<u32, SessionError> {
    let unsupported = |why: String| {
        SessionError::Unsupported(format!(
            "Session '{}' cannot be forked: {why}. {INSTEAD}",
            info.session_id
        ))
    };
    if !cfg!(target_os = "linux") {
        return Err(unsupported(
            "forking a kernel needs Linux (pidfd, SO_PEERCRED)".into(),
        ));
    }
    if info.location != "local" {
        return Err(unsupported(format!(
            "its kernel runs on the gateway '{}'; only local kernels can be forked",
            info.location
        )));
    }
    if info.sandbox.restricts() {
        return Err(unsupported(format!(
            "it runs in the '{}' sandbox, whose kernel may neither bind the fork's new ports nor reach the socket the fork is handed over on; only sessions with sandbox \"none\" can be forked",
            info.sandbox
        )));
    }
    if desc.launcher.adopts() {
        return Err(unsupported(
            "its kernel was adopted from a connection file; kernel-mcp forks only kernels it started".into(),
        ));
    }
    let implementation = info.kernel_info["implementation"]
        .as_str()
        .unwrap_or_default();
    if implementation != "ipython" {
        return Err(unsupported(format!(
            "it runs {} ({}); only IPython kernels (ipykernel 7 or later) can be forked, since a fork must rebuild the kernel's threads and sockets",
            info.kernel,
            if implementation.is_empty() {
                "an unknown implementation"
            } else {
                implementation
            }
        )));
    }
    info.pid.ok_or_else(|| SessionError::Dead {
        session: info.session_id.clone(),
        why: format!("it is {}", info.status.as_str()),
    })
}
