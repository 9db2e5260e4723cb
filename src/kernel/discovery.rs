//! Kernelspec discovery, in jupyter_client's order (DESIGN §2).

use std::path::{Path, PathBuf};

use super::spec::KernelSpec;

/// No kernelspec of that name: says what exists and where we looked.
#[derive(Debug, Clone, thiserror::Error)]
#[error("Kernel '{name}' not found. Available: {}. Searched: {}", .available.join(", "), .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
pub struct KernelNotFound {
    pub name: String,
    pub available: Vec<String>,
    pub searched: Vec<PathBuf>,
}

/// The ordered list of `.../kernels` directories to search.
#[derive(Debug, Clone)]
pub struct KernelSearch {
    dirs: Vec<PathBuf>,
}

impl KernelSearch {
    /// `extra_first` (from `--kernelspec-dir`) first, then `$JUPYTER_PATH` entries, the user data dir
    /// and the Python environment prefix `env_prefix` (swapped when it is a venv), `/usr/local/share/jupyter`,
    /// `/usr/share/jupyter` — each + `/kernels` — and finally `project_dir` (the project's own `kernelspecs/`).
    pub fn new(extra_first: &[PathBuf], env_prefix: Option<&Path>, project_dir: Option<&Path>) -> KernelSearch {
        todo!()
    }
    /// The directories, in search order (existing or not).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
    /// Every kernelspec, first hit per name wins, sorted by name. Unreadable specs are skipped (with a tracing warning).
    pub fn list(&self) -> Vec<KernelSpec> {
        todo!()
    }
    /// The kernelspec `name` (case-insensitive).
    pub fn find(&self, name: &str) -> Result<KernelSpec, KernelNotFound> {
        todo!()
    }
}
