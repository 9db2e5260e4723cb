//! Where an authorization-code credential lives (docs/broker.md "Where credentials live"): one
//! JSON file per server, mode 0600, in a private directory (0700, owned by the user), by
//! default `$XDG_STATE_HOME/kernel-mcp/broker-oauth/` (else `~/.local/state/kernel-mcp/…`),
//! which sandboxed kernels cannot reach. A symbolic link at the file's path, a directory that
//! is a link, or a file or directory that others can read is refused, never followed or used:
//! files are opened with `O_NOFOLLOW`, written to a new 0600 file (`O_EXCL`) and renamed over
//! the old one. A lock file beside it (`flock`) keeps two processes from refreshing at once
//! (a refresh token may be good for one use only).
//!
//! [`FileStore`] is rmcp's [`CredentialStore`] over that file; [`FileStore::readiness`] says,
//! without the network, whether a credential is there and usable (for `mcp.explain`).

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// Largest credential file read (bytes).
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The default directory of credential files (not created here).
pub fn default_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(x) if x.is_absolute() => x,
        _ => {
            PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".local/state")
        }
    };
    Some(base.join("kernel-mcp").join("broker-oauth"))
}

/// The default credential file of `server` at `url`: its name made safe for a file name, and
/// a digest of the URL (a server of the same name elsewhere gets another file).
pub fn default_file(server: &str, url: &str) -> Option<PathBuf> {
    use sha2::Digest;
    let safe: String = server
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = hex::encode(sha2::Sha256::digest(url.as_bytes()));
    Some(default_dir()?.join(format!("{safe}-{}.json", &digest[..12])))
}

/// Why a credential file cannot be used. No variant carries a token.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{0} is a symbolic link; OAuth credentials are kept only in a regular file (remove the link, or point oauth.credentialFile elsewhere)"
    )]
    Symlink(PathBuf),
    #[error(
        "{path} can be read or written by other users (mode {mode:o}); run `chmod {want} {path}`"
    )]
    NotPrivate {
        path: PathBuf,
        mode: u32,
        want: &'static str,
    },
    #[error("{0} belongs to another user; OAuth credentials are kept only in the user's own files")]
    NotOwned(PathBuf),
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
    #[error("{0} is not a credential kernel-mcp wrote (or it is damaged)")]
    Damaged(PathBuf),
}

impl From<StoreError> for AuthError {
    fn from(e: StoreError) -> AuthError {
        AuthError::CredentialStoreError(e.to_string())
    }
}

/// What the file holds: rmcp's credentials and the resource they were issued for.
#[derive(Serialize, Deserialize)]
struct OnDisk {
    /// The server URL (the resource indicator) the credential is for.
    resource: String,
    credentials: StoredCredentials,
}

/// Whether a credential is ready, as `explain` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not there, expired without a refresh token, or made for another URL.
    NotReady(String),
    /// There, but refused (a link, not private, damaged).
    Refused(String),
}

/// One credential file, for the server at `resource`.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
    resource: String,
}

fn io(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl FileStore {
    pub fn new(path: PathBuf, resource: &str) -> FileStore {
        FileStore {
            path,
            resource: resource.to_string(),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }

    /// Create the directory (0700, parents too) if missing; refuse one that is a link, someone
    /// else's, or open to others.
    fn ensure_dir(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.dir();
        if std::fs::symlink_metadata(dir).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| io(dir, e))?;
        }
        let meta = std::fs::symlink_metadata(dir).map_err(|e| io(dir, e))?;
        if meta.file_type().is_symlink() {
            return Err(StoreError::Symlink(dir.to_path_buf()));
        }
        private(dir, &meta, "700")
    }

    /// Whether a credential can be written here (before a person signs in for nothing): the
    /// directory is made or accepted, and the path is not a link.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        self.ensure_dir()?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_symlink() => Err(StoreError::Symlink(self.path.clone())),
            _ => Ok(()),
        }
    }

    /// The credentials, `None` when there is no file. Errors: a link, not private, damaged,
    /// unreadable.
    pub fn read(&self) -> Result<Option<StoredCredentials>, StoreError> {
        Ok(self
            .read_on_disk()?
            .and_then(|d| (d.resource == self.resource).then_some(d.credentials)))
    }

    fn read_on_disk(&self) -> Result<Option<OnDisk>, StoreError> {
        let path = &self.path;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(path);
        let file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
                return Err(StoreError::Symlink(path.clone()));
            }
            Err(e) => return Err(io(path, e)),
        };
        let meta = file.metadata().map_err(|e| io(path, e))?;
        if !meta.is_file() {
            return Err(StoreError::Damaged(path.clone()));
        }
        private(path, &meta, "600")?;
        let mut text = Vec::new();
        file.take(MAX_FILE_BYTES)
            .read_to_end(&mut text)
            .map_err(|e| io(path, e))?;
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|_| StoreError::Damaged(path.clone()))
    }

    /// Write `credentials` (a new 0600 file renamed over the old one). Errors: the directory or
    /// the path is refused, or the write failed.
    pub fn write(&self, credentials: StoredCredentials) -> Result<(), StoreError> {
        self.ensure_dir()?;
        let path = &self.path;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::Symlink(path.clone()));
        }
        let body = serde_json::to_vec(&OnDisk {
            resource: self.resource.clone(),
            credentials,
        })
        .map_err(|_| StoreError::Damaged(path.clone()))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = self
            .dir()
            .join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(&body)?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(path, e));
        }
        Ok(())
    }

    /// Remove the file (a missing one is fine; a link is removed, not followed).
    pub fn remove(&self) -> Result<(), StoreError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&self.path, e)),
            _ => Ok(()),
        }
    }

    /// Whether a usable credential is there, now (no network: an access token that expired
    /// with a refresh token beside it is ready, since the broker refreshes it).
    pub fn readiness(&self) -> Readiness {
        let on_disk = match self.read_on_disk() {
            Ok(Some(d)) => d,
            Ok(None) => return Readiness::NotReady("no credential yet".into()),
            Err(e) => return Readiness::Refused(e.to_string()),
        };
        if on_disk.resource != self.resource {
            return Readiness::NotReady(format!(
                "the credential was made for {}, not this server's url",
                on_disk.resource
            ));
        }
        use oauth2::TokenResponse;
        let c = on_disk.credentials;
        let Some(t) = c.token_response.as_ref() else {
            return Readiness::NotReady("no token in the credential".into());
        };
        if t.refresh_token().is_some() {
            return Readiness::Ready;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match (t.expires_in(), c.token_received_at) {
            (Some(ttl), Some(at)) if at + ttl.as_secs() <= now => {
                Readiness::NotReady("the access token expired and there is no refresh token".into())
            }
            _ => Readiness::Ready,
        }
    }

    /// Hold the lock beside the file until the guard is dropped.
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, StoreError> {
        self.ensure_dir()?;
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        let lock = self.dir().join(format!(".{name}.lock"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&lock)
            .map_err(|e| io(&lock, e))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| io(&lock, e.into()))
    }
}

/// Refuse `meta` of `path` unless it is the user's and closed to others.
fn private(path: &Path, meta: &std::fs::Metadata, want: &'static str) -> Result<(), StoreError> {
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(StoreError::NotOwned(path.to_path_buf()));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(StoreError::NotPrivate {
            path: path.to_path_buf(),
            mode,
            want,
        });
    }
    Ok(())
}

/// Run `f` on the blocking pool (file work never blocks the runtime).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, AuthError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(AuthError::from),
        Err(e) => Err(AuthError::CredentialStoreError(e.to_string())),
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let s = self.clone();
        blocking(move || s.read()).await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let s = self.clone();
        blocking(move || s.write(credentials)).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let s = self.clone();
        blocking(move || s.remove()).await
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let s = self.clone();
        let lock = blocking(move || s.lock()).await?;
        Ok(Some(CredentialRefreshGuard::new(lock)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> StoredCredentials {
        StoredCredentials::new("client".into(), None, vec![], None)
    }

    #[test]
    fn the_file_is_0600_in_a_0700_dir_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FileStore::new(tmp.path().join("d/s.json"), "http://x/mcp");
        store.write(creds()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(store.path()), 0o600);
        assert_eq!(mode(&tmp.path().join("d")), 0o700);
        assert_eq!(store.read().unwrap().unwrap().client_id, "client");
        // Made for another URL: not this server's.
        let other = FileStore::new(store.path().to_path_buf(), "http://y/mcp");
        assert!(other.read().unwrap().is_none());
        assert!(matches!(other.readiness(), Readiness::NotReady(_)));
    }

    #[test]
    fn a_symlink_or_an_open_file_is_refused_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        let real = FileStore::new(dir.join("real.json"), "u");
        real.write(creds()).unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(real.path(), &link).unwrap();
        let linked = FileStore::new(link.clone(), "u");
        assert!(matches!(linked.read(), Err(StoreError::Symlink(_))));
        assert!(matches!(linked.write(creds()), Err(StoreError::Symlink(_))));
        assert!(matches!(linked.readiness(), Readiness::Refused(_)));
        std::fs::set_permissions(real.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = real.read().unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = real.write(creds()).unwrap_err().to_string();
        assert!(e.contains("chmod 700"), "{e}");
    }
}
