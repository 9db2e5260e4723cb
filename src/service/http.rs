//! The service's HTTP face (`kernel-mcp service --http ADDR:PORT`): streamable HTTP at `/mcp`
//! on the service's sessions, always behind a token, and OAuth access tokens
//! beside it when configured (docs/auth.md).
//!
//! The token is, in this order: the file of `--token-file`; `KERNEL_MCP_TOKEN` (or `--token`,
//! which other local users can read in the process list, so it warns); else one the service
//! generates and keeps 0600 next to the socket (`<socket>.token`, reused by the next start;
//! delete it for a new one). While the face is up, `<socket>.http` (JSON, 0600) says where it
//! listens and where its token is, for `kernel-mcp token` and `kernel-mcp doctor`; it is
//! removed when the service stops.

use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::paths::ServicePaths;
use crate::auth::oauth::OAuth;
use crate::auth::{Token, TokenError};

/// Where the face's token comes from, as the command line and environment gave it.
#[derive(Debug, Clone)]
pub enum TokenChoice {
    /// `--token-file PATH` (or `KERNEL_MCP_TOKEN_FILE`).
    File(PathBuf),
    /// The token itself: from `KERNEL_MCP_TOKEN`, or from `--token` (`on_command_line`).
    Given { token: Token, on_command_line: bool },
    /// None given: generate one (or reuse the one generated before) next to the socket.
    Generate,
}

/// How the service serves HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (port 0: one the OS picks; the record says which).
    pub addr: SocketAddr,
    pub token: TokenChoice,
    /// OAuth access tokens accepted beside the token, when configured.
    pub oauth: Option<std::sync::Arc<OAuth>>,
}

/// What `<socket>.http` holds while the face is up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRecord {
    /// `http://ADDR:PORT/mcp`, with the port actually bound.
    pub url: String,
    /// The service's pid.
    pub pid: u32,
    /// The file that holds the token; `None` when it came from the environment or the
    /// command line (it is then nowhere on disk).
    pub token_file: Option<PathBuf>,
    /// `generated`, `file`, `environment` or `command line`.
    pub token_source: String,
    /// The OAuth issuer whose access tokens the face accepts, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_issuer: Option<String>,
    /// The audience (this resource's URL) those tokens must name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_audience: Option<String>,
}

/// The face's token and where it came from, per `choice`.
///
/// # Errors
/// [`TokenError`]: an unreadable or empty `--token-file`, or a generated token that cannot
/// be written.
pub fn resolve_token(
    paths: &ServicePaths,
    choice: &TokenChoice,
) -> Result<(Token, Option<PathBuf>, &'static str), TokenError> {
    match choice {
        TokenChoice::File(path) => {
            let token = Token::read_file(path)?;
            if std::fs::metadata(path).is_ok_and(|m| m.mode() & 0o077 != 0) {
                tracing::warn!(
                    file = %path.display(),
                    "other local users may read the token file; `chmod 600` it"
                );
            }
            Ok((token, Some(path.clone()), "file"))
        }
        TokenChoice::Given {
            token,
            on_command_line,
        } => {
            if *on_command_line {
                tracing::warn!(
                    "the token was given with --token: other local users can read it in the process list (ps); use --token-file PATH or KERNEL_MCP_TOKEN instead"
                );
                Ok((token.clone(), None, "command line"))
            } else {
                Ok((token.clone(), None, "environment"))
            }
        }
        TokenChoice::Generate => Ok((
            generated_token(&paths.token_file)?,
            Some(paths.token_file.clone()),
            "generated",
        )),
    }
}

/// The token in `file` when it is one we wrote (ours, 0600, not empty); otherwise a new one,
/// written there 0600 (atomically: a temporary file in the same directory, renamed).
fn generated_token(file: &Path) -> Result<Token, TokenError> {
    let ours = crate::trust::our_uid();
    let usable = std::fs::symlink_metadata(file)
        .is_ok_and(|m| m.is_file() && m.uid() == ours && m.mode() & 0o077 == 0);
    if usable && let Ok(t) = Token::read_file(file) {
        return Ok(t);
    }
    let token = Token::generate();
    write_private(file, format!("{}\n", token.expose()).as_bytes()).map_err(|source| {
        TokenError::Write {
            path: file.to_path_buf(),
            source,
        }
    })?;
    tracing::info!(file = %file.display(), "generated the HTTP token");
    Ok(token)
}

/// Write `<socket>.http` for the face listening at `bound`.
/// Errors: the file cannot be written.
pub fn write_record(paths: &ServicePaths, record: &HttpRecord) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    write_private(&paths.http_record, &json)
}

/// The record of the face that is up, if any: present, and its pid is the running service.
pub fn read_record(paths: &ServicePaths) -> Option<HttpRecord> {
    let record: HttpRecord =
        serde_json::from_slice(&std::fs::read(&paths.http_record).ok()?).ok()?;
    let running = paths.running_pid();
    (running == Some(record.pid as i32)).then_some(record)
}

/// Remove the record (the face is down).
pub fn remove_record(paths: &ServicePaths) {
    let _ = std::fs::remove_file(&paths.http_record);
}

/// Replace `path` with `bytes`, mode 0600, atomically.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_is_written_0600_and_reused_by_the_next_start() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = ServicePaths::new(tmp.path().join("service.sock"));
        let (a, file, source) = resolve_token(&paths, &TokenChoice::Generate).unwrap();
        assert_eq!(source, "generated");
        assert_eq!(file.as_deref(), Some(paths.token_file.as_path()));
        let meta = std::fs::metadata(&paths.token_file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let (b, _, _) = resolve_token(&paths, &TokenChoice::Generate).unwrap();
        assert!(a.matches(b.expose()), "reused");
        // One that others could read is not reused: it is replaced.
        std::fs::set_permissions(&paths.token_file, std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let (c, _, _) = resolve_token(&paths, &TokenChoice::Generate).unwrap();
        assert!(!a.matches(c.expose()));
        let meta = std::fs::metadata(&paths.token_file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
    }

    #[test]
    fn a_record_counts_only_while_its_service_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = ServicePaths::new(tmp.path().join("service.sock"));
        let record = HttpRecord {
            url: "http://127.0.0.1:1/mcp".into(),
            pid: std::process::id(),
            token_file: None,
            token_source: "environment".into(),
            oauth_issuer: None,
            oauth_audience: None,
        };
        write_record(&paths, &record).unwrap();
        assert_eq!(read_record(&paths), None, "no alive lock names us");
        std::fs::write(&paths.alive_lock, format!("{}\n", std::process::id())).unwrap();
        assert_eq!(read_record(&paths), Some(record));
        remove_record(&paths);
        assert_eq!(read_record(&paths), None);
    }
}
