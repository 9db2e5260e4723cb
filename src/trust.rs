//! Whether a directory, and the process at the other end of a Unix socket, may be trusted with
//! our code (docs/semantics.md, "The shared service").
//!
//! Whoever controls the directory of the service's socket can put a listener of their own at
//! its path; whoever listens there receives every line of code a client sends and can answer
//! with forged results. So both ends check before a byte is sent:
//! - [`check_dir`]: the directory is a real directory (not a symlink), owned by our uid, not
//!   writable by group or others; and no directory above it can be renamed or replaced by
//!   someone else (each is owned by root or us, and writable by others only when sticky, like
//!   `/tmp`).
//! - [`check_peer`]: the peer of a connected socket (`SO_PEERCRED`) runs as our uid.
//!
//! Nothing here changes a mode: a directory that fails is refused with the reason and the fix.
//! Creating a private directory is the caller's business (it knows which ones it made).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Mode bits that let group or others create, rename or delete entries.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// The sticky bit: in such a directory only an entry's owner may rename or delete it.
const STICKY: u32 = 0o1000;

/// Why a directory or a peer is not trusted. Each message names the path, what is wrong and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot inspect {path}: {source}")]
    Inspect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{dir} is not a directory (a symlink or a file); remove it, or pass --socket with a path in a directory of your own"
    )]
    NotADirectory { dir: PathBuf },
    #[error(
        "{dir} belongs to uid {owner}, not to us (uid {ours}): whoever owns it can listen in our place and read every line of code sent there. Remove it (`rm -r {dir}`, as its owner or root) or pass --socket with a path in a directory of your own"
    )]
    ForeignOwner { dir: PathBuf, owner: u32, ours: u32 },
    #[error(
        "{dir} is writable by other users (mode {mode:04o}): any of them could put their own socket there. Use a private directory (`--socket` in a directory with mode 0700), or `chmod go-w {dir}` if that is yours to change"
    )]
    OpenToOthers { dir: PathBuf, mode: u32 },
    #[error(
        "{ancestor}, above {dir}, {why}, so {dir} could be replaced by someone else; pass --socket with a path under a directory only you (or root) control"
    )]
    UnsafeAncestor {
        dir: PathBuf,
        ancestor: PathBuf,
        why: String,
    },
    #[error(
        "the process listening on {socket} runs as uid {peer}, not as us (uid {ours}): nothing was sent to it. Another user may have planted it; remove {socket} (as its owner or root), or pass --socket with a path in a directory of your own"
    )]
    ForeignPeer {
        socket: PathBuf,
        peer: u32,
        ours: u32,
    },
    #[error("cannot learn who listens on {socket} (SO_PEERCRED: {source}); nothing was sent")]
    PeerUnknown {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Our real uid.
pub fn our_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The uid a client trusts to run the service: ours, unless `KERNEL_MCP_SERVICE_UID` names
/// another (a service another user runs with `--allow-uid` for us; docs/auth.md).
pub fn service_uid() -> u32 {
    std::env::var("KERNEL_MCP_SERVICE_UID")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(our_uid)
}

/// Check that `dir` may hold a socket we trust (see the module docs).
///
/// # Errors
/// [`TrustError::Inspect`] when it (or an ancestor) cannot be examined — `NotFound` included,
/// which callers that create missing directories look for with [`TrustError::is_missing`];
/// otherwise the variant that says what is wrong.
pub fn check_dir(dir: &Path) -> Result<(), TrustError> {
    check_dir_owned(dir, our_uid())
}

/// [`check_dir`] for a directory that `owner` (not necessarily we) must own: a client's
/// check of the socket directory of a service run by [`service_uid`].
///
/// # Errors
/// As [`check_dir`].
pub fn check_dir_owned(dir: &Path, owner: u32) -> Result<(), TrustError> {
    let inspect = |path: &Path, source| TrustError::Inspect {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::symlink_metadata(dir).map_err(|e| inspect(dir, e))?;
    if !meta.is_dir() {
        return Err(TrustError::NotADirectory {
            dir: dir.to_path_buf(),
        });
    }
    let ours = owner;
    if meta.uid() != ours {
        return Err(TrustError::ForeignOwner {
            dir: dir.to_path_buf(),
            owner: meta.uid(),
            ours,
        });
    }
    if meta.mode() & WRITABLE_BY_OTHERS != 0 {
        return Err(TrustError::OpenToOthers {
            dir: dir.to_path_buf(),
            mode: meta.mode() & 0o7777,
        });
    }
    // Above it, symlinks are fine (macOS's /tmp is one): what counts is the real path.
    let real = std::fs::canonicalize(dir).map_err(|e| inspect(dir, e))?;
    for ancestor in real.ancestors().skip(1) {
        let m = std::fs::metadata(ancestor).map_err(|e| inspect(ancestor, e))?;
        let why = if m.uid() != 0 && m.uid() != ours {
            Some(format!("belongs to uid {}", m.uid()))
        } else if m.mode() & WRITABLE_BY_OTHERS != 0 && m.mode() & STICKY == 0 {
            Some(format!(
                "is writable by other users without the sticky bit (mode {:04o})",
                m.mode() & 0o7777
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(TrustError::UnsafeAncestor {
                dir: dir.to_path_buf(),
                ancestor: ancestor.to_path_buf(),
                why,
            });
        }
    }
    Ok(())
}

/// Check that the peer of `stream`, connected to `socket`, runs as our uid.
///
/// # Errors
/// [`TrustError::ForeignPeer`], or [`TrustError::PeerUnknown`] when the kernel does not say.
pub fn check_peer(stream: &tokio::net::UnixStream, socket: &Path) -> Result<(), TrustError> {
    check_peer_is(stream, socket, our_uid())
}

/// [`check_peer`] for a listener that must run as `uid`.
///
/// # Errors
/// As [`check_peer`].
pub fn check_peer_is(
    stream: &tokio::net::UnixStream,
    socket: &Path,
    uid: u32,
) -> Result<(), TrustError> {
    let cred = stream
        .peer_cred()
        .map_err(|source| TrustError::PeerUnknown {
            socket: socket.to_path_buf(),
            source,
        })?;
    let ours = uid;
    if cred.uid() != ours {
        return Err(TrustError::ForeignPeer {
            socket: socket.to_path_buf(),
            peer: cred.uid(),
            ours,
        });
    }
    Ok(())
}

impl TrustError {
    /// True when the directory checked does not exist (nothing to trust or distrust yet).
    pub fn is_missing(&self) -> bool {
        matches!(self, TrustError::Inspect { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_private_directory_of_ours_is_trusted_and_left_as_it_is() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("svc");
        std::fs::create_dir(&dir).expect("mkdir");
        chmod(&dir, 0o755);
        check_dir(&dir).expect("0755 is not writable by others");
        let mode = std::fs::metadata(&dir).expect("meta").mode() & 0o7777;
        assert_eq!(mode, 0o755, "the mode is never changed");
    }

    #[test]
    fn a_directory_writable_by_others_is_refused_with_its_mode_and_the_fix() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for mode in [0o777, 0o1777, 0o770] {
            let dir = tmp.path().join(format!("d{mode:o}"));
            std::fs::create_dir(&dir).expect("mkdir");
            chmod(&dir, mode);
            let e = check_dir(&dir).expect_err("refused").to_string();
            assert!(
                e.contains(&format!("{mode:04o}")) && e.contains("--socket"),
                "{e}"
            );
            assert_eq!(std::fs::metadata(&dir).expect("meta").mode() & 0o7777, mode);
        }
    }

    #[test]
    fn a_symlink_a_missing_directory_and_an_unsafe_ancestor_are_told_apart() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert!(matches!(
            check_dir(&link),
            Err(TrustError::NotADirectory { .. })
        ));
        assert!(
            check_dir(&tmp.path().join("nope"))
                .unwrap_err()
                .is_missing()
        );
        let open = tmp.path().join("open");
        let inner = open.join("inner");
        std::fs::create_dir_all(&inner).expect("mkdir");
        chmod(&inner, 0o700);
        chmod(&open, 0o777);
        let e = check_dir(&inner).unwrap_err();
        assert!(matches!(e, TrustError::UnsafeAncestor { .. }), "{e}");
        chmod(&open, 0o1777);
        check_dir(&inner).expect("a sticky ancestor, like /tmp, is fine");
    }
}
