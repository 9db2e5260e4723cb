//! Kernelspecs found on this machine: the spec that runs ipykernel from an interpreter or venv
//! (checked for ipykernel, with the install command when it lacks it), a named kernelspec,
//! the default (a `.venv` in the session's cwd, else `python3`, else the first found), and the
//! spec of a kernel adopted from its connection file.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::kernel::KernelSpec;
use crate::kernel::advice;
use crate::kernel::discovery::KernelSearch;
use crate::session::{SessionError, StartFailure};

/// Interpreters known to import ipykernel (the probe costs a Python start-up).
#[derive(Default)]
pub struct IpykernelCache(Mutex<HashSet<PathBuf>>);

impl IpykernelCache {
    /// [`check_ipykernel`], remembering interpreters that passed.
    pub async fn check(&self, interpreter: &Path) -> Result<(), SessionError> {
        if lock(&self.0).contains(interpreter) {
            return Ok(());
        }
        check_ipykernel(interpreter).await?;
        lock(&self.0).insert(interpreter.to_path_buf());
        Ok(())
    }
}

/// The spec that runs ipykernel from `python` (an interpreter or a venv directory, relative
/// to `cwd`), which must exist and import ipykernel.
/// Errors: `KERNEL_NOT_FOUND` (no such interpreter), `KERNEL_START_FAILED` (no ipykernel: the
/// message has the install command).
pub async fn python(
    cache: &IpykernelCache,
    python: &Path,
    cwd: &Path,
) -> Result<KernelSpec, SessionError> {
    let path = if python.is_relative() {
        cwd.join(python)
    } else {
        python.to_path_buf()
    };
    let interpreter = if path.is_dir() {
        path.join("bin").join("python")
    } else {
        path
    };
    if !interpreter.exists() {
        return Err(SessionError::KernelNotFound {
            message: format!(
                "Python interpreter '{}' does not exist. Pass an interpreter path or a venv directory.",
                interpreter.display()
            ),
            details: json!({"python": interpreter}),
        });
    }
    cache.check(&interpreter).await?;
    Ok(python_spec(&interpreter))
}

/// The spec when nothing is named: a `.venv` in the session's cwd that has ipykernel, else
/// the default kernelspec (`python3` if installed, else the first found).
/// Errors: `KERNEL_NOT_FOUND` naming the directories searched and how to get a kernel.
pub async fn default(
    cache: &IpykernelCache,
    search: &KernelSearch,
    cwd: &Path,
) -> Result<KernelSpec, SessionError> {
    let local = cwd.join(".venv").join("bin").join("python");
    if local.exists() && cache.check(&local).await.is_ok() {
        return Ok(python_spec(&local));
    }
    let Some(name) = default_kernel(search) else {
        return Err(SessionError::KernelNotFound {
            message: format!(
                "No kernelspecs found. Searched: {}.\n\nInstall ipykernel into a Python environment (`python3 -m venv ~/.venvs/kernels && ~/.venvs/kernels/bin/pip install ipykernel`), then select it, or:\n- {}",
                search
                    .dirs()
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                advice::select_env_hint()
            ),
            details: json!({"searched": search.dirs()}),
        });
    };
    kernelspec(search, &name)
}

/// The installed kernelspec `name`. Errors: `KERNEL_NOT_FOUND` naming the available ones
/// and the directories searched.
pub fn kernelspec(search: &KernelSearch, name: &str) -> Result<KernelSpec, SessionError> {
    search.find(name).map_err(|e| SessionError::KernelNotFound {
        message: e.to_string(),
        details: json!({
            "kernel": e.name, "available": e.available,
            "searched": e.searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        }),
    })
}

/// The kernel used when none is named: `python3` if installed, else the first found.
pub fn default_kernel(search: &KernelSearch) -> Option<String> {
    let specs = search.list();
    specs
        .iter()
        .find(|s| s.name == "python3")
        .or(specs.first())
        .map(|s| s.name.clone())
}

/// The exit status of [`IPYKERNEL_PROBE`] when Python ran and `import ipykernel` failed.
const NO_IPYKERNEL: i32 = 17;
/// Run with `-c`: exits 0 when ipykernel imports, [`NO_IPYKERNEL`] when it does not.
const IPYKERNEL_PROBE: &str =
    "import sys\ntry:\n    import ipykernel\nexcept Exception:\n    sys.exit(17)";

/// Fails with the exact install command unless `interpreter` can import ipykernel.
/// Errors: `KERNEL_START_FAILED` with that command for a Python without ipykernel;
/// `INVALID_ARGUMENT` for a program that does not run as Python at all.
async fn check_ipykernel(interpreter: &Path) -> Result<(), SessionError> {
    let probe = tokio::process::Command::new(interpreter)
        .args(["-c", IPYKERNEL_PROBE])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    let status = tokio::time::timeout(Duration::from_secs(30), probe).await;
    match status {
        Ok(Ok(s)) if s.success() => Ok(()),
        Ok(Ok(s)) if s.code() == Some(NO_IPYKERNEL) => {
            Err(SessionError::KernelStartFailed(StartFailure::NoIpykernel {
                python: interpreter.to_path_buf(),
                has_uv: which::which("uv").is_ok(),
            }))
        }
        other => {
            let what = match other {
                Ok(Ok(s)) => format!("`{} -c …` ended with {s}", interpreter.display()),
                Ok(Err(e)) => format!("it cannot be run: {e}"),
                Err(_) => "it did not finish within 30 s".into(),
            };
            Err(SessionError::InvalidArgument(format!(
                "{} does not run as a Python interpreter ({what}). Give `python` the path of a Python executable or of a virtual environment.",
                interpreter.display()
            )))
        }
    }
}

/// The spec and launcher of a session adopting the kernel of `file` (relative to `cwd`).
/// Errors: `KERNEL_NOT_FOUND` for a missing or unreadable file.
pub fn adopted(
    file: &Path,
    cwd: &Path,
    timeout: Duration,
) -> Result<(KernelSpec, Arc<dyn crate::kernel::KernelLauncher>), SessionError> {
    let path = if file.is_relative() {
        cwd.join(file)
    } else {
        file.to_path_buf()
    };
    let info = crate::kernel::adopted::read_connection_file(&path).map_err(|e| {
        SessionError::KernelNotFound {
            message: format!("{e}. Pass the connection file of a running kernel (jupyter --runtime-dir lists where they are)."),
            details: json!({"connection_file": path}),
        }
    })?;
    let name = if info.kernel_name.is_empty() {
        "adopted".to_string()
    } else {
        info.kernel_name.clone()
    };
    let spec = KernelSpec {
        name: name.clone(),
        resource_dir: PathBuf::new(),
        argv: Vec::new(),
        display_name: format!("{name} (adopted from {})", path.display()),
        language: String::new(),
        interrupt_mode: crate::kernel::InterruptMode::Message,
        env: BTreeMap::new(),
        metadata: serde_json::Value::Object(Default::default()),
    };
    let launcher = crate::kernel::adopted::AdoptLauncher {
        connection_file: path,
        timeout,
    };
    Ok((spec, Arc::new(launcher)))
}

/// A kernelspec that runs ipykernel from `interpreter`.
fn python_spec(interpreter: &Path) -> KernelSpec {
    KernelSpec {
        name: "python3".into(),
        resource_dir: PathBuf::new(),
        argv: vec![
            interpreter.display().to_string(),
            "-m".into(),
            "ipykernel_launcher".into(),
            "-f".into(),
            "{connection_file}".into(),
        ],
        display_name: format!("Python ({})", interpreter.display()),
        language: "python".into(),
        interrupt_mode: Default::default(),
        env: BTreeMap::new(),
        metadata: serde_json::Value::Object(Default::default()),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
