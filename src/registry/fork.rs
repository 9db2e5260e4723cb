//! `fork_session` (DESIGN §18): a new session whose kernel is a copy of a live local IPython
//! kernel, taken between two of its runs (`kernel::fork` has the mechanics, the source's side
//! is `session/actor/fork.rs`). And [`Registry::create_from_launcher`], which files a session
//! whose first kernel is already started (the fork; any kernel source that hands over a
//! running kernel can use it).
//!
//! The fork runs under the source's launch options: its cwd, environment and memory limit;
//! its sandbox is the source's too, inherited by the process itself. A restart of the fork
//! starts a fresh kernel the way the source's were started. Kernels that cannot be forked
//! (another language, a gateway's, an adopted one, ipykernel before 7) are `UNSUPPORTED`,
//! saying why and what to use instead.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{Registry, lock, validate_session_id};
use crate::kernel::fork::{ForkError, ForkPlan, ForkedLauncher, parse_scheduled};
use crate::session::{SessionDesc, SessionError, SessionHandle, SessionInfo};

/// How long the source may take to answer the helper's scheduling request.
const SCHEDULE_TIMEOUT: Duration = Duration::from_secs(30);

/// What to use where a kernel cannot be forked.
const INSTEAD: &str = "To carry state to a new session otherwise, checkpoint_session / restore it, or create_session and rerun_history.";

impl Registry {
    /// Fork session `source` (its handle, as the caller's view resolved it) into a new
    /// session `new_id`. The source is not disturbed: same pid, generation and status; runs
    /// submitted while the fork is taken wait for it (well under a second).
    /// Errors: `INVALID_ARGUMENT` (a bad or reserved id), `SESSION_ALREADY_EXISTS`,
    /// `LIMIT_EXCEEDED` (sessions), `SESSION_BUSY` (a run executes), `UNSUPPORTED` (this
    /// kernel cannot be forked), `KERNEL_START_FAILED` (the copy did not come up).
    pub async fn fork_session(
        &self,
        source: &SessionHandle,
        new_id: &str,
    ) -> Result<SessionInfo, SessionError> {
        validate_session_id(new_id)?;
        if new_id == super::DEFAULT_SESSION {
            return Err(SessionError::InvalidArgument(
                "`default` is each connection's implicit session; give the fork another name."
                    .into(),
            ));
        }
        {
            let sessions = lock(&self.sessions);
            if sessions.contains_key(new_id) {
                return Err(SessionError::AlreadyExists(new_id.to_string()));
            }
            if sessions.len() >= self.limits.max_sessions {
                return Err(SessionError::LimitExceeded(format!(
                    "This server already runs {} sessions, its limit; destroy one you no longer need first.",
                    sessions.len()
                )));
            }
        }
        let info = source.info().await?;
        let desc = source.desc().clone();
        let source_pid = forkable(&info, &desc)?;
        let opts = desc.launcher.launch_options().cloned();
        let startup_timeout = opts
            .as_ref()
            .map(|o| o.startup_timeout)
            .unwrap_or(Duration::from_secs(self.limits.startup_timeout_s));
        let max_memory_mib = opts
            .as_ref()
            .map_or(self.limits.max_memory_mib, |o| o.max_memory_mib);
        let started = |e: crate::kernel::StartError| SessionError::KernelStartFailed {
            message: format!(
                "The fork of session '{}' did not come up: {e}",
                info.session_id
            ),
            details: json!({"kernel": info.kernel, "forked_from": info.session_id}),
        };

        let supervisor = opts.as_ref().and_then(|o| o.supervisor.clone());
        let plan = ForkPlan::prepare(&desc.spec.name).map_err(started)?;
        let content = plan.request_content(supervisor.as_deref().map(|s| (s, max_memory_mib)));
        let reply = match source.fork_request(content, SCHEDULE_TIMEOUT).await {
            Ok(reply) => reply,
            // Refused: nothing of ours holds the source.
            Err(e @ (SessionError::Busy { .. } | SessionError::Forking { .. })) => return Err(e),
            Err(e) => {
                let _ = source.end_fork().await;
                return Err(e);
            }
        };
        let child = match parse_scheduled(&reply, &desc.spec.name) {
            Ok(pid) if pid == source_pid => {
                let deadline = Instant::now() + startup_timeout;
                plan.meet(source_pid, deadline).await.map_err(started)
            }
            Ok(pid) => Err(SessionError::Internal(format!(
                "The fork helper ran in pid {pid}, not in the session's kernel (pid {source_pid})."
            ))),
            Err(ForkError::Unsupported(why)) => Err(SessionError::Unsupported(format!(
                "Session '{}' cannot be forked: {why}. {INSTEAD}",
                info.session_id
            ))),
            Err(ForkError::Start(e)) => Err(started(e)),
        };
        if let Ok(child) = &child
            && supervisor.is_some()
        {
            // The fork has a supervisor of its own: the source's lets go of it.
            crate::kernel::fork::release_from_source(source_pid, child.pid());
        }
        // The copy is taken (or will not be): the source's runs go on.
        let _ = source.end_fork().await;
        let child = child?;
        tracing::info!(source = %info.session_id, fork = new_id, pid = child.pid(), "kernel forked");
        let deadline = Instant::now() + startup_timeout;
        let kernel = child
            .start(&desc.spec, supervisor.is_some(), max_memory_mib, deadline)
            .await
            .map_err(started)?;
        let launcher = ForkedLauncher::new(kernel, desc.launcher.clone(), info.session_id.clone());
        let fork_desc = SessionDesc {
            id: new_id.to_string(),
            spec: desc.spec.clone(),
            cwd: desc.cwd.clone(),
            launcher: Arc::new(launcher),
            journal_dir: self.journal_dir.clone(),
        };
        let (entries, _) = source.history(None, None).await.unwrap_or_default();
        let expires_after = self.limits.default_expires_after_s.map(Duration::from_secs);
        let (handle, _) = self
            .create_from_launcher(new_id.to_string(), fork_desc, expires_after)
            .await?;
        let _ = handle
            .seed_history(entries.into_iter().map(|(_, e)| e).collect())
            .await;
        handle.info().await
    }

    /// File a new session under `key` whose launcher hands over an already started kernel
    /// (or starts one), and wait until its first kernel is installed; its idle expiry is
    /// `expires_after` (`None` or zero: never). Nothing half-created remains on failure.
    /// Errors: `SESSION_ALREADY_EXISTS`, `LIMIT_EXCEEDED`, `KERNEL_START_FAILED`.
    pub(crate) async fn create_from_launcher(
        &self,
        key: String,
        desc: SessionDesc,
        expires_after: Option<Duration>,
    ) -> Result<(SessionHandle, SessionInfo), SessionError> {
        let id = desc.id.clone();
        let (mut handle, created_rx);
        {
            let mut sessions = lock(&self.sessions);
            if sessions.contains_key(&key) {
                return Err(SessionError::AlreadyExists(id));
            }
            if sessions.len() >= self.limits.max_sessions {
                return Err(SessionError::LimitExceeded(format!(
                    "This server already runs {} sessions, its limit; destroy one you no longer need first.",
                    sessions.len()
                )));
            }
            (handle, created_rx) =
                SessionHandle::spawn(&self.sessions_runtime, desc, self.limits.clone());
            handle = handle.filed_under(key.clone());
            sessions.insert(key.clone(), handle.clone());
        }
        let mut result = created_rx
            .await
            .unwrap_or_else(|_| Err(SessionError::gone(&id)));
        if result.is_ok() {
            lock(&self.expired).remove(&key);
            if let Some(after) = expires_after.filter(|d| !d.is_zero()) {
                result = handle.renew(Some(Some(after))).await;
            }
        }
        match result {
            Ok(info) => Ok((handle, info)),
            Err(e) => {
                let _ = handle.destroy().await;
                let ours = lock(&self.sessions)
                    .get(&key)
                    .is_some_and(|h| h.same_session(&handle));
                if ours {
                    self.forget(&key);
                }
                Err(e)
            }
        }
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
