//! Running a Python interpreter once to learn what it is: its version and prefix, and whether
//! it can import ipykernel (bounded in time and output, killed when abandoned); turning a
//! `python` argument (interpreter or venv) into an interpreter path; the ipykernel install
//! command for it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::session::SessionError;

/// Longest an interpreter probe may take (a cold start on a slow disk, plus `import ipykernel`).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// Probe output read at most (stdout, stderr).
const MAX_PROBE_OUTPUT: u64 = 64 * 1024;
/// What one run of an interpreter told about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub version: String,
    pub prefix: String,
    pub has_ipykernel: bool,
    /// Why `import ipykernel` failed.
    pub ipykernel_error: Option<String>,
}

/// `python` as an absolute interpreter path: a venv or prefix directory becomes its
/// `bin/python`. Symlinks are kept (a venv's `bin/python` links to the base interpreter, and
/// following it would lose the venv). Errors: `INVALID_ARGUMENT` when nothing is there.
pub fn resolve_interpreter(python: &str, base: &Path) -> Result<PathBuf, SessionError> {
    if python.trim().is_empty() {
        return Err(SessionError::InvalidArgument(
            "python is empty: pass an interpreter path or a venv directory.".into(),
        ));
    }
    let mut path = PathBuf::from(python);
    if path.is_relative() {
        path = base.join(path);
    }
    let path = std::path::absolute(&path).unwrap_or(path);
    let interpreter = if path.is_dir() {
        ["python", "python3"]
            .iter()
            .map(|n| path.join("bin").join(n))
            .find(|p| p.exists())
            .unwrap_or_else(|| path.join("bin").join("python"))
    } else {
        path
    };
    if !interpreter.exists() {
        return Err(SessionError::InvalidArgument(format!(
            "Python interpreter '{}' does not exist. Pass an interpreter path or a venv directory.",
            interpreter.display()
        )));
    }
    Ok(interpreter)
}

/// The command that installs ipykernel into `interpreter`'s environment.
pub fn install_hint(interpreter: &Path) -> String {
    let exe = interpreter.display();
    if which::which("uv").is_ok() {
        format!("{exe} -m pip install ipykernel (or: uv pip install --python {exe} ipykernel)")
    } else {
        format!("{exe} -m pip install ipykernel")
    }
}

/// What the probe prints on its last line: version, prefix, and whether ipykernel imports.
const PROBE_CODE: &str = r#"import sys, json
r = {"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "prefix": sys.prefix}
try:
    import ipykernel
    r["ipykernel"] = True
except BaseException as e:
    r["ipykernel"] = False
    r["error"] = ("%s: %s" % (type(e).__name__, e))[:300]
sys.stdout.write("\n" + json.dumps(r) + "\n")
"#;

/// Run `interpreter` once (at most [`PROBE_TIMEOUT`], output capped, killed when abandoned).
/// Errors: `INVALID_ARGUMENT` saying why it did not run.
pub async fn probe(interpreter: &Path) -> Result<Probe, SessionError> {
    let unusable = |why: String| SessionError::PythonUnusable {
        python: interpreter.display().to_string(),
        message: format!("'{}' {why}", interpreter.display()),
    };
    let mut child = tokio::process::Command::new(interpreter)
        .args(["-c", PROBE_CODE])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| unusable(format!("cannot be run: {e}.")))?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let run = async {
        let read_out = async {
            if let Some(s) = stdout {
                let _ = s.take(MAX_PROBE_OUTPUT).read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr {
                let _ = s.take(MAX_PROBE_OUTPUT).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        child.wait().await
    };
    let status = match tokio::time::timeout(PROBE_TIMEOUT, run).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(unusable(format!("could not be waited for: {e}."))),
        Err(_) => {
            return Err(unusable(format!(
                "did not finish a trivial script within {} s.",
                PROBE_TIMEOUT.as_secs()
            )));
        }
    };
    let text = String::from_utf8_lossy(&out);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let parsed: Option<serde_json::Value> = serde_json::from_str(last).ok();
    match parsed {
        Some(v) if status.success() && v["version"].is_string() => Ok(Probe {
            version: v["version"].as_str().unwrap_or_default().to_string(),
            prefix: v["prefix"].as_str().unwrap_or_default().to_string(),
            has_ipykernel: v["ipykernel"] == json!(true),
            ipykernel_error: v["error"].as_str().map(String::from),
        }),
        _ => {
            let stderr = String::from_utf8_lossy(&err);
            let tail: Vec<&str> = stderr.trim_end().lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(unusable(format!(
                "does not run as a Python 3 interpreter ({status}){}",
                if tail.is_empty() {
                    ".".to_string()
                } else {
                    format!(": {}", tail.join(" | "))
                }
            )))
        }
    }
}
