//! Which kernelspec a `create_session` launches: an interpreter or venv given as `python`
//! (checked for ipykernel, with the install command when it lacks it), a named environment, a
//! named kernelspec, a `.venv` in the session's cwd, or the default; and the spec of a kernel
//! adopted from its connection file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::kernel::KernelSpec;
use crate::kernel::advice;
use crate::registry::{CreateRequest, Registry, lock};
use crate::session::error::SessionError;

impl Registry {
    /// The kernelspec to launch: from `python` (an interpreter or venv, which must have
    /// ipykernel), else the named kernel, else a `.venv` in the session's cwd that has ipykernel,
    /// else the default kernel.
    pub(in crate::registry) async fn resolve_spec(
        &self,
        req: &CreateRequest,
        cwd: &std::path::Path,
    ) -> Result<KernelSpec, SessionError> {
        if let Some(python) = &req.python {
            let mut path = PathBuf::from(python);
            if path.is_relative() {
                path = cwd.join(path);
            }
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
            self.check_ipykernel(&interpreter).await?;
            return Ok(python_spec(&interpreter));
        }
        if req.kernel.is_none() {
            let local = cwd.join(".venv").join("bin").join("python");
            if local.exists() && self.check_ipykernel(&local).await.is_ok() {
                return Ok(python_spec(&local));
            }
        }
        let name = match &req.kernel {
            Some(k) => k.clone(),
            None => self.default_kernel().ok_or_else(|| SessionError::KernelNotFound {
                message: format!(
                    "No kernelspecs found. Searched: {}.\n\nInstall ipykernel into a Python environment (`python3 -m venv ~/.venvs/kernels && ~/.venvs/kernels/bin/pip install ipykernel`), then select it, or:\n- {}",
                    self.search.dirs().iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
                    advice::select_env_hint()
                ),
                details: json!({"searched": self.search.dirs()}),
            })?,
        };
        self.search.find(&name).map_err(|e| SessionError::KernelNotFound {
            message: e.to_string(),
            details: json!({
                "kernel": e.name, "available": e.available,
                "searched": e.searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            }),
        })
    }

    /// `req` with a named environment turned into its interpreter, and that name.
    /// Errors: `INVALID_ARGUMENT` (combined with `kernel` or `python`), `KERNEL_NOT_FOUND`
    /// (not registered; the message lists the registered names), `IO_ERROR`.
    pub(in crate::registry) async fn apply_environment(
        &self,
        mut req: CreateRequest,
    ) -> Result<(CreateRequest, Option<String>), SessionError> {
        let Some(name) = req.environment.take() else {
            return Ok((req, None));
        };
        if req.kernel.is_some() || req.python.is_some() {
            return Err(SessionError::InvalidArgument(
                "Give one of `environment`, `kernel` or `python`, not several.".into(),
            ));
        }
        let env = self.environments.get(&name).await?;
        req.python = Some(env.python.display().to_string());
        Ok((req, Some(name)))
    }

    /// [`check_ipykernel`], remembering interpreters that passed.
    pub(in crate::registry) async fn check_ipykernel(
        &self,
        interpreter: &std::path::Path,
    ) -> Result<(), SessionError> {
        if lock(&self.ipykernel_ok).contains(interpreter) {
            return Ok(());
        }
        check_ipykernel(interpreter).await?;
        lock(&self.ipykernel_ok).insert(interpreter.to_path_buf());
        Ok(())
    }
}

/// Fails with the exact install command unless `interpreter` can import ipykernel.
async fn check_ipykernel(interpreter: &std::path::Path) -> Result<(), SessionError> {
    let probe = tokio::process::Command::new(interpreter)
        .args(["-c", "import ipykernel"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    let ok = matches!(tokio::time::timeout(Duration::from_secs(30), probe).await, Ok(Ok(s)) if s.success());
    if ok {
        return Ok(());
    }
    let has_uv = which::which("uv").is_ok();
    Err(SessionError::KernelStartFailed {
        message: advice::missing_ipykernel(interpreter, has_uv),
        details: json!({"python": interpreter, "install_command": advice::install_command(interpreter)}),
    })
}

/// The spec and launcher of a session adopting the kernel of `file` (relative to `cwd`).
/// Errors: `INVALID_ARGUMENT` with `kernel`/`python`/`env`, `KERNEL_NOT_FOUND` for a missing file.
pub(in crate::registry) fn adopted_spec(
    req: &CreateRequest,
    file: &std::path::Path,
    cwd: &std::path::Path,
    timeout: Duration,
) -> Result<(KernelSpec, Arc<dyn crate::kernel::KernelLauncher>), SessionError> {
    if req.kernel.is_some() || req.python.is_some() || !req.env.is_empty() {
        return Err(SessionError::InvalidArgument(
            "connection_file adopts a running kernel: give no kernel, python or env with it."
                .into(),
        ));
    }
    let path = if file.is_relative() {
        cwd.join(file)
    } else {
        file.to_path_buf()
    };
    let info = crate::kernel::adopted::read_connection_file(&path).map_err(|message| {
        SessionError::KernelNotFound {
            message: format!("{message}. Pass the connection file of a running kernel (jupyter --runtime-dir lists where they are)."),
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
fn python_spec(interpreter: &std::path::Path) -> KernelSpec {
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
