//! A notebook file kernel-mcp works on: what it last read or wrote ([`NotebookFile::base`]),
//! and every change made through it written back so that nothing a person wrote is lost.
//!
//! A change ([`NotebookFile::change`]) is applied to the notebook as kernel-mcp last saw it,
//! then merged cell by cell ([`super::merge`]) with the file as it is on disk now, so a
//! person's save in between (from JupyterLab, an editor, git) is kept. When both changed the
//! same cell, nothing is written over the person's file: the agent's version goes to a file
//! beside it (`NAME.kernel-mcp-N.ipynb`) and the error names the cells and that file. Writes
//! replace the file atomically (a temp file renamed over it: readers see the old or the new
//! notebook, never half), keep its permission bits, write through a symlink to its target, and
//! happen only when the text changed. Reads refuse what is not a regular file (a FIFO, a
//! directory, a device) and anything over [`MAX_NOTEBOOK_BYTES`] before reading it.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::merge::{Conflict, merge};
use super::model::{MAX_NOTEBOOK_BYTES, ModelError, Notebook};
use crate::ops::files::{self, FileError, FileMode, Reach};

/// Why a notebook could not be read, changed or written. The file is left as it was.
#[derive(Debug, thiserror::Error)]
pub enum NotebookError {
    /// The file is not a notebook kernel-mcp can work on.
    #[error("{} cannot be opened as a notebook: {source}", .path.display())]
    Invalid {
        path: PathBuf,
        #[source]
        source: ModelError,
    },
    /// Reading or writing failed (missing, a FIFO or directory, too large, permissions…).
    #[error(transparent)]
    File(#[from] FileError),
    /// Both the agent and someone else changed the same cells since kernel-mcp last read the
    /// file. The file keeps the other change; the agent's version is in `kept`.
    #[error(
        "{} was changed by someone else since it was last read, in the same places as this change: {}. \
         The file keeps their version; this change was saved to {} instead. Read the cells again \
         (read_cells) and redo the change on what is there now.",
        .path.display(), .cells.join(", "), .kept.display()
    )]
    Conflict {
        path: PathBuf,
        cells: Vec<String>,
        kept: PathBuf,
    },
}

/// A notebook file and what kernel-mcp last read or wrote of it.
#[derive(Debug)]
pub struct NotebookFile {
    path: PathBuf,
    /// What the server may touch for the bound session (a sandboxed session's grants).
    reach: Reach,
    base: Notebook,
    /// SHA-256 of the bytes `base` was read from or written as.
    base_hash: [u8; 32],
}

/// What [`NotebookFile::change`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// False when the merged text was what the file already held (nothing was written).
    pub wrote: bool,
    /// True when someone else's change on disk was merged in.
    pub merged_theirs: bool,
}

impl NotebookFile {
    /// Read the notebook at `path`.
    ///
    /// Errors: [`NotebookError::File`] (not found, not a regular file, over 100 MiB,
    /// permissions) or [`NotebookError::Invalid`].
    pub async fn open(path: &Path, reach: Reach) -> Result<NotebookFile, NotebookError> {
        let bytes = files::read_capped_in(&reach, path, MAX_NOTEBOOK_BYTES).await?;
        let base = parse(path, &bytes)?;
        Ok(NotebookFile {
            path: path.to_path_buf(),
            reach,
            base,
            base_hash: hash(&bytes),
        })
    }

    /// Create `path` holding `nb` (a new notebook); fails if the file appeared meanwhile
    /// (the caller checked it did not exist).
    pub async fn create(
        path: &Path,
        nb: Notebook,
        reach: Reach,
    ) -> Result<NotebookFile, NotebookError> {
        let text = nb.to_text();
        files::write_file_in(&reach, path, text.clone().into_bytes(), FileMode::Keep).await?;
        Ok(NotebookFile {
            path: path.to_path_buf(),
            reach,
            base: nb,
            base_hash: hash(text.as_bytes()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The notebook as kernel-mcp last read or wrote it.
    pub fn base(&self) -> &Notebook {
        &self.base
    }

    /// Read the file again; returns true when it changed on disk since the last read or write
    /// (the base is then the file's new content).
    ///
    /// Errors: as [`Self::open`]; the base is then unchanged.
    pub async fn refresh(&mut self) -> Result<bool, NotebookError> {
        let bytes = files::read_capped_in(&self.reach, &self.path, MAX_NOTEBOOK_BYTES).await?;
        let h = hash(&bytes);
        if h == self.base_hash {
            return Ok(false);
        }
        self.base = parse(&self.path, &bytes)?;
        self.base_hash = h;
        Ok(true)
    }

    /// Apply `f` to the notebook as last seen, merge it with the file as it is now, and write
    /// the result if it differs. `f`'s error leaves everything as it was.
    ///
    /// Errors: `f`'s (as `E`), or a [`NotebookError`] as `E` (through `From`): the file on
    /// disk is no longer a notebook, a conflict (the agent's version kept beside it), or the
    /// read or write failed.
    pub async fn change<T, E>(
        &mut self,
        f: impl FnOnce(&mut Notebook) -> Result<T, E>,
    ) -> Result<(T, Written), E>
    where
        E: From<NotebookError>,
    {
        let disk = files::read_capped_in(&self.reach, &self.path, MAX_NOTEBOOK_BYTES)
            .await
            .map_err(NotebookError::from)?;
        let disk_hash = hash(&disk);
        let theirs_changed = disk_hash != self.base_hash;
        let theirs = match theirs_changed {
            true => Some(parse(&self.path, &disk)?),
            false => None,
        };
        let mut ours = self.base.clone();
        let out = f(&mut ours)?;
        // Nothing saved since the last read or write: the change is the result as it is (the
        // merge with an unchanged side is the other side), without the merge's copies of
        // every cell, which are most of a cell's write in `execute_cells`.
        let Some(theirs) = theirs else {
            return self.write(&disk, ours, out, false).await;
        };
        let merged = match merge(&self.base, &ours, &theirs) {
            Ok(m) => m,
            Err(Conflict { cells }) => {
                let kept = self.keep_ours(&ours).await?;
                self.base = theirs;
                self.base_hash = disk_hash;
                return Err(NotebookError::Conflict {
                    path: self.path.clone(),
                    cells,
                    kept,
                }
                .into());
            }
        };
        self.write(&disk, merged, out, true).await
    }

    /// Write `merged` over the file (whose bytes were `disk`) when its text differs, and make
    /// it the base.
    async fn write<T, E>(
        &mut self,
        disk: &[u8],
        merged: Notebook,
        out: T,
        merged_theirs: bool,
    ) -> Result<(T, Written), E>
    where
        E: From<NotebookError>,
    {
        let text = merged.to_text();
        let text_hash = hash(text.as_bytes());
        let wrote = text.as_bytes() != disk;
        if wrote {
            files::write_file_in(&self.reach, &self.path, text.into_bytes(), FileMode::Keep)
                .await
                .map_err(NotebookError::from)?;
        }
        self.base = merged;
        self.base_hash = text_hash;
        let written = Written {
            wrote,
            merged_theirs,
        };
        Ok((out, written))
    }

    /// Write the agent's version of a conflicting change beside the notebook, in the first
    /// free `NAME.kernel-mcp-N.ipynb`; returns its path.
    async fn keep_ours(&self, ours: &Notebook) -> Result<PathBuf, NotebookError> {
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "notebook".into());
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut n = 1;
        let kept = loop {
            let candidate = dir.join(format!("{stem}.kernel-mcp-{n}.ipynb"));
            if tokio::fs::symlink_metadata(&candidate).await.is_err() {
                break candidate;
            }
            n += 1;
        };
        files::write_file_in(
            &self.reach,
            &kept,
            ours.to_text().into_bytes(),
            FileMode::KeepNewPrivate,
        )
        .await?;
        Ok(kept)
    }
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Notebook, NotebookError> {
    Notebook::parse(bytes).map_err(|source| NotebookError::Invalid {
        path: path.to_path_buf(),
        source,
    })
}

fn hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
