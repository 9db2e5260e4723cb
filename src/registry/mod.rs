//! The process-wide registry: session names → handles, run ids → sessions, kernelspec search,
//! and shutdown of every session when the server exits.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Limits;
use crate::kernel::discovery::KernelSearch;
use crate::kernel::{KernelSpec, LaunchOptions, LocalLauncher, ShutdownRung};
use crate::session::history::Journal;
use crate::session::{
    ExecuteRequest, RunId, SessionDesc, SessionError, SessionHandle, SessionInfo, Settled,
    Submitted,
};
use sources::environments::EnvironmentStore;
use sources::specs::adopted_spec;

pub mod expiry;
pub(crate) mod fresh;
pub mod scope;
pub mod sources;

/// Name of the session `execute` uses when no `session_id` is given.
pub const DEFAULT_SESSION: &str = "default";

/// Run ids remembered for `get_execution` across all sessions before the map is pruned.
const MAX_TRACKED_RUNS: usize = 100_000;

/// What `create_session` asks for (validated by the MCP layer's types, checked here).
#[derive(Debug, Clone, Default)]
pub struct CreateRequest {
    pub session_id: Option<String>,
    pub kernel: Option<String>,
    pub python: Option<String>,
    /// A registered environment's name (see [`sources::environments`]).
    pub environment: Option<String>,
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub startup_timeout: Option<Duration>,
    /// The kernel tree's memory limit (MiB; 0 = none); `None`: the server's default.
    pub max_memory_mib: Option<u64>,
    /// Idle time before the session expires: `None` the server's default, zero never.
    pub expires_after: Option<Duration>,
    /// Adopt the running kernel of this connection file instead of starting one.
    pub connection_file: Option<PathBuf>,
    /// Run the kernel on this configured gateway (see [`sources::remote`]).
    pub gateway: Option<String>,
    /// With `gateway`: adopt this running kernel instead of starting one.
    pub kernel_id: Option<String>,
    /// The sandbox policy; `None`: the server's (`--sandbox`).
    pub sandbox: Option<crate::kernel::SandboxPolicy>,
    /// Allow outbound network in the sandbox; `None`: the server's.
    pub sandbox_network: Option<bool>,
    /// With `gateway`: adopt the kernel of the notebook open at this path on that Jupyter
    /// Server (its `/api/sessions`), instead of naming the kernel by `kernel_id`.
    pub notebook_path: Option<String>,
    /// Keep a live `.ipynb` of the session here (see `ops::export::mirror`); relative paths
    /// are under the session's cwd.
    pub notebook: Option<PathBuf>,
    /// The id Jupyter clients will know the session's kernel by (the Jupyter face names a
    /// kernel it starts before the session exists); `None`: a new UUID.
    pub jupyter_kernel_id: Option<String>,
}

/// All sessions of this server process.
pub struct Registry {
    sessions: Mutex<HashMap<String, SessionHandle>>,
    /// run_id → session_id, and the run ids in submission order (to forget the oldest).
    runs: Mutex<(HashMap<RunId, String>, std::collections::VecDeque<RunId>)>,
    /// Serializes the lazy creation of the default session.
    default_lock: tokio::sync::Mutex<()>,
    pub search: KernelSearch,
    pub env_prefix: Option<PathBuf>,
    pub limits: Arc<Limits>,
    counter: std::sync::atomic::AtomicU64,
    /// Where session actors run.
    pub(crate) sessions_runtime: tokio::runtime::Handle,
    /// Interpreters known to import ipykernel (the probe costs a Python start-up).
    ipykernel_ok: Mutex<std::collections::HashSet<PathBuf>>,
    /// Where sessions journal their history; `None`: no journals.
    journal_dir: Option<PathBuf>,
    /// Named Python environments (`create_session(environment=…)`).
    pub environments: EnvironmentStore,
    /// Helper kernels of `execute_file(mode="fresh")` runs, and their finished results.
    pub(crate) fresh: Arc<fresh::FreshRuns>,
    /// The `kernel-mcp` binary that supervises each kernel (see `kernel::supervise`).
    pub(super) supervisor: Option<PathBuf>,
    /// Sessions that expired recently, by key (see [`expiry`]).
    pub(super) expired: Mutex<expiry::Tombstones>,
    /// Started kernels waiting for a session (`--pool`, see [`sources::pool`]).
    pub pool: sources::pool::Pool,
    /// The configured Jupyter servers and gateways (`--gateway`).
    pub gateways: crate::kernel::remote::Gateways,
    /// The sandbox of a session that does not choose one (`--sandbox`).
    pub sandbox: crate::kernel::Sandbox,
    /// The sessions' live notebooks (`create_session(notebook)`, `mirror_notebook`).
    pub mirrors: crate::ops::export::mirror::Mirrors,
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
        Registry {
            sessions_runtime: sessions,
            sessions: Mutex::new(HashMap::new()),
            runs: Mutex::new(Default::default()),
            default_lock: tokio::sync::Mutex::new(()),
            search,
            env_prefix,
            limits: Arc::new(limits),
            counter: std::sync::atomic::AtomicU64::new(0),
            ipykernel_ok: Mutex::new(Default::default()),
            journal_dir: Journal::dir()
                .inspect_err(|e| tracing::warn!("history journals are off: {e}"))
                .ok(),
            environments: EnvironmentStore::from_env(),
            fresh: Default::default(),
            supervisor: None,
            expired: Mutex::new(Default::default()),
            pool: Default::default(),
            gateways: Default::default(),
            sandbox: crate::kernel::Sandbox::NONE,
            mirrors: Default::default(),
        }
    }

    /// Sandbox every session that does not choose otherwise (`serve --sandbox`).
    pub fn with_sandbox(mut self, sandbox: crate::kernel::Sandbox) -> Registry {
        self.sandbox = sandbox;
        self
    }

    /// Offer the kernels of these Jupyter servers and gateways too.
    pub fn with_gateways(mut self, gateways: Vec<crate::kernel::remote::Rest>) -> Registry {
        self.gateways = Arc::new(gateways);
        self
    }

    /// Run every kernel under `kernel-mcp supervise` from this binary, so nothing a kernel
    /// starts outlives its session (and memory limits apply).
    pub fn with_supervisor(mut self, binary: PathBuf) -> Registry {
        self.supervisor = Some(binary);
        self
    }

    fn next_id(&self, prefix: &str) -> String {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        format!("{prefix}{n}")
    }

    /// The ids of the live sessions, sorted.
    pub fn session_ids(&self) -> Vec<String> {
        self.known()
    }

    fn known(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.sessions)
            .keys()
            .filter(|k| !is_internal_key(k))
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// The kernel used when none is named: `python3` if installed, else the first found.
    pub fn default_kernel(&self) -> Option<String> {
        let specs = self.search.list();
        specs
            .iter()
            .find(|s| s.name == "python3")
            .or(specs.first())
            .map(|s| s.name.clone())
    }

    /// Create a session and wait for its kernel to be ready.
    /// Errors: `INVALID_ARGUMENT`, `SESSION_ALREADY_EXISTS`, `KERNEL_NOT_FOUND`, `KERNEL_START_FAILED`.
    pub async fn create(&self, req: CreateRequest) -> Result<SessionInfo, SessionError> {
        let id = match &req.session_id {
            Some(id) => {
                validate_session_id(id)?;
                id.clone()
            }
            None => loop {
                let id = self.next_id("session-");
                if !lock(&self.sessions).contains_key(&id) {
                    break id;
                }
            },
        };
        self.create_keyed(
            id.clone(),
            CreateRequest {
                session_id: Some(id),
                ..req
            },
        )
        .await
    }

    /// Create a session filed under `key`, which may differ from its id (`req.session_id`,
    /// required): a connection's own `default` session is filed under a key no client can
    /// name ([`is_internal_key`]), so other connections neither see nor reach it.
    pub async fn create_keyed(
        &self,
        key: String,
        req: CreateRequest,
    ) -> Result<SessionInfo, SessionError> {
        let (req, environment) = self.apply_environment(req).await?;
        let Some(id) = req.session_id.clone() else {
            return Err(SessionError::Internal(
                "create_keyed needs a session id".into(),
            ));
        };
        if req.python.is_some() && req.kernel.is_some() {
            return Err(SessionError::InvalidArgument(
                "Give either `kernel` (a kernelspec name) or `python` (an interpreter or venv), not both.".into(),
            ));
        }
        let live = lock(&self.sessions).len();
        if live >= self.limits.max_sessions {
            return Err(SessionError::LimitExceeded(format!(
                "This server already runs {live} sessions, its limit; destroy one you no longer need first."
            )));
        }
        if let Some(bad) = req
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(SessionError::InvalidArgument(format!(
                "{bad:?} is not an environment variable name."
            )));
        }
        let cwd = match &req.cwd {
            Some(c) if c.is_dir() => std::path::absolute(c).unwrap_or_else(|_| c.clone()),
            Some(c) => {
                return Err(SessionError::InvalidArgument(format!(
                    "cwd '{}' is not an existing directory.",
                    c.display()
                )));
            }
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let startup_timeout = req
            .startup_timeout
            .unwrap_or(Duration::from_secs(self.limits.startup_timeout_s));
        let sandbox = crate::kernel::Sandbox {
            policy: req.sandbox.unwrap_or(self.sandbox.policy),
            network: req.sandbox_network.unwrap_or(self.sandbox.network),
        };
        if !sandbox.at_least(self.sandbox) {
            return Err(SessionError::InvalidArgument(format!(
                "This server sandboxes every session at least as '{}' (--sandbox{}); a session may ask for a stricter sandbox, not for '{sandbox}'.",
                self.sandbox,
                if self.sandbox.network {
                    ", --sandbox-network"
                } else {
                    ""
                }
            )));
        }
        if sandbox.restricts() {
            check_sandboxable(&req, sandbox, &cwd)?;
        }
        let max_memory_mib = memory_limit(req.max_memory_mib, self.limits.max_memory_mib)?;
        let (spec, launcher): (KernelSpec, Arc<dyn crate::kernel::KernelLauncher>) = match (
            &req.gateway,
            &req.connection_file,
        ) {
            (Some(name), _) => {
                let rest = sources::remote::find(&self.gateways, name)?;
                sources::remote::remote_spec(rest, &req, startup_timeout).await?
            }
            (None, Some(file)) => adopted_spec(&req, file, &cwd, startup_timeout)?,
            (None, None) if req.kernel_id.is_some() => {
                return Err(SessionError::InvalidArgument(
                    "kernel_id names a kernel on a gateway: give `gateway` too.".into(),
                ));
            }
            (None, _) if req.notebook_path.is_some() => {
                return Err(SessionError::InvalidArgument(
                        "notebook_path names a notebook open on a Jupyter Server: give `gateway` (that server's name) too.".into(),
                    ));
            }
            (None, None) => {
                let mut spec = self.resolve_spec(&req, &cwd).await?;
                if let Some(name) = &environment {
                    spec.display_name = format!("Python (environment {name})");
                }
                let opts = LaunchOptions {
                    cwd: cwd.clone(),
                    env: req.env.clone(),
                    env_prefix: self.env_prefix.clone(),
                    startup_timeout,
                    supervisor: self.supervisor.clone(),
                    max_memory_mib,
                    sandbox,
                };
                let local = LocalLauncher { spec, opts };
                (
                    local.spec.clone(),
                    self.pool.launcher_for(local, live, &self.limits),
                )
            }
        };
        let desc = SessionDesc {
            id: id.clone(),
            spec,
            cwd,
            launcher,
            journal_dir: self.journal_dir.clone(),
            kernel_id: req
                .jupyter_kernel_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        };
        let mut handle;
        let created_rx;
        {
            let mut sessions = lock(&self.sessions);
            if sessions.contains_key(&key) {
                return Err(SessionError::AlreadyExists(id));
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
            let after = req
                .expires_after
                .or(self.limits.default_expires_after_s.map(Duration::from_secs))
                .filter(|d| !d.is_zero());
            if after.is_some() {
                result = handle.renew(Some(after)).await;
            }
        }
        if result.is_ok()
            && let Some(notebook) = &req.notebook
            && let Err(e) = self.mirrors.start(&handle, notebook).await
        {
            result = Err(e);
        }
        if result.is_err() {
            // Nothing half-created remains: end the actor and forget the name — unless the name
            // was destroyed meanwhile and now belongs to a newer session.
            let _ = handle.destroy().await;
            let ours = lock(&self.sessions)
                .get(&key)
                .is_some_and(|h| h.same_session(&handle));
            if ours {
                self.forget(&key);
            }
        }
        result
    }

    /// The handle of session `id`. Errors: `SESSION_NOT_FOUND` naming the existing sessions.
    pub fn get(&self, id: &str) -> Result<SessionHandle, SessionError> {
        let found = lock(&self.sessions).get(id).cloned();
        if found.is_none()
            && let Some(e) = lock(&self.expired).check(id)
        {
            return Err(e);
        }
        found.ok_or_else(|| SessionError::NotFound {
            id: id.to_string(),
            known: self.known(),
            journal_checked: false,
        })
    }

    /// Session `id`, or — when `id` is `None` — the `default` session, created on first use.
    pub async fn get_or_default(&self, id: Option<&str>) -> Result<SessionHandle, SessionError> {
        match id {
            Some(id) => self.get(id),
            None => self.default_session(DEFAULT_SESSION).await,
        }
    }

    /// The `default` session filed under `key`, created on first use.
    pub async fn default_session(&self, key: &str) -> Result<SessionHandle, SessionError> {
        let _guard = self.default_lock.lock().await;
        if let Ok(h) = self.get(key) {
            return Ok(h);
        }
        let req = CreateRequest {
            session_id: Some(DEFAULT_SESSION.into()),
            ..Default::default()
        };
        self.create_keyed(key.to_string(), req).await?;
        self.get(key)
    }

    /// Every session's info, sorted by id (sessions under internal keys included).
    pub async fn list(&self) -> Vec<SessionInfo> {
        self.list_where(|_| true).await
    }

    /// The info of the sessions whose key passes `keep`, sorted by id.
    pub async fn list_where(&self, keep: impl Fn(&str) -> bool) -> Vec<SessionInfo> {
        let handles: Vec<SessionHandle> = lock(&self.sessions)
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(_, h)| h.clone())
            .collect();
        let mut out = Vec::new();
        for h in handles {
            if let Ok(info) = h.info().await {
                out.push(info);
            }
        }
        out.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        out
    }

    /// True when no session is live (the service's idle exit counts this).
    pub fn is_empty(&self) -> bool {
        lock(&self.sessions).is_empty()
    }

    /// Shut a session's kernel down and forget it.
    pub async fn destroy(&self, id: &str) -> Result<ShutdownRung, SessionError> {
        let handle = self.get(id)?;
        self.forget(id);
        let rung = handle.destroy().await;
        // Its runs' outputs are freed now; give the pages back (see `crate::memory`).
        crate::memory::release_freed();
        rung
    }

    /// The table of live sessions by key (for [`expiry`]).
    pub(super) fn sessions_table(&self) -> &Mutex<HashMap<String, SessionHandle>> {
        &self.sessions
    }

    pub(super) fn forget(&self, id: &str) {
        lock(&self.sessions).remove(id);
        self.forget_runs(id);
    }

    /// Forget the run ids of the session under key `id`.
    pub(super) fn forget_runs(&self, id: &str) {
        let mut runs = lock(&self.runs);
        runs.0.retain(|_, s| s != id);
        let (by_id, order) = &mut *runs;
        order.retain(|r| by_id.contains_key(r));
    }

    /// Queue a run in `handle`'s session; returns its id and a receiver of its status.
    pub async fn submit(
        &self,
        handle: &SessionHandle,
        req: ExecuteRequest,
    ) -> Result<Submitted, SessionError> {
        let submitted = handle.submit(req).await?;
        self.track(handle, &submitted.0);
        Ok(submitted)
    }

    /// [`Self::submit`], plus a receiver of the run's record once it settles (see
    /// [`Settled`]).
    pub async fn submit_settled(
        &self,
        handle: &SessionHandle,
        req: ExecuteRequest,
    ) -> Result<(Submitted, Settled), SessionError> {
        let (submitted, settled) = handle.submit_settled(req).await?;
        self.track(handle, &submitted.0);
        Ok((submitted, settled))
    }

    /// Remember which session holds `run_id`, for the calls that name only the run.
    fn track(&self, handle: &SessionHandle, run_id: &RunId) {
        let mut runs = lock(&self.runs);
        runs.0.insert(run_id.clone(), handle.key().to_string());
        runs.1.push_back(run_id.clone());
        // Sessions keep at most 256 finished runs each: the oldest ids are long forgotten.
        while runs.1.len() > MAX_TRACKED_RUNS {
            if let Some(old) = runs.1.pop_front() {
                runs.0.remove(&old);
            }
        }
    }

    /// The session holding run `run_id`. Errors: `EXECUTION_NOT_FOUND`.
    pub fn session_of_run(&self, run_id: &RunId) -> Result<SessionHandle, SessionError> {
        if let Some(helper) = self.fresh.live(run_id) {
            return Ok(helper);
        }
        let session = lock(&self.runs)
            .0
            .get(run_id)
            .cloned()
            .ok_or_else(|| SessionError::RunNotFound(run_id.to_string()))?;
        self.get(&session)
    }

    /// Destroy every session (server exit), in parallel, each bounded by its shutdown ladder.
    pub async fn shutdown_all(&self) {
        let mut handles: Vec<SessionHandle> =
            lock(&self.sessions).drain().map(|(_, h)| h).collect();
        handles.extend(self.fresh.drain_live());
        let all = handles.iter().map(|h| h.destroy());
        let pool = self.pool.shutdown(self.limits.shutdown_grace());
        let both = futures::future::join(futures::future::join_all(all), pool);
        let _ = tokio::time::timeout(Duration::from_secs(15), both).await;
    }
}

/// The memory limit a session gets (MiB): what it asks for, which may not be more than the
/// server's `ceiling` (`--max-memory-mib`) nor "none" (0) while there is a ceiling; without
/// one, anything. Errors: `INVALID_ARGUMENT` naming the ceiling.
pub fn memory_limit(asked: Option<u64>, ceiling: u64) -> Result<u64, SessionError> {
    match asked {
        None => Ok(ceiling),
        Some(n) if ceiling == 0 || (n > 0 && n <= ceiling) => Ok(n),
        Some(0) => Err(SessionError::InvalidArgument(format!(
            "max_memory_mib 0 (no limit) is not allowed: this server's ceiling is {ceiling} MiB (--max-memory-mib). Ask for at most {ceiling}, or leave max_memory_mib out to get it."
        ))),
        Some(n) => Err(SessionError::InvalidArgument(format!(
            "max_memory_mib {n} is above this server's ceiling of {ceiling} MiB (--max-memory-mib). Ask for at most {ceiling}, or leave max_memory_mib out to get it."
        ))),
    }
}

/// A sandboxed session must start a local kernel (kernel-mcp cannot confine a kernel it
/// did not start) in a cwd other than `/`. Errors: `SANDBOX_UNAVAILABLE`, `INVALID_ARGUMENT`.
fn check_sandboxable(
    req: &CreateRequest,
    sandbox: crate::kernel::Sandbox,
    cwd: &std::path::Path,
) -> Result<(), SessionError> {
    let elsewhere = match (&req.gateway, &req.connection_file) {
        (Some(g), _) => Some(format!(
            "the kernels of gateway '{g}' run where that server puts them"
        )),
        (None, Some(_)) => Some("an adopted kernel was started by someone else".to_string()),
        _ => None,
    };
    if let Some(why) = elsewhere {
        return Err(SessionError::SandboxUnavailable(
            crate::kernel::SandboxUnavailable {
                sandbox,
                missing: vec![format!(
                    "kernel-mcp sandboxes only the kernels it starts, and {why}"
                )],
            },
        ));
    }
    if cwd == std::path::Path::new("/") {
        return Err(SessionError::InvalidArgument(
            "A sandboxed session cannot have / as its cwd (the sandbox would be the whole filesystem): give a project directory as cwd.".into(),
        ));
    }
    Ok(())
}

/// True for a registry key no session id can be (it holds a `#`): a connection's own
/// `default` session.
pub fn is_internal_key(key: &str) -> bool {
    key.contains('#')
}

/// 1–64 characters from `[A-Za-z0-9._-]`.
fn validate_session_id(id: &str) -> Result<(), SessionError> {
    if crate::session::ids::is_valid_name(id) {
        Ok(())
    } else {
        Err(SessionError::InvalidArgument(format!(
            "Invalid session_id '{id}': use 1-64 characters from letters, digits, '.', '_' and '-'."
        )))
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
