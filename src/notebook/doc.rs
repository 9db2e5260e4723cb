//! Where a bound notebook lives (docs/tools.md, "Notebooks"): a file kernel-mcp reads and
//! writes itself ([`NotebookFile`]: merged with a person's saves, conflicts kept), or a Jupyter
//! Server's collaboration room ([`Room`]: the shared document JupyterLab shows, so a person
//! sees the agent's edits and outputs as they are made and the agent reads the person's). The
//! notebook tools and `execute_cells`' runs go through [`Doc`] and do not care which.
//!
//! A run writes into a room in steps, as JupyterLab's own run does: [`Doc::begin_run`]
//! clears the cell's outputs and shows it running, [`Doc::show`] brings them to the run's
//! outputs so far as they change (streams grow, displays appear and are updated in place),
//! [`Doc::finish`] puts the run's final outputs and execution count. In a file only the last
//! step writes (one write per finished cell).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Mutex;

use super::collab::{CollabError, Room};
use super::edit::{EditError, EditOp, EditOutcome};
use super::file::{NotebookError, NotebookFile};
use super::model::Notebook;

/// How long a read of a room waits for its round trip with the server (so a person's edit
/// made before the read is in it).
const ROOM_SYNC: Duration = Duration::from_secs(10);

/// A bound notebook's document.
#[derive(Clone)]
pub enum Doc {
    /// A file on this machine.
    File(Arc<Mutex<NotebookFile>>),
    /// A notebook in a Jupyter Server's collaboration room, as `server:path`.
    Room { room: Arc<Room>, server: String },
}

/// Why a read or a change of a [`Doc`] failed.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error(transparent)]
    Notebook(#[from] NotebookError),
    #[error(transparent)]
    Collab(#[from] CollabError),
    #[error(transparent)]
    Edit(#[from] EditError),
}

/// What [`Doc::edit`] did.
#[derive(Debug, Clone)]
pub struct Edit {
    pub outcome: EditOutcome,
    /// Cells after the change.
    pub total: usize,
    /// True when someone else's save on disk was merged in (files only; in a room every
    /// change merges).
    pub merged: bool,
}

impl Doc {
    /// A file's document.
    pub fn file(file: NotebookFile) -> Doc {
        Doc::File(Arc::new(Mutex::new(file)))
    }

    /// True for a collaboration room (outputs are streamed into it).
    pub fn is_live(&self) -> bool {
        matches!(self, Doc::Room { .. })
    }

    /// `f` on the notebook as it is now: a file re-read when it changed on disk (the `bool`
    /// says so), a room after a round trip with its server.
    ///
    /// Errors: [`DocError::Notebook`] (the file became unreadable or invalid),
    /// [`DocError::Collab`] (the room is lost, the document holds something that is not a
    /// cell).
    pub async fn read<R>(&self, f: impl FnOnce(&Notebook, bool) -> R) -> Result<R, DocError> {
        match self {
            Doc::File(file) => {
                let mut file = file.lock().await;
                let changed = file.refresh().await?;
                Ok(f(file.base(), changed))
            }
            Doc::Room { room, .. } => {
                // A server slow to answer still leaves what has arrived readable.
                if let Err(e) = room.sync(ROOM_SYNC).await {
                    match e {
                        CollabError::Timeout { .. } => {
                            tracing::warn!("reading a room without a fresh sync: {e}")
                        }
                        e => return Err(e.into()),
                    }
                }
                let nb = room.snapshot().await?;
                Ok(f(&nb, false))
            }
        }
    }

    /// Cells in the notebook as kernel-mcp last saw it (no re-read).
    pub async fn cells(&self) -> usize {
        match self {
            Doc::File(file) => file.lock().await.base().cells().len(),
            Doc::Room { room, .. } => room.snapshot().await.map_or(0, |nb| nb.cells().len()),
        }
    }

    /// Apply `edit_cells`' operations, all or nothing.
    ///
    /// Errors: [`DocError::Edit`] (an operation that cannot apply), [`DocError::Notebook`]
    /// (a conflict with a save on disk, a failed write), [`DocError::Collab`] (a cell a
    /// person is editing, a lost room).
    pub async fn edit(&self, ops: &[EditOp]) -> Result<Edit, DocError> {
        match self {
            Doc::File(file) => {
                let mut file = file.lock().await;
                let (outcome, written) = file
                    .change(|nb| super::edit::apply(nb, ops).map_err(DocError::Edit))
                    .await?;
                Ok(Edit {
                    outcome,
                    total: file.base().cells().len(),
                    merged: written.merged_theirs,
                })
            }
            Doc::Room { room, .. } => {
                let outcome = room.apply(ops)?;
                let total = room.snapshot().await?.cells().len();
                Ok(Edit {
                    outcome,
                    total,
                    merged: false,
                })
            }
        }
    }

    /// A run of cell `id` starts: in a room its outputs are cleared and it shows running.
    /// Returns false when the cell is not there any more.
    pub fn begin_run(&self, id: &str) -> Result<bool, DocError> {
        match self {
            Doc::File(_) => Ok(true),
            Doc::Room { room, .. } => match room.begin_run(id) {
                Ok(()) => Ok(true),
                Err(CollabError::UnknownCell { .. }) => Ok(false),
                Err(e) => Err(e.into()),
            },
        }
    }

    /// The outputs of cell `id`'s run so far (nbformat outputs, as the run's end will write
    /// them): in a room the cell's outputs are brought to them by the least change (see
    /// [`crate::notebook::collab::ops::sync_outputs`]; without `whole`, a long stream cut at
    /// the output bound waits, and true is returned). Nothing in a file: it gets the whole
    /// run at the end.
    pub fn show(&self, id: &str, outputs: &[Value], whole: bool) -> Result<bool, DocError> {
        match self {
            Doc::File(_) => Ok(false),
            Doc::Room { room, .. } => Ok(room.show_outputs(id, outputs, whole)?),
        }
    }

    /// A run of cell `id` ended: its outputs and execution count written. Returns false when
    /// the cell is not there any more (deleted meanwhile).
    ///
    /// Errors: [`DocError::Notebook`] (the file could not be written),
    /// [`DocError::Collab`] (the room is lost, the outputs pass its bound).
    pub async fn finish(
        &self,
        id: &str,
        outputs: Vec<Value>,
        count: Option<i64>,
    ) -> Result<bool, DocError> {
        match self {
            Doc::File(file) => {
                let mut file = file.lock().await;
                let (found, _) = file
                    .change(|nb| -> Result<bool, NotebookError> {
                        let Some(i) = nb.position(id) else {
                            return Ok(false);
                        };
                        nb.cells_mut()[i].set_run(outputs, count);
                        Ok(true)
                    })
                    .await?;
                Ok(found)
            }
            Doc::Room { room, .. } => {
                // What the person saw grow becomes the final outputs in place.
                let written = room
                    .show_outputs(id, &outputs, true)
                    .and_then(|_| room.end_run(id, count));
                match written {
                    Ok(()) => Ok(true),
                    Err(CollabError::UnknownCell { .. }) => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Leave a room (the person's JupyterLab drops the agent); nothing for a file.
    pub async fn close(self) {
        if let Doc::Room { room, .. } = self
            && let Ok(room) = Arc::try_unwrap(room)
        {
            room.close().await;
        }
    }
}
