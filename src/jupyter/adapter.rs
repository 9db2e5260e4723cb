//! The Jupyter face's one door into the registry. The face is a client of the registry like
//! an MCP connection: it sees the named sessions (never another connection's `default`) and
//! acts on them only through the calls below, so that re-pointing the face at a new registry
//! API means changing this file alone.
//!
//! What the face sees: it has a connection's [`Scope`] of its own (the face never makes a
//! `default`, and may not name one), seen per request as the request's principal
//! ([`Sessions::of`]), so `/api/kernels` lists that principal's **named** sessions — the ones
//! it reaches by name over `/mcp` too (an admin: every principal's) — and never an MCP
//! connection's own `default`, which is private to that connection (docs/jupyter.md, "Which
//! sessions the API shows").
//!
//! Registry calls made here, and nowhere else in `jupyter/`:
//! - [`Scope::connection`] once, for the face's own view;
//! - `registry.list(viewer)` — every session the face sees;
//! - `registry.get(key)` — the [`SessionHandle`] of a named session;
//! - `registry.create(key, source, options)` — `POST /api/kernels`;
//! - `registry.destroy(key)` — `DELETE /api/kernels/{id}`;
//! - `sources().search` / `sources().default_kernel()` — `/api/kernelspecs`;
//! - `sources().gateways` — the gateway a remote session's kernel lives on, for the relay's
//!   own websocket to it.
//!
//! On a handle, as commands (`session::cmd`): `Info`, `UsedByAgents` (has an agent worked in
//! it?), `InterruptKernel`, `Restart`, `NoteClient`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::kernel::KernelSpec;
use crate::kernel::remote::Rest;
use crate::principal::Authenticated;
use crate::registry::scope::Scope;
use crate::registry::scope::key::DEFAULT_SESSION;
use crate::registry::{KernelSource, Registry, SessionOptions};
use crate::session::cmd;
use crate::session::{SessionError, SessionHandle, SessionInfo};

/// A session as the face finds it: its handle and what it said about itself.
pub struct Found {
    pub handle: SessionHandle,
    pub info: SessionInfo,
}

/// What `POST /api/kernels` asks for.
#[derive(Debug, Clone, Default)]
pub struct StartKernel {
    /// The session's name (`None`: named after the kernel id).
    pub session_id: Option<String>,
    /// The kernelspec (`None`: the default).
    pub kernel: Option<String>,
    /// The kernel's working directory (`None`: the server's).
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    /// The kernel id to give it.
    pub kernel_id: String,
}

/// The registry as the Jupyter face sees it.
#[derive(Clone)]
pub struct Sessions {
    scope: Scope,
}

impl Sessions {
    /// The face's view of `registry`.
    pub fn new(registry: Arc<Registry>) -> Sessions {
        Sessions {
            scope: Scope::connection(registry),
        }
    }

    /// The face as the principal of one request sees it: its own sessions, and
    /// an admin every principal's; a session started through it is that principal's.
    /// `None` (no face stamped the request) is the owner.
    pub fn of(&self, who: Option<&Authenticated>) -> Sessions {
        let who = who.cloned().unwrap_or_else(Authenticated::owner);
        Sessions {
            scope: self.scope.for_request(who, true),
        }
    }

    /// Every session the face may show (the named ones), sorted by session id.
    pub async fn list(&self) -> Vec<SessionInfo> {
        self.scope.registry().list(&self.scope.viewer()).await
    }

    /// The session whose kernel is `kernel_id`, if any.
    pub async fn by_kernel(&self, kernel_id: &str) -> Option<Found> {
        let info = self
            .list()
            .await
            .into_iter()
            .find(|i| i.kernel_id.as_deref() == Some(kernel_id))?;
        let handle = self.get(&info.session_id).ok()?;
        Some(Found { handle, info })
    }

    /// The handle of session `session_id` (the same one the face listed).
    /// Errors: `SESSION_NOT_FOUND`, `SESSION_EXPIRED`.
    pub fn get(&self, session_id: &str) -> Result<SessionHandle, SessionError> {
        self.scope.registry().get(&self.scope.key(session_id))
    }

    /// Start a session for `POST /api/kernels`.
    /// Errors: `INVALID_ARGUMENT` (a bad name, or `default`, which is each MCP connection's
    /// own), and those of `create_session` (`SESSION_ALREADY_EXISTS`, `KERNEL_NOT_FOUND`, …).
    pub async fn start(&self, req: StartKernel) -> Result<SessionInfo, SessionError> {
        let session_id = req.session_id.unwrap_or_else(|| req.kernel_id.clone());
        if session_id == DEFAULT_SESSION {
            return Err(SessionError::InvalidArgument(
                "'default' is each MCP connection's own session, which no one else reaches; name the session otherwise in metadata.session_id.".into(),
            ));
        }
        if !crate::session::ids::is_valid_name(&session_id) {
            return Err(SessionError::InvalidArgument(format!(
                "Invalid session name '{session_id}' in metadata.session_id: use 1-64 characters from letters, digits, '.', '_' and '-'."
            )));
        }
        let source = match req.kernel {
            Some(name) => KernelSource::Kernelspec(name),
            None => KernelSource::Default,
        };
        let options = SessionOptions {
            cwd: req.cwd,
            env: req.env,
            jupyter_kernel_id: Some(req.kernel_id),
            ..Default::default()
        };
        self.scope
            .registry()
            .create(&self.scope.key(&session_id), source, options)
            .await
    }

    /// Shut session `session_id` down (kernel and all).
    /// Errors: `SESSION_NOT_FOUND`.
    pub async fn destroy(&self, session_id: &str) -> Result<(), SessionError> {
        self.scope
            .registry()
            .destroy(&self.scope.key(session_id))
            .await
            .map(|_| ())
    }

    /// True when an MCP client has worked in the session — run code (whether or not it left
    /// history: `store_history=false`), sent the kernel a request (`restore_session`,
    /// completion…), or has work queued or running — as opposed to only other clients'
    /// cells. Decided by the session's activity, not its history.
    pub async fn used_by_agents(&self, found: &Found) -> bool {
        if found.info.current_run_id.is_some() || found.info.queue_length > 0 {
            return true;
        }
        found.handle.call(cmd::UsedByAgents).await.unwrap_or(true)
    }

    /// The local kernelspecs, and the default one's name.
    pub fn kernelspecs(&self) -> (Vec<KernelSpec>, Option<String>) {
        let sources = self.scope.registry().sources();
        (sources.search.list(), sources.default_kernel())
    }

    /// The configured gateway named `name` (a remote session's `location`).
    pub fn gateway(&self, name: &str) -> Option<Rest> {
        self.scope.registry().sources().gateway(name).ok().cloned()
    }
}
