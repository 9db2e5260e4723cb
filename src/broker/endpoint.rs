//! A session's endpoint: the Unix socket its kernels reach the broker on, and the session's
//! side of the broker (journal, calls in flight, the kernels' endpoint files).
//!
//! The socket is `<runtime dir>/broker-<id>/mcp.sock`: the directory 0700, the socket 0600,
//! a connection accepted only from our own uid (SO_PEERCRED), and each request carries the
//! session's key (compared in constant time). One request per connection, one JSON line
//! each way (see [`super::ops`] for the operations). The kernel learns the socket and key
//! from its endpoint file, written 0600 when the kernel is ready ([`SessionObserver`]), so a
//! pooled kernel that was started before the session gets them when the session takes it.
//! A sandboxed kernel, which may not open a Unix socket, reaches the same connections
//! through the dialer it inherited ([`super::dialer`]), taken when the kernel is ready.
//!
//! The endpoint is the session's observer; it ends when the session does (the actor and its
//! handles drop it): the listener and open connections stop, the socket, its directory and
//! the endpoint files go, and its hold on the project ends.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::conn::MAX_CONNECTIONS;
use super::dialer::Dialers;
use super::lock;
use super::project::Project;
use super::shared::SessionArtifacts;
use super::shared::Shared;
use crate::kernel::connection::{BROKER_DIR_PREFIX, BROKER_SOCKET};
use crate::session::observer::SessionObserver;

/// Endpoint files remembered per session (one per kernel it had; older ones are removed).
const MAX_BINDINGS: usize = 8;

/// A session's endpoint (see the module docs).
pub struct Endpoint {
    shared: Arc<Shared>,
    stop: CancellationToken,
    dir: PathBuf,
    /// Connections served at once, from the socket and the kernels' dialers together.
    slots: Arc<Semaphore>,
    /// Where the kernels' dialers wait ([`super::dialer`]), and the runtime serving them.
    dialers: Arc<Dialers>,
    runtime: tokio::runtime::Handle,
}

impl Endpoint {
    /// Bind the session's socket and start listening on `runtime`; its kernels reach
    /// `artifacts` through it. Errors: the runtime directory or the socket cannot be made.
    pub fn bind(
        session: &str,
        project: Arc<Project>,
        artifacts: SessionArtifacts,
        runtime: &tokio::runtime::Handle,
        dialers: Arc<Dialers>,
    ) -> std::io::Result<Endpoint> {
        let base = crate::kernel::connection::runtime_dir()?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = base.join(format!("{BROKER_DIR_PREFIX}{}", &id[..12]));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let socket = dir.join(BROKER_SOCKET);
        let listener = match std::os::unix::net::UnixListener::bind(&socket) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let key = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let shared = Arc::new(Shared {
            session: session.to_string(),
            key,
            socket,
            project,
            journal: Default::default(),
            cancel: Mutex::new(CancellationToken::new()),
            bindings: Default::default(),
            artifacts,
        });
        let stop = CancellationToken::new();
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        runtime.spawn(listen(
            listener,
            shared.clone(),
            slots.clone(),
            stop.clone(),
        ));
        tracing::debug!(session, socket = %shared.socket.display(), "broker endpoint");
        Ok(Endpoint {
            shared,
            stop,
            dir,
            slots,
            dialers,
            runtime: runtime.clone(),
        })
    }

    /// Write the endpoint file of the kernel with `connection_file` (0600, atomically).
    fn bind_kernel(&self, connection_file: &Path) -> std::io::Result<()> {
        let file = super::endpoint_file(connection_file);
        let dir = file.parent().unwrap_or(Path::new("/"));
        let body = serde_json::json!({
            "socket": self.shared.socket,
            "key": self.shared.key,
            "session": self.shared.session,
        });
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut tmp, body.to_string().as_bytes())?;
        tmp.persist(&file).map_err(|e| e.error)?;
        let mut bindings = lock(&self.shared.bindings);
        if !bindings.contains(&file) {
            bindings.push_back(file);
        }
        while bindings.len() > MAX_BINDINGS {
            if let Some(old) = bindings.pop_front() {
                let _ = std::fs::remove_file(old);
            }
        }
        Ok(())
    }
}

impl Endpoint {
    /// What the endpoint's calls share (a forward goes through it like a kernel's call).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

impl SessionObserver for Endpoint {
    fn kernel_ready(&self, connection_file: Option<&Path>) {
        let Some(cf) = connection_file else {
            return;
        };
        if let Err(e) = self.bind_kernel(cf) {
            tracing::warn!(session = %self.shared.session, "kernel endpoint file not written: {e}");
        }
        // A sandboxed kernel calls through the dialer it inherited.
        if let Some(dialer) = self.dialers.take(cf) {
            self.runtime.spawn(super::dialer::serve(
                dialer,
                self.shared.clone(),
                self.slots.clone(),
                self.stop.clone(),
            ));
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn run_cancelled(&self) {
        let old = std::mem::replace(&mut *lock(&self.shared.cancel), CancellationToken::new());
        old.cancel();
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.cancel();
        for f in lock(&self.shared.bindings).drain(..) {
            let _ = std::fs::remove_file(f);
        }
        let _ = std::fs::remove_file(&self.shared.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Remove the endpoint directories in `runtime_dir` that a server killed before it could
/// remove them left behind: a `broker-*` directory whose socket refuses connections (nobody
/// listens on it). A live server's socket accepts, and a directory whose socket is not bound
/// yet is left alone. Returns how many were removed.
pub fn remove_dead(runtime_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(runtime_dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_endpoint = entry
            .file_name()
            .to_string_lossy()
            .starts_with(BROKER_DIR_PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if is_endpoint && crate::kernel::connection::remove_if_dead(&dir, BROKER_SOCKET) {
            removed += 1;
        }
    }
    removed
}

/// Accept connections until `stop`; each is served by a task of its own.
async fn listen(
    listener: std::os::unix::net::UnixListener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    stop: CancellationToken,
) {
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(session = %shared.session, "broker endpoint cannot listen: {e}");
            return;
        }
    };
    let uid = nix::unistd::getuid().as_raw();
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        // The directory is 0700 and the socket 0600; the peer check is the last word.
        if stream.peer_cred().map(|c| c.uid()).ok() != Some(uid) {
            tracing::warn!(session = %shared.session, "broker endpoint: refused a connection from another uid");
            continue;
        }
        super::conn::accept(stream, &shared, &slots, &stop).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_dead_takes_only_broker_directories_nobody_listens_on() {
        let root = tempfile::tempdir().expect("tmp");
        let make = |name: &str| {
            let d = root.path().join(name);
            std::fs::create_dir(&d).expect("dir");
            d
        };
        let dead = make("broker-dead");
        drop(std::os::unix::net::UnixListener::bind(dead.join("mcp.sock")).expect("bind"));
        let live = make("broker-live");
        let _listener =
            std::os::unix::net::UnixListener::bind(live.join("mcp.sock")).expect("bind");
        // Made, its socket not bound yet (a session starting right now).
        let starting = make("broker-starting");
        let other = make("sandbox-x");
        drop(std::os::unix::net::UnixListener::bind(other.join("mcp.sock")).expect("bind"));

        assert_eq!(remove_dead(root.path()), 1);
        assert!(!dead.exists());
        assert!(live.join("mcp.sock").exists());
        assert!(starting.exists());
        assert!(other.exists());
    }
}
