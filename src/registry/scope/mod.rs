//! Who owns which session: the registry as one MCP connection sees it.
//!
//! Named sessions belong to the process and every connection sees them. The implicit
//! `default` session is different in the per-user service: each connection gets its own,
//! filed in the registry under a key no client can type (`default#<n>`), shown to its
//! connection as `default`, invisible to the others, and destroyed when the connection ends.
//! A standalone server has one client, so its view is unscoped and `default` is simply the
//! session named `default`, as it always was.
//!
//! [`RegistryView`] dereferences to the [`Registry`] and shadows exactly the calls that take
//! a session id from the client, so the tools read `self.registry.get(id)` either way.

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ops::export::ExportFormat;
use crate::ops::{Exported, HistorySource};
use crate::registry::{CreateRequest, DEFAULT_SESSION, Registry, is_internal_key};
use crate::session::{SessionError, SessionHandle, SessionInfo};

/// Numbers the connections of this process (the `<n>` of `default#<n>`).
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// One connection's `default` session key; dropping the last clone of the view destroys that
/// session (the fallback for transports that end without telling us, such as HTTP sessions).
struct Owner {
    key: String,
    registry: Arc<Registry>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if self.registry.get(&self.key).is_err() {
            return;
        }
        let (registry, key) = (self.registry.clone(), self.key.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = registry.destroy(&key).await;
            });
        }
    }
}

/// The registry seen by one MCP connection.
#[derive(Clone)]
pub struct RegistryView {
    registry: Arc<Registry>,
    /// `None`: unscoped (standalone); `default` is the session named `default`.
    owner: Option<Arc<Owner>>,
}

impl Deref for RegistryView {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.registry
    }
}

impl RegistryView {
    /// The whole registry, `default` included: a standalone server's only client.
    pub fn unscoped(registry: Arc<Registry>) -> RegistryView {
        RegistryView {
            registry,
            owner: None,
        }
    }

    /// A new connection of the service, with a `default` session of its own.
    pub fn connection(registry: Arc<Registry>) -> RegistryView {
        let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1;
        RegistryView {
            owner: Some(Arc::new(Owner {
                key: format!("{DEFAULT_SESSION}#{n}"),
                registry: registry.clone(),
            })),
            registry,
        }
    }

    /// The registry key for the id a client gave.
    fn key<'a>(&'a self, id: &'a str) -> &'a str {
        match &self.owner {
            Some(o) if id == DEFAULT_SESSION => &o.key,
            _ => id,
        }
    }

    /// Say `default`, never the internal key, in errors shown to this connection.
    fn unkey(&self, e: SessionError) -> SessionError {
        match e {
            SessionError::NotFound {
                id,
                mut known,
                journal_checked,
            } => {
                let id = if is_internal_key(&id) {
                    DEFAULT_SESSION.to_string()
                } else {
                    id
                };
                if let Some(o) = &self.owner
                    && self.registry.get(&o.key).is_ok()
                {
                    known.push(DEFAULT_SESSION.into());
                    known.sort();
                }
                SessionError::NotFound {
                    id,
                    known,
                    journal_checked,
                }
            }
            other => other,
        }
    }

    /// Session `id` as this connection names it. Errors: `SESSION_NOT_FOUND`.
    pub fn get(&self, id: &str) -> Result<SessionHandle, SessionError> {
        self.registry.get(self.key(id)).map_err(|e| self.unkey(e))
    }

    /// Session `id`, or this connection's `default` session (created on first use).
    pub async fn get_or_default(&self, id: Option<&str>) -> Result<SessionHandle, SessionError> {
        match (id, &self.owner) {
            (Some(id), _) => self.get(id),
            (None, Some(o)) => self.registry.default_session(&o.key).await,
            (None, None) => self.registry.get_or_default(None).await,
        }
    }

    /// Create a session; `session_id: "default"` makes this connection's own.
    pub async fn create(&self, req: CreateRequest) -> Result<SessionInfo, SessionError> {
        match (&self.owner, req.session_id.as_deref()) {
            (Some(o), Some(DEFAULT_SESSION)) => {
                self.registry.create_keyed(o.key.clone(), req).await
            }
            _ => self.registry.create(req).await,
        }
    }

    /// The sessions this connection sees: every named one and its own `default`.
    pub async fn list(&self) -> Vec<SessionInfo> {
        let own = self.owner.as_ref().map(|o| o.key.clone());
        self.registry
            .list_where(|k| !is_internal_key(k) || Some(k) == own.as_deref())
            .await
    }

    /// The ids this connection sees, sorted.
    pub fn session_ids(&self) -> Vec<String> {
        let mut ids = self.registry.session_ids();
        if let Some(o) = &self.owner
            && self.registry.get(&o.key).is_ok()
        {
            ids.push(DEFAULT_SESSION.into());
            ids.sort();
        }
        ids
    }

    /// Destroy session `id` as this connection names it.
    pub async fn destroy(&self, id: &str) -> Result<crate::kernel::ShutdownRung, SessionError> {
        self.registry
            .destroy(self.key(id))
            .await
            .map_err(|e| self.unkey(e))
    }

    /// History of session `id` (live or journalled) as this connection names it.
    pub async fn history_source(
        &self,
        id: &str,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<HistorySource, SessionError> {
        if self.key(id) != id && self.registry.get(self.key(id)).is_err() {
            // Its own default session has ended: read the `default` journal.
            return self.registry.history_source(id, start, end).await;
        }
        self.registry
            .history_source(self.key(id), start, end)
            .await
            .map_err(|e| self.unkey(e))
    }

    /// Export the history of session `id` as this connection names it.
    pub async fn export(
        &self,
        id: &str,
        path: &Path,
        format: ExportFormat,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<Exported, SessionError> {
        let key = if self.registry.get(self.key(id)).is_ok() {
            self.key(id)
        } else {
            id
        };
        self.registry
            .export(key, path, format, start, end)
            .await
            .map_err(|e| self.unkey(e))
    }

    /// End this connection's `default` session, if it has one (the connection closed).
    pub async fn close(&self) {
        if let Some(o) = &self.owner
            && self.registry.get(&o.key).is_ok()
        {
            let _ = self.registry.destroy(&o.key).await;
        }
    }
}
