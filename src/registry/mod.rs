//! The process-wide registry: which sessions exist, which runs they hold, and where kernels
//! come from. It belongs to the process, not to an MCP connection (HTTP and socket modes
//! build a handler per client on one registry).
//!
//! Every call that reaches a session or a run takes a key ([`SessionKey`], [`RunKey`]) that
//! only the caller's [`scope::Scope`] makes, so who may touch what is decided in one place.
//! Layout: `scope/` (the keys and the view of one connection), `table.rs` (live sessions,
//! expired ones, ended defaults' journals), `runs.rs` (the one run index), `fresh.rs`
//! (fresh-mode runs' helper kernels), `expiry.rs` (tombstones), `fork.rs` (`fork_session`),
//! `sources/` (where kernels come from: [`KernelSource`] and [`SessionOptions`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Limits;
use crate::kernel::discovery::KernelSearch;
use crate::kernel::remote::Rest;
use crate::kernel::{Sandbox, ShutdownRung};
use crate::session::cmd;
use crate::session::history::Journal;
use crate::session::{
    Created, ExecuteRequest, SessionDesc, SessionError, SessionHandle, SessionInfo, Settled,
    Submitted,
};

pub mod expiry;
pub mod floors;
mod fork;
pub mod fresh;
mod journals;
mod run_handle;
pub mod runs;
pub mod scope;
pub mod sources;
pub mod table;

use floors::Floors;
use run_handle::Held;
pub use run_handle::RunHandle;
use runs::{Holder, RunIndex};

use scope::key::{ConnectionId, RunKey, SessionKey, Slot, Viewer};
pub use sources::{KernelSource, SessionOptions, Sources};
use table::{Live, Table};

/// Where the history of a session that is not live is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PastHistory {
    /// This journal (a connection's own `default` that ended).
    Journal(PathBuf),
    /// The newest public journal in `dir` (its owner's) of the session of this name.
    LatestOf { dir: PathBuf, name: String },
    /// Nothing: the caller has no past session of that name.
    Nothing,
}

/// All sessions of this server process.
pub struct Registry {
    /// Live, expired and ended sessions (see [`table`]). A `std::sync::Mutex` held for map
    /// updates only, never across an await.
    table: Mutex<Table>,
    runs: Arc<RunIndex>,
    /// Serializes the lazy creation of `default` sessions.
    default_lock: tokio::sync::Mutex<()>,
    sources: Sources,
    limits: Arc<Limits>,
    /// Where session actors (and their kernels' sockets) run.
    runtime: tokio::runtime::Handle,
    /// Where sessions journal their history; `None`: no journals.
    journal_dir: Option<PathBuf>,
    helpers: Arc<fresh::Helpers>,
    /// Numbers the names of sessions created without one (`session-N`).
    counter: AtomicU64,
    /// Kernel code's access to MCP tools (`crate::broker`); `None`: none.
    broker: Option<Arc<crate::broker::Broker>>,
    /// What each connection's client asked for beyond the server's floors (its hello, see
    /// [`floors`]). A `std::sync::Mutex` held for map updates only.
    client_floors: Mutex<std::collections::HashMap<ConnectionId, Floors>>,
    /// Every session's artifacts (`crate::artifacts`), filed by slot; a session's go when
    /// it is forgotten.
    artifacts: Arc<crate::artifacts::Store<Slot>>,
}

impl Registry {
    /// `sessions` is the runtime session actors (and their kernels' sockets) run on.
    pub fn new(
        search: KernelSearch,
        env_prefix: Option<PathBuf>,
        limits: Limits,
        sessions: tokio::runtime::Handle,
    ) -> Registry {
        // The process's identity dates from the registry's birth, not from the first call.
        let _ = crate::instance::current();
        // Spool files of servers that died are removed now, not at the first flood; large
        // stream frames wait in unnamed files beside the spool files.
        if let Some(spool) = crate::session::run::spool::dir() {
            crate::kernel::transit::set_dir(spool.path());
        }
        Registry {
            table: Default::default(),
            runs: Default::default(),
            default_lock: Default::default(),
            sources: Sources::new(search, env_prefix),
            limits: Arc::new(limits),
            runtime: sessions,
            journal_dir: Journal::dir()
                .inspect_err(|e| tracing::warn!("history journals are off: {e}"))
                .ok(),
            helpers: Default::default(),
            counter: AtomicU64::new(0),
            broker: None,
            client_floors: Default::default(),
            artifacts: Default::default(),
        }
    }

    /// Sandbox every session at least as `sandbox` (`serve --sandbox`): a session may ask for
    /// a stricter one, never a weaker.
    pub fn with_sandbox(mut self, sandbox: crate::kernel::Sandbox) -> Registry {
        self.sources.sandbox = sandbox;
        self
    }

    /// Give sessions the broker of `settings` (before [`Self::with_pool`], whose kernels are
    /// launched with its environment).
    pub fn with_broker(mut self, settings: crate::broker::BrokerSettings) -> Registry {
        let broker = Arc::new(crate::broker::Broker::new(settings, self.runtime.clone()));
        self.sources.env_hook = broker.env_hook();
        self.broker = Some(broker);
        self
    }

    /// Offer the kernels of these Jupyter servers and gateways too.
    pub fn with_gateways(mut self, gateways: Vec<Rest>) -> Registry {
        self.sources.gateways = Arc::new(gateways);
        self
    }

    /// Run every kernel under `kernel-mcp supervise` from this binary, so nothing a kernel
    /// starts outlives its session (and memory limits apply).
    pub fn with_supervisor(mut self, binary: PathBuf) -> Registry {
        self.sources.supervisor = Some(binary);
        self
    }

    /// Keep started kernels ready per `(kernelspec, N)` (`--pool`; see [`sources::pool`]).
    /// Errors: [`sources::pool::PoolError::NotFound`]: a kernelspec not found.
    pub fn with_pool(self, pool: &[(String, usize)]) -> Result<Registry, sources::pool::PoolError> {
        self.sources.add_pool(pool, &self.limits)?;
        Ok(self)
    }

    /// Start the pool's kernels (on the sessions runtime), within the session limit.
    pub fn fill_pool(&self) {
        let room = self.limits.max_sessions.saturating_sub(self.live_count());
        self.sources.pool.fill(&self.runtime, room);
    }

    /// The server's limits.
    pub fn limits(&self) -> &Arc<Limits> {
        &self.limits
    }

    /// Where kernels come from (kernelspecs, environments, gateways, the pool).
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// True when no session is live (the service's idle exit counts this).
    pub fn is_empty(&self) -> bool {
        self.live_count() == 0
    }

    fn live_count(&self) -> usize {
        lock(&self.table).count()
    }

    /// A name no live session has, `session-N` (for [`Scope::new_key`]).
    fn unused_name(&self) -> String {
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
            let name = format!("session-{n}");
            let taken = lock(&self.table).live_names().any(|n| n == name);
            if !taken {
                return name;
            }
        }
    }

    /// The session of `key`. Errors: `SESSION_EXPIRED`, `SESSION_NOT_FOUND` naming the
    /// sessions the caller sees.
    pub fn get(&self, key: &SessionKey) -> Result<SessionHandle, SessionError> {
        let table = &mut lock(&self.table);
        let handle = table.get(key.slot(), key.viewer())?;
        // A client that asked for a sandbox uses no session sandboxed less.
        if let Some(floor) = key
            .viewer()
            .connection()
            .and_then(|c| self.client_floor(c))
            .map(|f| f.sandbox)
            .filter(Sandbox::restricts)
            && let Some(live) = table.live(key.slot())
            && !live.sandbox.at_least(floor)
        {
            return Err(SessionError::InvalidArgument(format!(
                "Session '{}' runs with sandbox '{}', and this client asked for every session to be sandboxed at least as '{floor}': it may not use that session. Create a session of its own.",
                key.name(),
                live.sandbox
            )));
        }
        Ok(handle)
    }

    /// The session of `key`; a lazy key's session (`execute` without `session_id`) is
    /// created on first use. An expired one is not replaced: it answers `SESSION_EXPIRED`
    /// until the caller creates a new one (`create_session(session_id="default")`).
    pub async fn get_or_default(&self, key: &SessionKey) -> Result<SessionHandle, SessionError> {
        if !key.is_lazy() {
            return self.get(key);
        }
        let _guard = self.default_lock.lock().await;
        match self.get(key) {
            Err(SessionError::NotFound { .. }) => {}
            found => return found,
        }
        self.create(key, KernelSource::Default, SessionOptions::default())
            .await?;
        self.get(key)
    }

    /// Create the session of `key` from `source` with `opts`, and wait for its kernel.
    /// Errors: `INVALID_ARGUMENT` (a cwd that is not a directory), `LIMIT_EXCEEDED`,
    /// `SESSION_ALREADY_EXISTS`, and those of [`Sources::launch`].
    pub async fn create(
        &self,
        key: &SessionKey,
        source: KernelSource,
        opts: SessionOptions,
    ) -> Result<SessionInfo, SessionError> {
        let live = self.live_count();
        if live >= self.limits.max_sessions {
            return Err(SessionError::LimitExceeded(format!(
                "This server already runs {live} sessions, its limit; destroy one you no longer need first."
            )));
        }
        let cwd = session_cwd(opts.cwd.as_deref())?;
        refuse_variables_we_set(&opts.env)?;
        let floors = self.floors(key.viewer());
        let launch = self
            .sources
            .launch(
                &source,
                &opts,
                &cwd,
                &self.limits,
                sources::Asker {
                    live,
                    floors,
                    username: key.viewer().username(),
                },
            )
            .await?;
        let sandbox = launch.launcher.sandbox();
        // The broker's side of the session (see `crate::broker`): an endpoint for a local
        // Python kernel, a notice for a remote one, nothing for an adopted one.
        let observer = self
            .broker
            .as_ref()
            .and_then(|b| match (&source, source.gateway()) {
                (_, Some(gateway)) => b.attach_remote(gateway),
                (KernelSource::ConnectionFile(_), _) => None,
                _ => b.attach(
                    key.name(),
                    &launch.spec,
                    &cwd,
                    self.artifacts_of(key.slot()),
                ),
            });
        let desc = SessionDesc {
            id: key.name().to_string(),
            spec: launch.spec,
            cwd,
            launcher: launch.launcher,
            journal_dir: match key.slot().principal() {
                Some(owner) => self.journal_dir_of(owner),
                None => self.journal_dir_of(key.viewer().owner()),
            },
            journal_private: key.is_private(),
            span: session_span(key.slot()),
            observer,
            kernel_id: opts
                .jupyter_kernel_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        };
        let (handle, created) = {
            let mut table = lock(&self.table);
            if table.live(key.slot()).is_some() {
                return Err(SessionError::AlreadyExists(key.name().to_string()));
            }
            let (handle, created) = SessionHandle::spawn(&self.runtime, desc, self.limits.clone());
            let live = Live {
                handle: handle.clone(),
                journal: None,
                sandbox,
            };
            table.insert(key.slot().clone(), live)?;
            (handle, created)
        };
        self.started(key.slot(), &handle, created, opts.expires_after)
            .await
    }

    /// A new session's first kernel start ended: set its expiry, or remove what was
    /// half-created (unless the slot meanwhile belongs to a newer session).
    async fn started(
        &self,
        slot: &Slot,
        handle: &SessionHandle,
        created: Created,
        expires_after: Option<Duration>,
    ) -> Result<SessionInfo, SessionError> {
        let outcome = created
            .await
            .unwrap_or_else(|_| Err(SessionError::gone(handle.id())));
        let result = match outcome {
            Ok(started) => {
                lock(&self.table).started(slot, started.journal);
                let after = expires_after
                    .or(self.limits.default_expires_after_s.map(Duration::from_secs))
                    .filter(|d| !d.is_zero());
                match after {
                    Some(_) => {
                        handle
                            .call(cmd::Renew {
                                expires_after: Some(after),
                            })
                            .await
                    }
                    None => Ok(started.info),
                }
            }
            Err(e) => Err(e),
        };
        if result.is_err() {
            let _ = handle.call(cmd::Destroy).await;
            self.forget(slot, handle, false);
        }
        result
    }

    /// The info of every session `viewer` sees, sorted by id.
    pub async fn list(&self, viewer: &Viewer) -> Vec<SessionInfo> {
        let handles = lock(&self.table).seen_by(viewer);
        let mut out = Vec::new();
        for (slot, h) in handles {
            if let Ok(mut info) = h.call(cmd::Info).await {
                // An admin's view of another principal's session: named `OWNER/NAME`.
                if let Some(owner) = slot.principal().filter(|o| *o != viewer.owner()) {
                    info.session_id = viewer.id_of(&slot);
                    info.owner = Some(owner.to_string());
                }
                out.push(info);
            }
        }
        out.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        out
    }

    /// Every live session with its slot, whoever owns it (`kernel-mcp service status`).
    pub fn all_sessions(&self) -> Vec<(Slot, SessionHandle)> {
        lock(&self.table).all()
    }

    /// The ids of the sessions `viewer` sees, sorted.
    pub fn names(&self, viewer: &Viewer) -> Vec<String> {
        lock(&self.table).names(viewer)
    }

    /// Shut the session of `key` down and forget it. Errors: as [`Self::get`].
    pub async fn destroy(&self, key: &SessionKey) -> Result<ShutdownRung, SessionError> {
        let handle = self.get(key)?;
        self.forget(key.slot(), &handle, false);
        let rung = handle.call(cmd::Destroy).await;
        // Its runs' outputs are freed now; give the pages back (see `crate::memory`).
        crate::memory::release_freed();
        rung
    }

    /// Take `handle`'s session out of `slot` (and its runs out of the index), unless the slot
    /// now belongs to a newer session. Returns true when it did.
    fn forget(&self, slot: &Slot, handle: &SessionHandle, expired: bool) -> bool {
        let removed = lock(&self.table).remove(slot, handle, expired);
        if removed {
            self.runs.forget_session(slot);
            self.artifacts.forget_session(slot);
        }
        removed
    }

    /// `SESSION_NOT_FOUND` for `key`, naming the sessions the caller sees.
    pub fn not_found(&self, key: &SessionKey, journal_checked: bool) -> SessionError {
        lock(&self.table).not_found(key.slot(), key.viewer(), journal_checked)
    }

    /// Queue a run in `key`'s session; returns the session, the run's id and a receiver of
    /// its status. Errors: as [`Self::get`], and those of [`cmd::Submit`].
    pub async fn submit(
        &self,
        key: &SessionKey,
        req: ExecuteRequest,
    ) -> Result<(SessionHandle, Submitted), SessionError> {
        let handle = self.get(key)?;
        let submitted = handle.call(cmd::Submit::new(req)).await?;
        self.runs
            .track(submitted.0.clone(), key.slot().clone(), Holder::Session);
        Ok((handle, submitted))
    }

    /// [`Self::submit`], plus a receiver of the run's record once it settles.
    pub async fn submit_settled(
        &self,
        key: &SessionKey,
        req: ExecuteRequest,
    ) -> Result<(SessionHandle, Submitted, Settled), SessionError> {
        let handle = self.get(key)?;
        let (submit, settled) = cmd::Submit::settled(req);
        let submitted = handle.call(submit).await?;
        self.runs
            .track(submitted.0.clone(), key.slot().clone(), Holder::Session);
        Ok((handle, submitted, settled))
    }

    /// Run `req` in a short-lived helper kernel like the one of `key`'s session (see
    /// [`fresh`]). Errors: as [`Self::get`], `LIMIT_EXCEEDED`, `KERNEL_START_FAILED`.
    pub async fn start_fresh(
        &self,
        key: &SessionKey,
        req: ExecuteRequest,
    ) -> Result<fresh::FreshRun, SessionError> {
        let handle = self.get(key)?;
        fresh::start(
            &self.helpers,
            &self.runs,
            &self.runtime,
            &self.limits,
            key.slot().clone(),
            &handle,
            req,
        )
        .await
    }

    /// Who holds run `key` now, for a caller that sees its session. A run of a session the
    /// caller does not see answers exactly like one that never existed.
    /// Errors: `EXECUTION_NOT_FOUND`.
    pub fn run(&self, key: &RunKey) -> Result<RunHandle, SessionError> {
        let not_found = || SessionError::RunNotFound(key.run().to_string());
        let entry = self
            .runs
            .get(key.run(), key.viewer())
            .ok_or_else(not_found)?;
        let held = match entry.holder {
            Holder::Session => lock(&self.table)
                .live(&entry.owner)
                .map(|l| Held::Live(l.handle.clone()))
                .ok_or_else(not_found)?,
            Holder::Helper(h) => Held::Live(h),
            Holder::Finished(r) => Held::Finished(r),
        };
        Ok(RunHandle::new(key.clone(), held, self.runs.clone()))
    }

    /// The slot of the session `key`'s run was asked of, when the caller sees it.
    pub fn run_slot(&self, key: &RunKey) -> Option<Slot> {
        self.runs.get(key.run(), key.viewer()).map(|e| e.owner)
    }

    /// The live session in `slot` (an artifact's, which the caller was checked to see).
    pub fn session_in(&self, slot: &Slot) -> Option<SessionHandle> {
        lock(&self.table).live(slot).map(|l| l.handle.clone())
    }

    /// Every session's artifacts (see [`crate::artifacts`]).
    pub fn artifacts(&self) -> &Arc<crate::artifacts::Store<Slot>> {
        &self.artifacts
    }

    /// The part of the artifact store that the kernels of the session in `slot` reach.
    fn artifacts_of(&self, slot: &Slot) -> crate::broker::shared::SessionArtifacts {
        crate::broker::shared::SessionArtifacts {
            store: self.artifacts.clone(),
            slot: slot.clone(),
        }
    }

    /// True while `owner` has a `default` session, live or recently expired.
    fn holds_default(&self, owner: ConnectionId) -> bool {
        let slot = Slot::Default(owner);
        let mut table = lock(&self.table);
        table.live(&slot).is_some() || table.is_expired(&slot)
    }

    /// Connection `owner` has ended: destroy its `default` session, if any.
    async fn end_default(&self, owner: ConnectionId) {
        let slot = Slot::Default(owner);
        let Some(handle) = lock(&self.table).live(&slot).map(|l| l.handle.clone()) else {
            return;
        };
        if self.forget(&slot, &handle, false) {
            let _ = handle.call(cmd::Destroy).await;
            crate::memory::release_freed();
        }
        lock(&self.table).forget_connection(owner);
    }

    /// Connection `owner` is gone: forget what only it could name.
    fn forget_connection(&self, owner: ConnectionId) {
        lock(&self.table).forget_connection(owner);
        lock(&self.client_floors).remove(&owner);
    }

    /// Destroy every session (server exit), in parallel, each bounded by its shutdown ladder.
    pub async fn shutdown_all(&self) {
        let mut handles = lock(&self.table).drain();
        handles.extend(self.runs.drain_helpers());
        let all = handles.iter().map(|h| h.call(cmd::Destroy));
        let pool = self.sources.pool.shutdown(self.limits.shutdown_grace());
        let both = futures::future::join(futures::future::join_all(all), pool);
        let _ = tokio::time::timeout(Duration::from_secs(15), both).await;
        crate::session::run::spool::remove_own();
        if let Some(b) = &self.broker {
            let _ = tokio::time::timeout(Duration::from_secs(10), b.shutdown()).await;
        }
    }
}

/// The working directory of a new session: `cwd` made absolute, else the server's.
/// Errors: `INVALID_ARGUMENT` when `cwd` is not an existing directory.
fn session_cwd(cwd: Option<&Path>) -> Result<PathBuf, SessionError> {
    match cwd {
        Some(c) if c.is_dir() => Ok(std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf())),
        Some(c) => Err(SessionError::InvalidArgument(format!(
            "cwd '{}' is not an existing directory.",
            c.display()
        ))),
        None => Ok(std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))),
    }
}

/// Variables kernel-mcp sets in the kernels it starts: a caller's value would be replaced.
const SET_BY_KERNEL_MCP: [&str; 4] = [
    crate::kernel::PARENT_PID_ENV,
    crate::broker::ENDPOINT_ENV,
    crate::broker::OFF_ENV,
    crate::broker::dialer::DIALER_ENV,
];

/// Errors: `INVALID_ARGUMENT` when `env` names a variable kernel-mcp sets itself.
fn refuse_variables_we_set(
    env: &std::collections::BTreeMap<String, String>,
) -> Result<(), SessionError> {
    match env.keys().find(|k| SET_BY_KERNEL_MCP.contains(&k.as_str())) {
        Some(k) => Err(SessionError::InvalidArgument(format!(
            "{k} is set by kernel-mcp in the kernels it starts (a value here would be replaced); leave it out of env."
        ))),
        None => Ok(()),
    }
}

/// The span a session logs in. `owner` is set for a connection's own `default`, whose events
/// only that connection may receive (`mcp/logging.rs` reads it); the span is never a child of
/// the call that created the session.
fn session_span(slot: &Slot) -> tracing::Span {
    let owner = slot.connection().map(ConnectionId::get);
    let principal = slot.principal().map(|o| o.to_string());
    tracing::info_span!(target: "kernel_mcp::session", parent: None, "session", id = %slot.name(), owner, principal)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
