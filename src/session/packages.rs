//! Installing packages into a Python session's own interpreter: `uv pip install --python <exe>`
//! when `uv` is on PATH, else `<exe> -m pip install`, bounded in time and output.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::error::SessionError;

/// Longest an install may take.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept from the installer (its tail).
const OUTPUT_TAIL_BYTES: usize = 4000;

/// What an install did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InstallOutcome {
    pub ok: bool,
    /// The command that ran.
    pub command: Vec<String>,
    /// The tail of its combined stdout and stderr.
    pub output: String,
    /// True when an installed package replaced one that may already be imported.
    pub restart_recommended: bool,
}

/// Reject specifiers that would be read as installer options (e.g. `--index-url`).
pub fn validate(packages: &[String]) -> Result<(), SessionError> {
    if packages.is_empty() {
        return Err(SessionError::InvalidArgument(
            "packages is empty: name at least one package.".into(),
        ));
    }
    if let Some(bad) = packages
        .iter()
        .find(|p| p.trim().is_empty() || p.trim_start().starts_with('-'))
    {
        return Err(SessionError::InvalidArgument(format!(
            "{bad:?} is not a package requirement (options are not accepted)."
        )));
    }
    Ok(())
}

/// Install `packages` for the interpreter `python`.
pub async fn install(python: &Path, packages: &[String]) -> Result<InstallOutcome, SessionError> {
    let mut command: Vec<String> = match which::which("uv") {
        Ok(uv) => vec![
            uv.display().to_string(),
            "pip".into(),
            "install".into(),
            "--python".into(),
            python.display().to_string(),
        ],
        Err(_) => vec![
            python.display().to_string(),
            "-m".into(),
            "pip".into(),
            "install".into(),
            "--disable-pip-version-check".into(),
            "--no-input".into(),
        ],
    };
    command.extend(packages.iter().cloned());
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            SessionError::io(
                Path::new(&command[0]),
                format!("cannot run {}: {e}", command[0]),
            )
        })?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let collect = async {
        let mut a = Vec::new();
        let mut b = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut a).await;
        }
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut b).await;
        }
        a.extend_from_slice(&b);
        a
    };
    let run = async {
        let (bytes, status) = tokio::join!(collect, child.wait());
        (bytes, status)
    };
    let (bytes, status) = tokio::time::timeout(INSTALL_TIMEOUT, run)
        .await
        .map_err(|_| {
            SessionError::LimitExceeded(format!(
                "The install did not finish within {} s and was stopped.",
                INSTALL_TIMEOUT.as_secs()
            ))
        })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut start = text.len().saturating_sub(OUTPUT_TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    Ok(InstallOutcome {
        ok: status.map(|s| s.success()).unwrap_or(false),
        command,
        restart_recommended: text.contains("Successfully uninstalled")
            || text.contains("Uninstalled "),
        output: text[start..].to_string(),
    })
}
