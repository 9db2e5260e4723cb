//! Where the per-user service lives on disk: its socket, the lock files next to it, and its
//! log under the state directory. The socket's directory is private (0700, ours); a directory
//! that someone else owns, or that others can enter, is refused rather than used, because
//! whoever can reach the socket can run code as us.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
}

impl ServicePaths {
    /// The paths for `socket` (its lock files sit beside it: `<socket>.lock`, `<socket>.start`).
    pub fn new(socket: PathBuf) -> ServicePaths {
        let with = |suffix: &str| {
            let mut s = socket.clone().into_os_string();
            s.push(suffix);
            PathBuf::from(s)
        };
        ServicePaths {
            alive_lock: with(".lock"),
            start_lock: with(".start"),
            socket,
        }
    }

    /// Create the socket's directory (0700) if missing, and check that it is ours and private.
    /// Errors: a sentence naming the directory and what is wrong with it.
    pub fn prepare_dir(&self) -> Result<(), String> {
        let dir = self.socket.parent().filter(|d| !d.as_os_str().is_empty());
        let Some(dir) = dir else {
            return Ok(()); // A bare file name: the current directory, which the user chose.
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create the socket directory {}: {e}", dir.display()))?;
        let meta = fs::symlink_metadata(dir)
            .map_err(|e| format!("cannot inspect the socket directory {}: {e}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!(
                "the socket directory {} is not a directory (a symlink or a file); remove it or pass --socket elsewhere",
                dir.display()
            ));
        }
        let uid = nix::unistd::getuid().as_raw();
        if meta.uid() != uid {
            return Err(format!(
                "the socket directory {} belongs to uid {}, not to us (uid {uid}); pass --socket with a path in a directory of your own",
                dir.display(),
                meta.uid()
            ));
        }
        // A directory we created just now is 0700 already; an existing one of ours is
        // tightened, since its socket must not be reachable by anyone else.
        if meta.mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| {
                format!(
                    "the socket directory {} is open to others and cannot be made private: {e}",
                    dir.display()
                )
            })?;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_files_sit_beside_the_socket() {
        let p = ServicePaths::new(PathBuf::from("/run/u/kernel-mcp/service.sock"));
        assert_eq!(
            p.alive_lock,
            Path::new("/run/u/kernel-mcp/service.sock.lock")
        );
        assert_eq!(
            p.start_lock,
            Path::new("/run/u/kernel-mcp/service.sock.start")
        );
    }

    #[test]
    fn a_directory_open_to_others_is_made_private() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("svc");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        ServicePaths::new(dir.join("service.sock"))
            .prepare_dir()
            .expect("prepared");
        let mode = fs::metadata(&dir).expect("meta").mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_missing_directory_is_created_private() {
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
            .expect_err("a symlink must be refused");
        assert!(err.contains("not a directory"), "{err}");
    }
}
