//! Where the server may read and write files *for a session* (docs/sandbox.md, "Attacker's
//! checklist", door 3): the server is not sandboxed, so every tool that touches a path on a
//! session's behalf — `export_history`, `checkpoint_session`, `restore_session`, the live
//! notebook (`mirror_notebook`, `create_session(notebook=…)`), `execute_file` — goes through
//! the session's [`Reach`], the one place that holds it to the session's grants.
//!
//! A session without a sandbox reaches what the user running kernel-mcp reaches. A sandboxed
//! session's files are read beneath its cwd, and written beneath it only under `workspace`
//! (`read-only` writes nothing). The path is resolved by the kernel, beneath the cwd
//! (`openat2` with `RESOLVE_BENEATH`): a symbolic link or `..` that leads out is refused, and
//! so is a directory the kernel swaps for a link while the server writes. A file is written
//! as a temp file in its directory, renamed over the target; a target that is a symbolic link
//! is refused rather than followed.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::{Access, FileError, FileKind, FileMode, WriteOptions, io_error};
use crate::kernel::{Sandbox, SandboxPolicy};

/// What the server may touch for one session (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A session without a sandbox: whatever the user running kernel-mcp may.
    Anywhere,
    /// A sandboxed session: beneath its cwd.
    Sandboxed {
        session: String,
        sandbox: Sandbox,
        /// The cwd as the session names it (relative paths are joined to it).
        cwd: PathBuf,
        /// The same, symlinks resolved.
        root: PathBuf,
    },
    /// Nothing: `why` says so (a sandboxed session whose grants are not known).
    Nowhere { session: String, why: String },
}

impl Reach {
    /// The reach of a session with `sandbox` working in `cwd`.
    pub fn of(session: &str, sandbox: Sandbox, cwd: &Path) -> Reach {
        if !sandbox.restricts() {
            return Reach::Anywhere;
        }
        Reach::Sandboxed {
            session: session.to_string(),
            sandbox,
            cwd: cwd.to_path_buf(),
            root: cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf()),
        }
    }

    /// The reach of a live session.
    pub fn of_session(info: &crate::session::SessionInfo) -> Reach {
        Reach::of(&info.session_id, info.sandbox, Path::new(&info.cwd))
    }

    /// Where a relative path of this session resolves from: its cwd (`None` for
    /// [`Reach::Anywhere`], whose caller decides).
    pub fn cwd(&self) -> Option<&Path> {
        match self {
            Reach::Sandboxed { cwd, .. } => Some(cwd),
            _ => None,
        }
    }

    /// Refuse at once a `path` (absolute) that is plainly outside the reach for a write
    /// (links are checked when it is written). Errors: [`FileError::OutsideReach`].
    pub fn check_write(&self, path: &Path) -> Result<(), FileError> {
        self.beneath(path, Access::Write).map(|_| ())
    }

    /// Where `path` (absolute) is to be opened for `access`: `None` anywhere, else the root
    /// to resolve beneath and the path relative to it.
    /// Errors: [`FileError::OutsideReach`] saying which grant and which path.
    fn beneath(&self, path: &Path, access: Access) -> Result<Option<(&Path, PathBuf)>, FileError> {
        let (session, sandbox, cwd, root) = match self {
            Reach::Anywhere => return Ok(None),
            Reach::Nowhere { session, why } => {
                return Err(outside(path, format!("session '{session}': {why}")));
            }
            Reach::Sandboxed {
                session,
                sandbox,
                cwd,
                root,
            } => (session, sandbox, cwd, root),
        };
        let grant = |verb: &str| {
            format!(
                "session '{session}' runs in the '{sandbox}' sandbox, whose kernel may {verb} only beneath its cwd {}, and kernel-mcp {verb}s files for it with the same rights",
                root.display()
            )
        };
        if access == Access::Write && sandbox.policy == SandboxPolicy::ReadOnly {
            return Err(outside(
                path,
                format!(
                    "session '{session}' runs in the 'read-only' sandbox, whose kernel may write no file of its cwd, and kernel-mcp writes no file for it either; create the session with sandbox \"workspace\" to write in its cwd"
                ),
            ));
        }
        let rel = path
            .strip_prefix(root)
            .or_else(|_| path.strip_prefix(cwd))
            .map_err(|_| {
                outside(
                    path,
                    format!(
                        "{}: it is outside. Choose a path inside {}",
                        grant(access.verb()),
                        root.display()
                    ),
                )
            })?;
        Ok(Some((root, rel.to_path_buf())))
    }
}

/// [`FileError::OutsideReach`] for `path`.
fn outside(path: &Path, why: String) -> FileError {
    FileError::OutsideReach {
        path: path.to_path_buf(),
        why,
    }
}

/// `rel` opened beneath `root` with `flags` (`openat2`, `RESOLVE_BENEATH`; where the kernel
/// lacks it, component by component without following any symbolic link).
fn open_beneath(root: &OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match nix::fcntl::openat2(root, rel, how) {
        Err(Errno::ENOSYS) => open_nofollow(root, rel, flags, mode),
        other => other,
    }
}

/// The fallback of [`open_beneath`]: plain names only, no link followed.
fn open_nofollow(root: &OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let names: Vec<&OsStr> = rel
        .components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(Errno::EXDEV),
        })
        .collect::<Result<_, _>>()?;
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir = nix::fcntl::openat(root, ".", dir_flags, Mode::empty())?;
    let Some((last, parents)) = names.split_last() else {
        return nix::fcntl::openat(root, ".", flags | OFlag::O_CLOEXEC, mode);
    };
    for name in parents {
        dir = nix::fcntl::openat(&dir, *name, dir_flags, Mode::empty())?;
    }
    nix::fcntl::openat(
        &dir,
        *last,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        mode,
    )
}

/// The error of a failed open beneath `root` of `path`.
fn open_error(path: &Path, root: &Path, access: Access, e: Errno) -> FileError {
    match e {
        Errno::EXDEV | Errno::ELOOP => outside(
            path,
            format!(
                "it resolves outside {} (a symbolic link or `..` leads out), which a sandboxed session's files may not; choose a path inside it",
                root.display()
            ),
        ),
        Errno::ENOENT if access == Access::Read => FileError::NotFound {
            path: path.to_path_buf(),
        },
        e => io_error(path, access)(io::Error::from(e)),
    }
}

fn open_root(path: &Path, root: &Path, access: Access) -> Result<OwnedFd, FileError> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    nix::fcntl::open(root, flags, Mode::empty()).map_err(|e| io_error(path, access)(e.into()))
}

/// Open `path` for reading within `reach` (blocking). `Ok(None)`: [`Reach::Anywhere`], the
/// caller opens it as usual.
pub(super) fn open_read(reach: &Reach, path: &Path) -> Result<Option<std::fs::File>, FileError> {
    let Some((root, rel)) = reach.beneath(path, Access::Read)? else {
        return Ok(None);
    };
    let root_fd = open_root(path, root, Access::Read)?;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = open_beneath(&root_fd, &rel, flags, Mode::empty()).map_err(|e| match e {
        // A socket cannot be opened: say what it is.
        Errno::ENXIO => FileError::NotRegular {
            path: path.to_path_buf(),
            kind: FileKind::Socket,
            access: Access::Read,
        },
        e => open_error(path, root, Access::Read, e),
    })?;
    Ok(Some(std::fs::File::from(fd)))
}

/// Write `bytes` to `path` within `reach` (blocking), as [`super::write_file_blocking`] does
/// anywhere. `Ok(false)`: [`Reach::Anywhere`], nothing was done.
pub(super) fn write(
    reach: &Reach,
    path: &Path,
    bytes: &[u8],
    opts: WriteOptions,
) -> Result<bool, FileError> {
    let Some((root, rel)) = reach.beneath(path, Access::Write)? else {
        return Ok(false);
    };
    let name = match rel.components().next_back() {
        Some(Component::Normal(n)) if !path.as_os_str().as_bytes().ends_with(b"/") => n,
        _ => {
            return Err(FileError::IsDirectory {
                path: path.to_path_buf(),
            });
        }
    };
    let root_fd = open_root(path, root, Access::Write)?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = make_dirs_beneath(&root_fd, parent)
        .map_err(|e| open_error(path, root, Access::Write, e))?;
    let existing =
        match nix::sys::stat::fstatat(&dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Some(check_target(path, root, &st)?),
            Err(Errno::ENOENT) => None,
            Err(e) => return Err(io_error(path, Access::Write)(e.into())),
        };
    let mode = match (opts.mode, existing) {
        (FileMode::Private, _) => 0o600,
        (FileMode::Keep | FileMode::KeepNewPrivate, Some(bits)) => bits,
        (FileMode::Keep, None) => 0o666,
        (FileMode::KeepNewPrivate, None) => 0o600,
    };
    let exact = opts.mode == FileMode::Private || existing.is_some();
    replace(&dir, name, bytes, mode, exact, opts.sync).map_err(io_error(path, Access::Write))?;
    Ok(true)
}

/// Refuse a target that is not a regular file; its permission bits.
fn check_target(path: &Path, root: &Path, st: &FileStat) -> Result<u32, FileError> {
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    let what = match kind {
        SFlag::S_IFREG => return Ok(st.st_mode & 0o7777),
        SFlag::S_IFLNK => {
            return Err(outside(
                path,
                format!(
                    "it is a symbolic link: for a sandboxed session kernel-mcp writes only regular files inside {}, never through a link; remove the link or choose another name",
                    root.display()
                ),
            ));
        }
        SFlag::S_IFDIR => FileKind::Directory,
        SFlag::S_IFIFO => FileKind::Fifo,
        SFlag::S_IFCHR => FileKind::CharDevice,
        SFlag::S_IFBLK => FileKind::BlockDevice,
        SFlag::S_IFSOCK => FileKind::Socket,
        _ => FileKind::Other,
    };
    Err(super::refusal(path, what, Access::Write))
}

/// The directory `rel` beneath `root`, made (0777 less the umask) where missing.
fn make_dirs_beneath(root: &OwnedFd, rel: &Path) -> nix::Result<OwnedFd> {
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
    match open_beneath(root, rel, dir_flags, Mode::empty()) {
        Err(Errno::ENOENT) => {}
        other => return other,
    }
    let mut so_far = PathBuf::new();
    let mut dir = open_beneath(root, Path::new(""), dir_flags, Mode::empty())?;
    for c in rel.components() {
        so_far.push(c);
        match open_beneath(root, &so_far, dir_flags, Mode::empty()) {
            Ok(d) => dir = d,
            Err(Errno::ENOENT) => {
                let Component::Normal(name) = c else {
                    return Err(Errno::ENOENT);
                };
                match nix::sys::stat::mkdirat(&dir, name, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e),
                }
                dir = open_beneath(root, &so_far, dir_flags, Mode::empty())?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(dir)
}

/// Write `bytes` to a new temp file in `dir` and rename it over `name`.
fn replace(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
    exact: bool,
    sync: bool,
) -> io::Result<()> {
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, tmp.as_os_str(), flags, Mode::from_bits_truncate(mode))?;
    let mut file = std::fs::File::from(fd);
    let written = (|| -> io::Result<()> {
        file.write_all(bytes)?;
        if exact {
            // The umask narrowed the mode at creation; set it exactly.
            nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(mode))?;
        }
        if sync {
            file.sync_all()?;
        }
        nix::fcntl::renameat(dir, tmp.as_os_str(), dir, name)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = nix::unistd::unlinkat(
            dir,
            tmp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(cwd: &Path) -> Reach {
        Reach::of(
            "s",
            Sandbox {
                policy: SandboxPolicy::Workspace,
                network: false,
            },
            cwd,
        )
    }

    const PRIVATE: WriteOptions = WriteOptions {
        mode: FileMode::Private,
        sync: false,
    };

    #[test]
    fn a_sandboxed_session_writes_beneath_its_cwd_and_nowhere_else() {
        let cwd = tempfile::tempdir().unwrap();
        let outside_dir = tempfile::tempdir().unwrap();
        let reach = workspace(cwd.path());
        assert!(write(&reach, &cwd.path().join("a/b/out.txt"), b"hi", PRIVATE).unwrap());
        assert_eq!(
            std::fs::read(cwd.path().join("a/b/out.txt")).unwrap(),
            b"hi"
        );
        let far = outside_dir.path().join("x.txt");
        let e = write(&reach, &far, b"x", PRIVATE).unwrap_err();
        assert!(matches!(e, FileError::OutsideReach { .. }), "{e}");
        assert!(e.to_string().contains("'workspace' sandbox"), "{e}");
        // A link to outside, as a directory or as the file, leads nowhere.
        std::os::unix::fs::symlink(outside_dir.path(), cwd.path().join("out")).unwrap();
        let e = write(&reach, &cwd.path().join("out/x.txt"), b"x", PRIVATE).unwrap_err();
        assert!(e.to_string().contains("resolves outside"), "{e}");
        std::os::unix::fs::symlink(&far, cwd.path().join("f.txt")).unwrap();
        let e = write(&reach, &cwd.path().join("f.txt"), b"x", PRIVATE).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = write(&reach, &cwd.path().join("../escape.txt"), b"x", PRIVATE).unwrap_err();
        assert!(matches!(e, FileError::OutsideReach { .. }), "{e}");
        assert!(!far.exists());
        assert!(
            std::fs::read_dir(outside_dir.path())
                .unwrap()
                .next()
                .is_none()
        );
    }

    #[test]
    fn read_only_writes_nothing_and_reads_beneath_its_cwd() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(cwd.path().join("in.txt"), "data").unwrap();
        let reach = Reach::of(
            "s",
            Sandbox {
                policy: SandboxPolicy::ReadOnly,
                network: false,
            },
            cwd.path(),
        );
        let e = write(&reach, &cwd.path().join("x"), b"x", PRIVATE).unwrap_err();
        assert!(e.to_string().contains("'read-only' sandbox"), "{e}");
        let f = open_read(&reach, &cwd.path().join("in.txt")).unwrap();
        assert!(f.is_some());
        let e = open_read(&reach, Path::new("/etc/hostname")).unwrap_err();
        assert!(matches!(e, FileError::OutsideReach { .. }), "{e}");
        assert!(
            open_read(&Reach::Anywhere, Path::new("/etc/hostname"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_fallback_without_openat2_follows_no_link() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir(cwd.path().join("d")).unwrap();
        std::fs::write(cwd.path().join("d/f"), "x").unwrap();
        std::os::unix::fs::symlink("/etc", cwd.path().join("l")).unwrap();
        let root = nix::fcntl::open(
            cwd.path(),
            OFlag::O_PATH | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        assert!(open_nofollow(&root, Path::new("d/f"), OFlag::O_RDONLY, Mode::empty()).is_ok());
        assert!(
            open_nofollow(
                &root,
                Path::new("l/hostname"),
                OFlag::O_RDONLY,
                Mode::empty()
            )
            .is_err()
        );
        assert_eq!(
            open_nofollow(&root, Path::new("../x"), OFlag::O_RDONLY, Mode::empty()).unwrap_err(),
            Errno::EXDEV
        );
    }
}
