//! The Jupyter face's one door into the registry. The face is a client of the registry like
//! an MCP connection: it sees the named sessions (never another connection's `default`) and
//! acts on them only through the calls below, so that re-pointing the face at a new registry
//! API means changing this file alone.
//!
//! Registry calls made here, and nowhere else in `jupyter/`:
//! - [`RegistryView::connection`] once, for the face's own view (it never makes a `default`);
//! - `view.list()` — every session's [`SessionInfo`] (named ones, and the face's own
//!   `default`, which never exists);
//! - `view.get(session_id)` — the [`SessionHandle`] of a named session;
//! - `view.create(CreateRequest)` — `POST /api/kernels`;
//! - `view.destroy(session_id)` — `DELETE /api/kernels/{id}`;
//! - `registry.search.list()` / `registry.default_kernel()` — `/api/kernelspecs`;
//! - `registry.gateways` — the gateway a remote session's kernel lives on, for the relay's
//!   own websocket to it.
//!
//! On a handle: `info()`, `history(None, None)` (is an agent's run in it?),
//! `interrupt_kernel()`, `restart(false)`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::kernel::KernelSpec;
use crate::kernel::remote::Rest;
use crate::registry::scope::RegistryView;
use crate::registry::{CreateRequest, Registry};
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
    view: RegistryView,
}

impl Sessions {
    /// The face's view of `registry`.
    pub fn new(registry: Arc<Registry>) -> Sessions {
        Sessions {
            view: RegistryView::connection(registry),
        }
    }

    /// Every session the face may show, sorted by session id.
    pub async fn list(&self) -> Vec<SessionInfo> {
        self.view.list().await
    }

    /// The session whose kernel is `kernel_id`, if any.
    pub async fn by_kernel(&self, kernel_id: &str) -> Option<Found> {
        let info = self
            .list()
            .await
            .into_iter()
            .find(|i| i.kernel_id.as_deref() == Some(kernel_id))?;
        let handle = self.view.get(&info.session_id).ok()?;
        Some(Found { handle, info })
    }

    /// The handle of session `session_id` (the same one the face listed).
    /// Errors: `SESSION_NOT_FOUND`.
    pub fn get(&self, session_id: &str) -> Result<SessionHandle, SessionError> {
        self.view.get(session_id)
    }

    /// Start a session for `POST /api/kernels`.
    /// Errors: as `create_session` (`SESSION_ALREADY_EXISTS`, `KERNEL_NOT_FOUND`, …).
    pub async fn start(&self, req: StartKernel) -> Result<SessionInfo, SessionError> {
        let session_id = req.session_id.unwrap_or_else(|| req.kernel_id.clone());
        self.view
            .create(CreateRequest {
                session_id: Some(session_id),
                kernel: req.kernel,
                cwd: req.cwd,
                env: req.env,
                jupyter_kernel_id: Some(req.kernel_id),
                ..Default::default()
            })
            .await
    }

    /// Shut session `session_id` down (kernel and all).
    /// Errors: `SESSION_NOT_FOUND`.
    pub async fn destroy(&self, session_id: &str) -> Result<(), SessionError> {
        self.view.destroy(session_id).await.map(|_| ())
    }

    /// True when a run of an MCP client is queued, running or in the session's history
    /// (as opposed to only other clients' cells).
    pub async fn used_by_agents(&self, found: &Found) -> bool {
        if found.info.current_run_id.is_some() || found.info.queue_length > 0 {
            return true;
        }
        match found.handle.history(None, None).await {
            Ok((entries, _)) => entries.iter().any(|(_, e)| !e.other_client),
            Err(_) => true,
        }
    }

    /// The local kernelspecs, and the default one's name.
    pub fn kernelspecs(&self) -> (Vec<KernelSpec>, Option<String>) {
        (self.view.search.list(), self.view.default_kernel())
    }

    /// The configured gateway named `name` (a remote session's `location`).
    pub fn gateway(&self, name: &str) -> Option<Rest> {
        self.view
            .gateways
            .iter()
            .find(|r| r.gateway().name == name)
            .cloned()
    }
}
