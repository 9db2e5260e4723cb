//! Where the per-user service lives on disk: its socket, the files next to it (locks, the
//! HTTP face's token and record) and its log under the state directory. The socket's
//! directory must be ours and not writable by others ([`crate::trust::check_dir`]), because
//! whoever controls it can listen in the service's place. A missing directory is created 0700;
//! an existing one is used as it is or refused with the reason, never re-moded.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::trust::{self, TrustError};

/// File name of the socket inside its directory.
const SOCKET_NAME: &str = "service.sock";

/// The default socket: `$XDG_RUNTIME_DIR/kernel-mcp/service.sock`, else
/// `${TMPDIR:-/tmp}/kernel-mcp-<uid>/service.sock`.
pub fn default_socket() -> PathBuf {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match runtime {
        Some(dir) => dir.join("kernel-mcp").join(SOCKET_NAME),
        None => {
            let tmp = std::env::var_os("TMPDIR")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| PathBuf::from("/tmp"));
            tmp.join(format!("kernel-mcp-{}", nix::unistd::getuid()))
                .join(SOCKET_NAME)
        }
    }
}

/// Why the socket's directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("cannot create the socket directory {dir}: {source}")]
    Create {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing the socket directory: {0}")]
    Untrusted(#[from] TrustError),
}

/// What the service could not do to one of its files, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {path}: {source}")]
pub struct FileError {
    /// What it tried, as a verb phrase ("open", "write our pid into").
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl FileError {
    /// The error of `action` on `path`, made from the I/O error (for `map_err`).
    pub fn of(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
        let path = path.to_path_buf();
        move |source| FileError {
            action,
            path,
            source,
        }
    }
}

/// The files that belong to one socket path.
#[derive(Debug, Clone)]
pub struct ServicePaths {
    /// The Unix socket clients connect to.
    pub socket: PathBuf,
    /// Held (flock, exclusive) by the running service for its whole life; holds its pid.
    pub alive_lock: PathBuf,
    /// Held by a relay while it checks for a service and starts one, so that relays started
    /// together start one service.
    pub start_lock: PathBuf,
    /// The token the service generated for its HTTP face (0600), when none was given.
    pub token_file: PathBuf,
    /// While the HTTP face is up: where it listens and where its token is (JSON, 0600).
    pub http_record: PathBuf,
    /// The service's own floors (sandbox, memory ceiling), for `doctor` (JSON, 0600).
    pub floors_record: PathBuf,
}

impl ServicePaths {
    /// The paths for `socket` (its other files sit beside it: `<socket>.lock`,
    /// `<socket>.start`, `<socket>.token`, `<socket>.http`, `<socket>.floors`).
    pub fn new(socket: PathBuf) -> ServicePaths {
        let with = |suffix: &str| {
            let mut s = socket.clone().into_os_string();
            s.push(suffix);
            PathBuf::from(s)
        };
        ServicePaths {
            alive_lock: with(".lock"),
            start_lock: with(".start"),
            token_file: with(".token"),
            http_record: with(".http"),
            floors_record: with(".floors"),
            socket,
        }
    }

    /// The socket's directory (`.` for a bare file name).
    pub fn dir(&self) -> &Path {
        match self.socket.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        }
    }

    /// Check the socket's directory before trusting anything in it (see the module docs).
    /// `Ok(false)`: it does not exist yet (so no service listens there).
    /// Errors: [`TrustError`] saying what is wrong and the fix.
    pub fn check_dir(&self) -> Result<bool, TrustError> {
        self.check_dir_of(trust::our_uid())
    }

    /// [`Self::check_dir`] for a service run by `uid` (a client's check, see
    /// [`trust::service_uid`]).
    pub fn check_dir_of(&self, uid: u32) -> Result<bool, TrustError> {
        match trust::check_dir_owned(self.dir(), uid) {
            Ok(()) => Ok(true),
            Err(e) if e.is_missing() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Create the socket's directory (0700, with any missing parents) if missing, and check
    /// it. Errors: [`DirError`] naming the directory and what is wrong with it.
    pub fn prepare_dir(&self) -> Result<(), DirError> {
        if !self.check_dir()? {
            let dir = self.dir();
            // A directory someone else made in the meantime fails the check below.
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| DirError::Create {
                    dir: dir.to_path_buf(),
                    source,
                })?;
            trust::check_dir(dir)?;
        }
        Ok(())
    }

    /// The pid in the alive lock, when that process still runs (so a service is up).
    pub fn running_pid(&self) -> Option<i32> {
        let pid: i32 = fs::read_to_string(&self.alive_lock)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let alive =
            pid > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        alive.then_some(pid)
    }
}

/// The state directory: `$XDG_STATE_HOME/kernel-mcp` (absolute values only, as the XDG spec
/// says), else `$HOME/.local/state/kernel-mcp`. `None` when neither is set.
pub fn state_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = match xdg {
        Some(x) => x,
        None => {
            Path::new(&std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".local/state")
        }
    };
    Some(base.join("kernel-mcp"))
}

/// The service's log file, `<state dir>/service.log`.
pub fn log_file() -> Option<PathBuf> {
    state_dir().map(|d| d.join("service.log"))
}

/// Open (creating it 0600, never truncating) the lock file at `path`, for reading and
/// writing: what its holder wrote (a pid) stays readable to the next taker.
pub fn open_lock_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_services_files_sit_beside_the_socket() {
        let p = ServicePaths::new(PathBuf::from("/run/u/kernel-mcp/service.sock"));
        assert_eq!(
            p.alive_lock,
            Path::new("/run/u/kernel-mcp/service.sock.lock")
        );
        assert_eq!(
            p.start_lock,
            Path::new("/run/u/kernel-mcp/service.sock.start")
        );
        assert_eq!(
            p.token_file,
            Path::new("/run/u/kernel-mcp/service.sock.token")
        );
        assert_eq!(p.dir(), Path::new("/run/u/kernel-mcp"));
        assert_eq!(ServicePaths::new("x.sock".into()).dir(), Path::new("."));
    }

    #[test]
    fn an_existing_directory_open_to_others_is_refused_and_keeps_its_mode() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("svc");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = ServicePaths::new(dir.join("service.sock"))
            .prepare_dir()
            .expect_err("refused")
            .to_string();
        assert!(err.contains("writable by other users"), "{err}");
        assert_eq!(fs::metadata(&dir).expect("meta").mode() & 0o7777, 0o777);
    }

    #[test]
    fn a_missing_directory_is_created_private() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("a/b");
        ServicePaths::new(dir.join("service.sock"))
            .prepare_dir()
            .expect("prepared");
        assert_eq!(fs::metadata(&dir).expect("meta").mode() & 0o777, 0o700);
    }

    #[test]
    fn a_symlinked_socket_directory_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let real = tmp.path().join("real");
        fs::create_dir(&real).expect("mkdir");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let err = ServicePaths::new(link.join("service.sock"))
            .prepare_dir()
            .expect_err("a symlink must be refused")
            .to_string();
        assert!(err.contains("not a directory"), "{err}");
    }
}
