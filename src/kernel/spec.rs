//! A kernelspec: `kernel.json` plus the directory it was found in.
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/kernels.html#kernel-specs>

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// How to interrupt a kernel (`interrupt_mode` in kernel.json, default `signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum InterruptMode {
    /// SIGINT to the kernel's process group.
    #[default]
    Signal,
    /// `interrupt_request` on the control channel.
    Message,
}

/// A parsed kernelspec. Every field but `argv` is optional in kernel.json; unknown keys are ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelSpec {
    /// Directory name, lower-cased.
    pub name: String,
    /// The directory holding kernel.json.
    pub resource_dir: PathBuf,
    pub argv: Vec<String>,
    pub display_name: String,
    pub language: String,
    pub interrupt_mode: InterruptMode,
    pub env: BTreeMap<String, String>,
    pub metadata: Value,
}

/// Why a kernel.json could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("invalid kernel.json at {path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
}

impl KernelSpec {
    /// Read `<resource_dir>/kernel.json`. `name` is lower-cased.
    pub fn load(name: &str, resource_dir: &Path) -> Result<KernelSpec, SpecError> {
        todo!()
    }
}
