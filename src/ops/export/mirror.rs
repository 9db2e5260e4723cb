//! A live notebook of a session (docs/jupyter.md, "A live notebook of a session"):
//! `create_session(notebook=PATH)` and `mirror_notebook(session_id, path)` keep an nbformat 4.5
//! `.ipynb` of the session's history up to date as each run finishes.
//!
//! One task per mirrored session waits on the session's history ([`SessionHandle::
//! history_changes`]: an entry added — a run of ours or another client's cell —, a display
//! updated, entries deleted or cleared), then renders the whole in-memory history with the
//! notebook export ([`super::render`]: every MIME type, display updates applied, cell ids
//! from run ids; `metadata.kernelspec` names the session's own kernelspec on the Jupyter
//! face ([`session_spec_name`]), so JupyterLab on the service's gateway opens it on the
//! session) and replaces the file atomically (a temporary file renamed over it, mode 0600
//! like every file of session data). Changes that come while a write is under way are
//! folded into the next write, so a burst of runs costs one write each [`SETTLE`] at most.
//! The task ends with the session (its history's sender is dropped), or when the session's
//! mirror moves to another path ([`Mirrors::start`]). The mirrors are the process's, like
//! the registry ([`Mirrors::global`]): one per live session, kept below the MCP tools that
//! start them and beside the registry, which sits a layer lower and never sees them. A write that fails is logged and
//! retried at the next change; the first write's failure is the caller's error.

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde::Serialize;

use super::{ExportContext, ExportFormat, render};
use crate::ops::files::{self, FileError, FileMode, Reach, WriteOptions};
use crate::session::cmd;
use crate::session::history::HistoryEntry;
use crate::session::{SessionError, SessionHandle, SessionInfo};

/// How the Jupyter face names the kernelspec that stands for a session: this prefix, then
/// the session id (`crate::jupyter::models::session_spec`).
pub const SESSION_SPEC_PREFIX: &str = "kernel-mcp-session.";

/// The kernelspec name that stands for session `id` on the Jupyter face.
pub fn session_spec_name(id: &str) -> String {
    format!("{SESSION_SPEC_PREFIX}{id}")
}

/// The display name of a session's kernelspec: `ID — kernel-mcp session (DISPLAY NAME)`.
pub fn session_display_name(info: &SessionInfo) -> String {
    format!(
        "{} — kernel-mcp session ({})",
        info.session_id, info.display_name
    )
}

/// Changes that come within this long of each other are written once.
pub const SETTLE: Duration = Duration::from_millis(100);

/// What `mirror_notebook` returns: where the notebook is, and what its first write held.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Mirrored {
    pub session_id: String,
    /// The notebook's absolute path.
    pub path: PathBuf,
    /// Cells written (one per history entry).
    pub entries: usize,
    pub bytes: usize,
}

/// One session's live notebook.
struct Mirror {
    handle: SessionHandle,
    path: PathBuf,
    task: tokio::task::AbortHandle,
}

/// The sessions' live notebooks: one per session.
#[derive(Default)]
pub struct Mirrors {
    tasks: Mutex<Vec<Mirror>>,
}

static MIRRORS: LazyLock<Mirrors> = LazyLock::new(Mirrors::default);

impl Mirrors {
    /// The process's mirrors.
    pub fn global() -> &'static Mirrors {
        &MIRRORS
    }

    /// Mirror `handle`'s session to `path` from now on (relative: under `cwd`; no extension:
    /// `.ipynb`), replacing the mirror it had. Writes the notebook once before returning.
    /// Errors: `IO_ERROR` (the file cannot be written: nothing is mirrored), `SESSION_DEAD`
    /// / `SESSION_NOT_FOUND` when the session ended.
    pub async fn start(
        &self,
        handle: &SessionHandle,
        path: &Path,
    ) -> Result<Mirrored, SessionError> {
        let info = handle.call(cmd::Info).await?;
        let path = notebook_path(path, Path::new(&info.cwd));
        let reach = Reach::of_session(&info);
        let (entries, bytes) = write_once(handle, &path, &reach).await?;
        let task = tokio::spawn(follow(handle.clone(), path.clone(), reach));
        {
            let mut tasks = lock(&self.tasks);
            tasks.retain(|m| {
                let replaced = m.handle.same_session(handle);
                if replaced {
                    m.task.abort();
                }
                !replaced && !m.task.is_finished()
            });
            tasks.push(Mirror {
                handle: handle.clone(),
                path: path.clone(),
                task: task.abort_handle(),
            });
        }
        tracing::info!(session = %handle.id(), path = %path.display(), "mirroring the session to a notebook");
        Ok(Mirrored {
            session_id: handle.id().to_string(),
            path,
            entries,
            bytes,
        })
    }

    /// Forget the mirror of `handle`'s session to `path` (its task has ended).
    fn ended(&self, handle: &SessionHandle, path: &Path) {
        lock(&self.tasks).retain(|m| !(m.handle.same_session(handle) && m.path == path));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `path` made absolute under `cwd`, with `.ipynb` when it has no extension.
fn notebook_path(path: &Path, cwd: &Path) -> PathBuf {
    let mut p = if path.is_relative() {
        cwd.join(path)
    } else {
        path.to_path_buf()
    };
    if p.extension().is_none() {
        p.set_extension("ipynb");
    }
    p
}

/// Follow the session's history until it ends, rewriting the notebook after each change.
async fn follow(handle: SessionHandle, path: PathBuf, reach: Reach) {
    let mut changes = handle.history_changes();
    changes.mark_unchanged();
    while changes.changed().await.is_ok() {
        tokio::time::sleep(SETTLE).await;
        changes.mark_unchanged();
        if let Err(e) = write_once(&handle, &path, &reach).await {
            tracing::warn!(session = %handle.id(), path = %path.display(), "the live notebook was not written: {e}");
        }
    }
    tracing::debug!(session = %handle.id(), path = %path.display(), "the live notebook's session ended");
    Mirrors::global().ended(&handle, &path);
}

/// Render the session's whole history as a notebook and replace `path` with it (0600),
/// within the session's `reach`. Returns the cells and bytes written. Errors: `IO_ERROR`,
/// `INVALID_ARGUMENT` (outside the reach), or the session's own.
async fn write_once(
    handle: &SessionHandle,
    path: &Path,
    reach: &Reach,
) -> Result<(usize, usize), SessionError> {
    let cmd::HistoryPage { entries, .. } = handle
        .call(cmd::History {
            start: None,
            end: None,
        })
        .await?;
    let info = handle.call(cmd::Info).await?;
    let mut ctx = ExportContext::from_info(&info);
    // The session's own kernelspec on the Jupyter face: a JupyterLab on `--gateway-url` of
    // the service opens the live notebook attached to this session's kernel.
    ctx.kernel = session_spec_name(&info.session_id);
    ctx.display_name = session_display_name(&info);
    let entries: Vec<HistoryEntry> = entries.into_iter().map(|(_, e)| e).collect();
    let count = entries.len();
    let (target, reach) = (path.to_path_buf(), reach.clone());
    let written = tokio::task::spawn_blocking(move || {
        let text = render(ExportFormat::Notebook, &ctx, &entries);
        let bytes = text.len();
        write_private(&reach, &target, text.as_bytes()).map(|()| bytes)
    })
    .await
    .map_err(|e| SessionError::Internal(format!("writing the notebook failed: {e}")))?;
    match written {
        Ok(bytes) => Ok((count, bytes)),
        Err(e) => Err(SessionError::from(e)),
    }
}

/// Replace `path` atomically with `bytes`, leaving it mode 0600 (also over an existing file
/// that others could read: a notebook holds the session's data).
fn write_private(reach: &Reach, path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let opts = WriteOptions {
        mode: FileMode::Private,
        sync: false,
    };
    files::write_file_blocking_in(reach, path, bytes, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_path_is_under_the_cwd_and_gets_the_notebook_extension() {
        let cwd = Path::new("/work/p");
        assert_eq!(
            notebook_path(Path::new("live"), cwd),
            PathBuf::from("/work/p/live.ipynb")
        );
        assert_eq!(
            notebook_path(Path::new("/tmp/a.json"), cwd),
            PathBuf::from("/tmp/a.json")
        );
    }

    #[test]
    fn the_notebook_is_written_0600_even_over_a_readable_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.ipynb");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&Reach::Anywhere, &p, b"{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{}\n");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
