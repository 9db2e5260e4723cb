//! Reading and writing files that users name (a script to run, an export target) without
//! blocking the async runtime and without unbounded memory. Owns the checks that make a
//! user-named path safe to touch: the blocking system calls run on tokio's blocking pool,
//! opens never wait (`O_NONBLOCK`, so a FIFO without a writer or a device cannot stall them),
//! anything but a regular file is refused with an error naming what it is, reads stop one byte
//! past their cap, and writes go to a temp file in the target's directory that is then renamed
//! over the target, so readers see the old file or the new one, never half of it. A file that
//! holds a session's data is written for its owner only ([`FileMode::Private`]).
//!
//! The `*_in` functions touch a path *for a session*, held to the session's [`Reach`]
//! (`reach.rs`): a sandboxed session's files are resolved beneath its cwd.

mod reach;

pub use reach::Reach;

use std::fmt;
use std::fs::{FileType, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::libc;

/// What a path that is not a regular file is, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    /// A named pipe.
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    /// Anything else that is not a regular file.
    Other,
}

impl FileKind {
    /// `None` for a regular file, else what it is. `t` comes from a followed `stat`, so it is
    /// never a symlink.
    fn of(t: FileType) -> Option<FileKind> {
        if t.is_file() {
            None
        } else if t.is_dir() {
            Some(FileKind::Directory)
        } else if t.is_fifo() {
            Some(FileKind::Fifo)
        } else if t.is_char_device() {
            Some(FileKind::CharDevice)
        } else if t.is_block_device() {
            Some(FileKind::BlockDevice)
        } else if t.is_socket() {
            Some(FileKind::Socket)
        } else {
            Some(FileKind::Other)
        }
    }
}

impl fmt::Display for FileKind {
    /// With its article: "a character device".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "a special file",
        })
    }
}

/// Whether the failed operation read or wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }

    fn participle(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "written",
        }
    }
}

/// How a caller should classify a [`FileError`]: `LimitExceeded` for
/// [`FileError::TooLarge`], `Refused` for [`FileError::OutsideReach`], `Io` for everything
/// else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileErrorKind {
    LimitExceeded,
    Refused,
    Io,
}

/// A user-named file could not be read or written. Every variant carries the path as given;
/// messages say what to do next.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Nothing at `path` (read only; writes create their file).
    #[error("{} does not exist; check the path", .path.display())]
    NotFound { path: PathBuf },
    /// `path` is a directory, or (for a write) ends in `/` or `..` and so names one.
    #[error("{} is a directory, not a file; name a file inside it, e.g. {}/<file name>", .path.display(), .path.display().to_string().trim_end_matches('/'))]
    IsDirectory { path: PathBuf },
    /// `path` exists and is a FIFO, device, socket or other special file.
    #[error("{} is {kind}, not a regular file; only regular files can be {}", .path.display(), .access.participle())]
    NotRegular {
        path: PathBuf,
        kind: FileKind,
        access: Access,
    },
    /// The file holds more than `limit` bytes. `size` is what `fstat` reports or, when that
    /// under-reports (procfs files report 0, a file may grow while read), the bytes read:
    /// a lower bound either way.
    #[error("{} is at least {size} bytes, over the limit of {limit} bytes; use a smaller file", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// The path is outside what the session may reach (see [`Reach`]); `why` names the grant.
    #[error("kernel-mcp does not touch {} for this session: {why}", .path.display())]
    OutsideReach { path: PathBuf, why: String },
    /// Any other failure of the system call, e.g. permission denied or a full disk.
    #[error("cannot {} {}: {source}{}", .access.verb(), .path.display(), io_hint(.source))]
    Io {
        path: PathBuf,
        access: Access,
        #[source]
        source: io::Error,
    },
}

impl FileError {
    /// `LimitExceeded` for [`FileError::TooLarge`], else `Io`.
    pub fn kind(&self) -> FileErrorKind {
        match self {
            FileError::TooLarge { .. } => FileErrorKind::LimitExceeded,
            FileError::OutsideReach { .. } => FileErrorKind::Refused,
            _ => FileErrorKind::Io,
        }
    }

    /// The path the caller named.
    pub fn path(&self) -> &Path {
        match self {
            FileError::NotFound { path }
            | FileError::IsDirectory { path }
            | FileError::NotRegular { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::OutsideReach { path, .. }
            | FileError::Io { path, .. } => path,
        }
    }
}

/// A next step for the common `io::Error`s, appended to [`FileError::Io`]'s message.
fn io_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::PermissionDenied => "; check the permissions of the file and its directory",
        io::ErrorKind::NotADirectory => "; a component of the path is not a directory",
        io::ErrorKind::ReadOnlyFilesystem => "; choose a path on a writable file system",
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "; free some space or choose another path"
        }
        io::ErrorKind::WouldBlock => "; it is not ready to be read (only plain files can be)",
        _ => "",
    }
}

/// Read all of the regular file at `path` if it holds at most `cap` bytes.
///
/// Runs on tokio's blocking pool. Opens with `O_NONBLOCK | O_NOCTTY | O_CLOEXEC`, checks the
/// open descriptor with `fstat`, refuses a size over `cap` before reading and never reads more
/// than `cap + 1` bytes, so memory stays under `cap + 1` bytes even for a file that grows or
/// under-reports its size.
///
/// Errors: [`FileError::NotFound`]; [`FileError::IsDirectory`]; [`FileError::NotRegular`] for
/// FIFOs, devices (e.g. `/dev/zero`) and sockets; [`FileError::TooLarge`]; [`FileError::Io`]
/// for anything else (permissions, a file whose reads would block).
pub async fn read_capped(path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    read_capped_in(&Reach::Anywhere, path, cap).await
}

/// [`read_capped`] for a session: `path` within `reach`. Errors: those of [`read_capped`],
/// and [`FileError::OutsideReach`].
pub async fn read_capped_in(reach: &Reach, path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    let (owned, reach) = (path.to_path_buf(), reach.clone());
    on_blocking_pool(path, Access::Read, move || {
        read_capped_now(&reach, &owned, cap)
    })
    .await
}

/// Check that `path` is a regular file of at most `limit` bytes this process can open for
/// reading, reading none of it (for a kernel that reads the file itself). Errors: those of
/// [`read_capped`].
pub async fn check_readable(path: &Path, limit: u64) -> Result<(), FileError> {
    check_readable_in(&Reach::Anywhere, path, limit).await
}

/// [`check_readable`] for a session: `path` within `reach`.
pub async fn check_readable_in(reach: &Reach, path: &Path, limit: u64) -> Result<(), FileError> {
    match read_capped_in(reach, path, 0).await {
        Ok(_) => Ok(()),
        Err(FileError::TooLarge { size, .. }) if size <= limit => Ok(()),
        Err(FileError::TooLarge { path, size, .. }) => {
            Err(FileError::TooLarge { path, size, limit })
        }
        Err(e) => Err(e),
    }
}

/// Who may read a file [`write_file`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// Its owner only (`0o600`), whatever the umask or the replaced file's mode: the file holds
    /// a session's data (its code, output, variables — secrets included).
    Private,
    /// An existing file keeps its permission bits; a new one gets `0o666` minus the umask.
    Keep,
    /// An existing file keeps its permission bits; a new one is `0o600` (a person's file that
    /// can hold credentials, such as an MCP client's config).
    KeepNewPrivate,
}

/// How [`write_file_blocking`] writes: the permission bits, and whether the new contents are
/// flushed to disk before the rename (a file a person keeps, so a crash leaves the old file
/// or the new one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    pub mode: FileMode,
    pub sync: bool,
}

/// Write `bytes` to `path`, replacing it atomically: the bytes go to a temp file in the same
/// directory, which is renamed over `path`. Creates missing parent directories. A symlink is
/// followed (its target is replaced) unless it dangles, in which case the link itself is
/// replaced. The permission bits follow `mode`. The target is never opened, so a FIFO or
/// device there cannot block the call.
///
/// Runs on tokio's blocking pool.
///
/// Errors: [`FileError::IsDirectory`] when `path` is a directory or ends in `/`;
/// [`FileError::NotRegular`] when it is a FIFO, device, socket or other special file;
/// [`FileError::Io`] for anything else (permissions, a full disk, a parent that is a file).
pub async fn write_file(path: &Path, bytes: Vec<u8>, mode: FileMode) -> Result<(), FileError> {
    write_file_in(&Reach::Anywhere, path, bytes, mode).await
}

/// [`write_file`] for a session: `path` within `reach` (beneath a sandboxed session's cwd, a
/// symbolic link at `path` is refused, not followed). Errors: those of [`write_file`], and
/// [`FileError::OutsideReach`].
pub async fn write_file_in(
    reach: &Reach,
    path: &Path,
    bytes: Vec<u8>,
    mode: FileMode,
) -> Result<(), FileError> {
    let (owned, reach) = (path.to_path_buf(), reach.clone());
    on_blocking_pool(path, Access::Write, move || {
        write_file_blocking_in(&reach, &owned, &bytes, WriteOptions { mode, sync: false })
    })
    .await
}

/// [`write_file_in`] on the calling thread.
pub fn write_file_blocking_in(
    reach: &Reach,
    path: &Path,
    bytes: &[u8],
    opts: WriteOptions,
) -> Result<(), FileError> {
    if reach::write(reach, path, bytes, opts)? {
        return Ok(());
    }
    write_file_blocking(path, bytes, opts)
}

/// Run `f` with `spawn_blocking`; a panic in it becomes [`FileError::Io`].
async fn on_blocking_pool<T: Send + 'static>(
    path: &Path,
    access: Access,
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<T, FileError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|join| {
        Err(FileError::Io {
            path: path.to_path_buf(),
            access,
            source: io::Error::other(join),
        })
    })
}

fn io_error(path: &Path, access: Access) -> impl FnOnce(io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_path_buf(),
        access,
        source,
    }
}

/// The error for a path that is `kind` (not a regular file).
fn refusal(path: &Path, kind: FileKind, access: Access) -> FileError {
    match kind {
        FileKind::Directory => FileError::IsDirectory {
            path: path.to_path_buf(),
        },
        kind => FileError::NotRegular {
            path: path.to_path_buf(),
            kind,
            access,
        },
    }
}

/// `Ok` for a regular file (`kind` is `None`), else its [`refusal`].
fn refuse_kind(path: &Path, kind: Option<FileKind>, access: Access) -> Result<(), FileError> {
    kind.map_or(Ok(()), |k| Err(refusal(path, k, access)))
}

fn read_capped_now(reach: &Reach, path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    let file = match reach::open_read(reach, path)? {
        Some(f) => f,
        None => open_to_read(path)?,
    };
    read_opened(file, path, cap)
}

/// `path` opened to read, never waiting (see [`read_capped`]).
fn open_to_read(path: &Path) -> Result<std::fs::File, FileError> {
    // std adds O_CLOEXEC itself.
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                return FileError::NotFound {
                    path: path.to_path_buf(),
                };
            }
            // Sockets cannot be opened at all (ENXIO): say what the path is instead.
            match std::fs::metadata(path).map(|m| FileKind::of(m.file_type())) {
                Ok(Some(kind)) => refusal(path, kind, Access::Read),
                _ => io_error(path, Access::Read)(e),
            }
        })
}

/// Read all of `file` (opened from `path`) if it is a regular file of at most `cap` bytes.
fn read_opened(file: std::fs::File, path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    let meta = file.metadata().map_err(io_error(path, Access::Read))?;
    refuse_kind(path, FileKind::of(meta.file_type()), Access::Read)?;
    let limit = cap as u64;
    let too_large = |size: u64| FileError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error(path, Access::Read))?;
    if bytes.len() > cap {
        let now = file.metadata().map(|m| m.len()).unwrap_or(0);
        return Err(too_large(now.max(bytes.len() as u64)));
    }
    Ok(bytes)
}

/// [`write_file`] on the calling thread (for the command line, which has no runtime to keep
/// free): the same atomic replace, through a symlink to its target, with `opts`.
///
/// Errors: as [`write_file`].
pub fn write_file_blocking(path: &Path, bytes: &[u8], opts: WriteOptions) -> Result<(), FileError> {
    let names_a_dir = path.as_os_str().as_bytes().ends_with(b"/") || path.file_name().is_none();
    if names_a_dir {
        return Err(FileError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let target = match is_link {
        true => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        false => path.to_path_buf(),
    };
    // stat, not open: nothing here can wait on a FIFO or a device.
    let existing: Option<Permissions> = match std::fs::metadata(&target) {
        Ok(meta) => {
            refuse_kind(path, FileKind::of(meta.file_type()), Access::Write)?;
            Some(meta.permissions())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(path, Access::Write)(e)),
    };
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io_error(path, Access::Write))?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(target.file_name().unwrap_or_default());
    prefix.push(".");
    // The bits the file ends with: exactly these (`set_permissions` below undoes the umask),
    // or — for a new file kept to the default — 0o666 narrowed by the umask at creation.
    let (exact, new_mode) = match opts.mode {
        FileMode::Private => (Some(Permissions::from_mode(0o600)), 0o600),
        FileMode::Keep => (existing, 0o666),
        FileMode::KeepNewPrivate => (existing, 0o600),
    };
    let mode = exact
        .clone()
        .unwrap_or_else(|| Permissions::from_mode(new_mode));
    let write = || -> io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .permissions(mode)
            .tempfile_in(dir)?;
        tmp.write_all(bytes)?;
        if opts.sync {
            tmp.as_file().sync_all()?;
        }
        if let Some(perms) = exact {
            // The umask narrowed the mode at creation; set it exactly.
            tmp.as_file().set_permissions(perms)?;
        }
        tmp.persist(&target).map_err(|e| e.error)?;
        Ok(())
    };
    write().map_err(io_error(path, Access::Write))
}

impl From<FileError> for crate::session::SessionError {
    fn from(e: FileError) -> crate::session::SessionError {
        use crate::session::SessionError;
        match e.kind() {
            FileErrorKind::LimitExceeded => SessionError::LimitExceeded(e.to_string()),
            FileErrorKind::Refused => SessionError::InvalidArgument(e.to_string()),
            FileErrorKind::Io => SessionError::io(e.path(), e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
