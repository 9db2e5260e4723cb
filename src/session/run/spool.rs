//! Spool files: where a run's stream output goes once the run holds more than [`SPILL_BYTES`]
//! of it in memory (docs/performance.md, "Large outputs: the spool"), so a flood costs the
//! server disk, not RAM.
//!
//! Layout: `$XDG_STATE_HOME/kernel-mcp/spool/` (else `~/.local/state/kernel-mcp/spool/`), one
//! directory per server process named after its instance id, holding one file per spilled
//! stream (`<run_id>.stdout`, `<run_id>.stderr`). Directories are 0700 and files 0600: they
//! hold the session's output. A file is removed when its run is forgotten (the session keeps
//! its last runs, see `session/runs.rs`) or its session is destroyed, and the server's
//! directory when the server exits.
//!
//! A server that died without cleaning up leaves its directory behind; the next server to
//! start removes it. Each server holds an exclusive `flock` on `<dir>/lock` for its life
//! (the kernel drops it when the process dies, however it dies), so a directory whose lock
//! can be taken belongs to no live server. A directory is created as `<id>.new` and renamed
//! once its lock is held, so a server pruning at the same moment never takes a directory
//! that is being set up for one that is alive.
//!
//! Files are written with plain blocking writes on the session's runtime thread: a write
//! lands in the page cache and costs what the in-memory append it replaces cost (a copy of
//! the text), and reads are bounded by the page sizes the tools ask for (at most 8 MiB).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};

/// A run's stream output held in memory beyond this (both streams together) goes to a
/// spool file.
pub const SPILL_BYTES: usize = 8 * 1024 * 1024;

/// Stream output held in memory by all runs together beyond this makes the run receiving
/// more spill, whatever its own size: sixteen sessions flooding at once must not hold
/// sixteen times [`SPILL_BYTES`].
pub const SPILL_ALL_BYTES: usize = 24 * 1024 * 1024;

/// ...but only a stream holding more than this: small outputs never make a file.
pub const SPILL_SHARE_BYTES: usize = 1024 * 1024;

/// A directory being set up (`<id>.new`) younger than this is left alone by pruning.
const SETUP_GRACE: Duration = Duration::from_secs(60);

/// This server's spool directory, and the lock that says it is alive.
#[derive(Debug)]
pub struct SpoolDir {
    path: PathBuf,
    _lock: Flock<File>,
}

impl SpoolDir {
    /// The directory (0700, this server's own).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SpoolDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

static DIR: OnceLock<Option<SpoolDir>> = OnceLock::new();

/// The server's spool directory, made (and stale ones pruned) on first use; `None` when no
/// state directory can be made, and then output stays in memory (a warning says why once).
pub fn dir() -> Option<&'static SpoolDir> {
    DIR.get_or_init(|| {
        let base = base_dir()?;
        match open(&base, &crate::instance::current().id) {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::warn!(dir = %base.display(), "no spool directory, large outputs stay in memory: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// Remove this process's spool directory (server exit; statics are not dropped).
pub fn remove_own() {
    if let Some(Some(d)) = DIR.get() {
        let _ = fs::remove_dir_all(&d.path);
    }
}

/// `$XDG_STATE_HOME/kernel-mcp/spool` (an absolute `XDG_STATE_HOME` only), else
/// `$HOME/.local/state/kernel-mcp/spool`.
pub fn base_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(xdg) if xdg.is_absolute() => xdg,
        _ => Path::new(&std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".local/state"),
    };
    Some(base.join("kernel-mcp").join("spool"))
}

/// Prune `base`, then make and lock the directory `base/<id>`.
pub fn open(base: &Path, id: &str) -> io::Result<SpoolDir> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base)?;
    let pruned = prune(base);
    if pruned > 0 {
        tracing::info!(dir = %base.display(), pruned, "removed spool directories of servers that are gone");
    }
    let setup = base.join(format!("{id}.new"));
    fs::DirBuilder::new().mode(0o700).create(&setup)?;
    let lock = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(setup.join("lock"))?;
    let lock =
        Flock::lock(lock, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| io::Error::from(e))?;
    let path = base.join(id);
    fs::rename(&setup, &path)?;
    Ok(SpoolDir { path, _lock: lock })
}

/// Remove every directory in `base` that no live server holds; returns how many.
pub fn prune(base: &Path) -> usize {
    let Ok(entries) = fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let young = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_none_or(|age| age < SETUP_GRACE);
        let setting_up = path.extension().is_some_and(|e| e == "new");
        if setting_up && young {
            continue;
        }
        let free = match File::open(path.join("lock")) {
            // Taken and dropped at once: nobody holds it.
            Ok(f) => Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok(),
            Err(_) => !young,
        };
        if free && fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// One spilled stream's text on disk: appended to while its run goes on, read by range.
/// The file is removed when this is dropped.
#[derive(Debug)]
pub struct SpoolFile {
    path: PathBuf,
    /// Open while the run appends; closed by [`SpoolFile::close`] and reopened on demand, so
    /// finished runs hold no descriptor.
    file: Option<File>,
    len: u64,
}

impl SpoolFile {
    /// A new, empty file `name` in `dir` (mode 0600). Errors: I/O (the name exists, the disk
    /// is full…).
    pub fn create(dir: &SpoolDir, name: &str) -> io::Result<SpoolFile> {
        let path = dir.path.join(name);
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        Ok(SpoolFile {
            path,
            file: Some(file),
            len: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    fn handle(&mut self) -> io::Result<&File> {
        if self.file.is_none() {
            self.file = Some(
                OpenOptions::new()
                    .read(true)
                    .append(true)
                    .open(&self.path)?,
            );
        }
        Ok(self.file.as_ref().expect("opened above"))
    }

    /// Append `text`. Errors: I/O; the length counts only what was written.
    pub fn append(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let mut f = self.handle()?;
        f.write_all(text.as_bytes())?;
        self.len += text.len() as u64;
        Ok(())
    }

    /// Bytes `[start, end)` (clamped to the length). Errors: I/O.
    pub fn read(&mut self, start: usize, end: usize) -> io::Result<Vec<u8>> {
        let end = end.min(self.len());
        if start >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; end - start];
        self.handle()?.read_exact_at(&mut buf, start as u64)?;
        Ok(buf)
    }

    /// Close the descriptor (the file stays); the next read or append reopens it.
    pub fn close(&mut self) {
        self.file = None;
    }
}

impl Drop for SpoolFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_spool_file_is_private_reads_back_by_range_and_goes_with_its_owner() {
        let base = tempfile::tempdir().expect("temp dir");
        let dir = open(base.path(), "server-a").expect("spool dir");
        let mode = |p: &Path| fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode(dir.path()), 0o700);
        let mut f = SpoolFile::create(&dir, "run-1.stdout").expect("file");
        assert_eq!(mode(f.path()), 0o600);
        f.append("hello ").expect("write");
        f.close();
        f.append("world").expect("write after close");
        assert_eq!(f.read(3, 100).expect("read"), b"lo world");
        let path = f.path().to_path_buf();
        drop(f);
        assert!(!path.exists());
        let own = dir.path().to_path_buf();
        drop(dir);
        assert!(!own.exists(), "the server's directory goes at exit");
    }

    #[test]
    fn pruning_removes_the_directories_of_servers_that_are_gone_only() {
        let base = tempfile::tempdir().expect("temp dir");
        let alive = open(base.path(), "alive").expect("spool dir");
        // A server that died: its directory and lock file remain, nobody holds the lock.
        let dead = base.path().join("dead");
        fs::create_dir(&dead).expect("dir");
        File::create(dead.join("lock")).expect("lock");
        File::create(dead.join("run-1.stdout")).expect("file");
        assert_eq!(prune(base.path()), 1);
        assert!(!dead.exists());
        assert!(alive.path().exists());
        // A directory being set up right now is left alone.
        let setup = base.path().join("other.new");
        fs::create_dir(&setup).expect("dir");
        assert_eq!(prune(base.path()), 0);
        assert!(setup.exists());
    }
}
