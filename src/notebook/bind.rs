//! Which notebooks are open, and in which session (docs/tools.md, "Notebooks"): one binding per
//! principal and notebook path, made by `open_notebook` and ended by `close_notebook`. Every
//! notebook tool names its notebook by path — there is no "current notebook" two agents could
//! write into by mistake — and finds its binding here. A principal sees only its own bindings.
//!
//! The table is the process's, like the registry ([`Notebooks::global`]), bounded to
//! [`MAX_OPEN`] bindings. Each binding holds its document (a file behind an async mutex:
//! one change at a time; or a collaboration room) and the batch of cells `execute_cells`
//! runs, if any (the latest: its id names it to `get_execution`, `cancel_execution` and
//! tasks, [`Notebooks::find_batch`]). A notebook in a Jupyter Server's room is keyed
//! `SERVER:PATH` (a relative path, so it never meets a local file's absolute one);
//! [`Notebooks::find_room`] finds it by the server path alone too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::watch;

use super::doc::Doc;
use super::run::{BatchHandle, BatchState};

/// Most notebooks open at once in a server.
pub const MAX_OPEN: usize = 256;

/// One open notebook.
pub struct Binding {
    /// The notebook's absolute path as it was opened; `SERVER:PATH` for a room's.
    pub path: PathBuf,
    /// The session it runs in, as its principal names it.
    pub session_id: String,
    /// The file, as last read or written, or the room.
    pub doc: Doc,
    /// The batch of cells running or last run (`execute_cells`).
    batch: Mutex<Option<BatchHandle>>,
}

impl Binding {
    /// The batch running now or last run, followed.
    pub fn batch(&self) -> Option<watch::Receiver<BatchState>> {
        lock(&self.batch).as_ref().map(|b| b.rx.clone())
    }

    /// The batch running now or last run.
    pub fn batch_handle(&self) -> Option<BatchHandle> {
        lock(&self.batch).clone()
    }

    /// The batch that runs from now on.
    pub fn set_batch(&self, batch: BatchHandle) {
        *lock(&self.batch) = Some(batch);
    }

    /// True while a batch of this notebook's cells runs.
    pub fn is_running(&self) -> bool {
        lock(&self.batch)
            .as_ref()
            .is_some_and(|b| !b.rx.borrow().done)
    }
}

/// Why a binding could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("{MAX_OPEN} notebooks are open on this server; close one with close_notebook first")]
    Full,
}

/// The open notebooks of this process.
#[derive(Default)]
pub struct Notebooks {
    /// (principal id, absolute path) → binding.
    open: Mutex<HashMap<(String, PathBuf), Arc<Binding>>>,
}

impl Notebooks {
    /// The process's table.
    pub fn global() -> &'static Notebooks {
        static TABLE: LazyLock<Notebooks> = LazyLock::new(Notebooks::default);
        &TABLE
    }

    /// `owner`'s binding of `path`, if the notebook is open.
    pub fn get(&self, owner: &str, path: &Path) -> Option<Arc<Binding>> {
        lock(&self.open)
            .get(&(owner.to_string(), path.to_path_buf()))
            .cloned()
    }

    /// Bind `path` (absolute, or `SERVER:PATH`) to `session_id` for `owner`, holding `doc`; when the notebook
    /// is open already, its binding is returned instead (one notebook, one session), and
    /// `false` says so. Errors: [`BindError::Full`].
    pub fn bind(
        &self,
        owner: &str,
        path: &Path,
        session_id: &str,
        doc: Doc,
    ) -> Result<(Arc<Binding>, bool), BindError> {
        let mut open = lock(&self.open);
        let key = (owner.to_string(), path.to_path_buf());
        if let Some(b) = open.get(&key) {
            return Ok((b.clone(), false));
        }
        if open.len() >= MAX_OPEN {
            return Err(BindError::Full);
        }
        let binding = Arc::new(Binding {
            path: path.to_path_buf(),
            session_id: session_id.to_string(),
            doc,
            batch: Mutex::new(None),
        });
        open.insert(key, binding.clone());
        Ok((binding, true))
    }

    /// `owner`'s binding of a notebook in a room whose server path is `server_path` (as
    /// `open_notebook` was given it), when exactly one server has it open.
    pub fn find_room(&self, owner: &str, server_path: &str) -> Option<Arc<Binding>> {
        let want = server_path.trim_matches('/');
        let open = lock(&self.open);
        let mut found = open.iter().filter(|((o, _), b)| {
            o == owner && matches!(&b.doc, Doc::Room { room, .. } if room.path() == want)
        });
        match (found.next(), found.next()) {
            (Some((_, b)), None) => Some(b.clone()),
            _ => None,
        }
    }

    /// End `owner`'s binding of `path`; returns it, if the notebook was open.
    pub fn close(&self, owner: &str, path: &Path) -> Option<Arc<Binding>> {
        lock(&self.open).remove(&(owner.to_string(), path.to_path_buf()))
    }

    /// `owner`'s batch whose id is `id` (each notebook keeps its latest batch), with the
    /// binding it runs in.
    pub fn find_batch(&self, owner: &str, id: &str) -> Option<(Arc<Binding>, BatchHandle)> {
        let open = lock(&self.open);
        open.iter()
            .filter(|((o, _), _)| o == owner)
            .find_map(|(_, b)| {
                let batch = b.batch_handle().filter(|h| h.id == id)?;
                Some((b.clone(), batch))
            })
    }

    /// The paths `owner` has open, sorted.
    pub fn paths(&self, owner: &str) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = lock(&self.open)
            .keys()
            .filter(|(o, _)| o == owner)
            .map(|(_, p)| p.clone())
            .collect();
        paths.sort();
        paths
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
