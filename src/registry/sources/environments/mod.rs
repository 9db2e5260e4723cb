//! Named Python environments: a name → interpreter registry the user keeps across server
//! lifetimes, so `create_session(environment=NAME)` launches ipykernel from a known venv.
//!
//! Registrations live in `$XDG_CONFIG_HOME/kernel-mcp/environments.json` (else
//! `~/.config/kernel-mcp/environments.json`). Every change is a read-modify-write under an
//! advisory lock (`environments.json.lock`, waited for at most [`LOCK_WAIT`]) and lands with
//! an atomic rename, so a server and the `kernel-mcp env` command can change it at the same
//! time. The file is read again on every use: a registration made by the CLI is seen by a
//! running server at once. Removing a registration never touches running sessions (they
//! hold their interpreter's path, not the name).
//!
//! Registering and validating run the interpreter once ([`probe`]): bounded in time
//! ([`PROBE_TIMEOUT`]) and output, on tokio's process machinery, never blocking the runtime.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::session::SessionError;

mod probe;
pub use probe::{PROBE_TIMEOUT, Probe, install_hint, probe, resolve_interpreter};

/// Longest a change waits for another process holding the registry's lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);
/// Registrations kept at most.
pub const MAX_ENVIRONMENTS: usize = 256;
/// Largest registry file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The file's format version.
const FORMAT_VERSION: u32 = 1;

/// One registered environment, as stored and as the tools return it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub name: String,
    /// The interpreter (absolute; a venv's `bin/python`, symlinks kept so the venv stays).
    pub python: PathBuf,
    /// `3.12.4`, as the interpreter reported it when last probed.
    pub python_version: String,
    /// Whether the interpreter could import ipykernel when last probed.
    pub has_ipykernel: bool,
    /// The command that installs ipykernel, when it is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hint: Option<String>,
    /// `sys.prefix` of the interpreter.
    #[serde(default)]
    pub prefix: String,
    /// RFC 3339.
    pub registered_at: String,
    /// RFC 3339: the last probe (registration or validation).
    pub checked_at: String,
}

/// The registry file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    environments: Vec<Environment>,
}

/// What `validate` found.
#[derive(Debug, Clone)]
pub struct Validation {
    /// The record, refreshed when the interpreter ran.
    pub env: Environment,
    /// The interpreter ran.
    pub runs: bool,
    /// Why a session cannot start from it (it does not run, or lacks ipykernel).
    pub problem: Option<String>,
}

impl Validation {
    /// A session can start from this environment.
    pub fn ok(&self) -> bool {
        self.runs && self.env.has_ipykernel
    }
}

/// Where registrations are kept.
#[derive(Debug, Clone)]
pub struct EnvironmentStore {
    /// `None`: neither `$XDG_CONFIG_HOME` nor `$HOME` is set.
    path: Option<PathBuf>,
}

impl EnvironmentStore {
    /// The store at `$XDG_CONFIG_HOME/kernel-mcp/environments.json`, else under `~/.config`.
    pub fn from_env() -> EnvironmentStore {
        let absolute = |v: std::ffi::OsString| {
            let p = PathBuf::from(v);
            p.is_absolute().then_some(p)
        };
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .and_then(absolute)
            .or_else(|| {
                std::env::var_os("HOME")
                    .and_then(absolute)
                    .map(|h| h.join(".config"))
            });
        EnvironmentStore {
            path: base.map(|b| b.join("kernel-mcp").join("environments.json")),
        }
    }

    /// A store at `path` (tests).
    pub fn at(path: PathBuf) -> EnvironmentStore {
        EnvironmentStore { path: Some(path) }
    }

    /// The registry file, when there is a config dir.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Every registration, sorted by name. Errors: `IO_ERROR` (unreadable or invalid file).
    pub async fn list(&self) -> Result<Vec<Environment>, SessionError> {
        let path = self.require_path()?;
        blocking(move || read_store(&path).map(|s| s.environments)).await
    }

    /// The registration `name`. Errors: `KERNEL_NOT_FOUND` listing the registered names.
    pub async fn get(&self, name: &str) -> Result<Environment, SessionError> {
        let all = self.list().await?;
        find(&all, name).cloned()
    }

    /// Register `python` (an interpreter or a venv directory; relative to `base`) as `name`,
    /// after running it once. An existing name is refreshed when it names the same
    /// interpreter, replaced when `replace`, else refused.
    /// Errors: `INVALID_ARGUMENT` (bad name, no such interpreter, it does not run, the name is
    /// taken), `LIMIT_EXCEEDED`, `IO_ERROR`.
    pub async fn register(
        &self,
        name: &str,
        python: &str,
        base: &Path,
        replace: bool,
    ) -> Result<(Environment, bool), SessionError> {
        validate_name(name)?;
        let path = self.require_path()?;
        let interpreter = resolve_interpreter(python, base)?;
        let probe = probe(&interpreter).await?;
        let now = now();
        let env = Environment {
            name: name.to_string(),
            install_hint: (!probe.has_ipykernel).then(|| install_hint(&interpreter)),
            python: interpreter,
            python_version: probe.version,
            has_ipykernel: probe.has_ipykernel,
            prefix: probe.prefix,
            registered_at: now.clone(),
            checked_at: now,
        };
        let stored = env.clone();
        blocking(move || {
            update_store(&path, |envs| {
                let replaced = match envs.iter().position(|e| e.name == stored.name) {
                    Some(i) if envs[i].python == stored.python || replace => {
                        envs.remove(i);
                        true
                    }
                    Some(i) => {
                        return Err(SessionError::InvalidArgument(format!(
                            "Environment '{}' is already registered for {}. Pass replace=true to point it at {}, or pick another name.",
                            stored.name,
                            envs[i].python.display(),
                            stored.python.display()
                        )));
                    }
                    None if envs.len() >= MAX_ENVIRONMENTS => {
                        return Err(SessionError::LimitExceeded(format!(
                            "{MAX_ENVIRONMENTS} environments are registered, the limit; remove one first."
                        )));
                    }
                    None => false,
                };
                envs.push(stored);
                Ok(replaced)
            })
        })
        .await
        .map(|replaced| (env, replaced))
    }

    /// Forget `name`. Running sessions are not touched. Errors: `KERNEL_NOT_FOUND`, `IO_ERROR`.
    pub async fn remove(&self, name: &str) -> Result<Environment, SessionError> {
        let path = self.require_path()?;
        let name = name.to_string();
        blocking(move || {
            update_store(&path, |envs| {
                match envs.iter().position(|e| e.name == name) {
                    Some(i) => Ok(envs.remove(i)),
                    None => find(envs, &name).cloned(),
                }
            })
        })
        .await
    }

    /// Run `name`'s interpreter again and record what it says now. When it no longer runs,
    /// the stored record is left as it was and the answer says why.
    /// Errors: `KERNEL_NOT_FOUND`, `IO_ERROR`.
    pub async fn validate(&self, name: &str) -> Result<Validation, SessionError> {
        let env = self.get(name).await?;
        let probe = match probe(&env.python).await {
            Ok(p) => p,
            Err(e) => {
                return Ok(Validation {
                    env,
                    runs: false,
                    problem: Some(e.to_string()),
                });
            }
        };
        let mut fresh = env.clone();
        fresh.python_version = probe.version;
        fresh.has_ipykernel = probe.has_ipykernel;
        fresh.prefix = probe.prefix;
        fresh.install_hint = (!probe.has_ipykernel).then(|| install_hint(&env.python));
        fresh.checked_at = now();
        let path = self.require_path()?;
        let stored = fresh.clone();
        blocking(move || {
            update_store(&path, |envs| {
                // Removed or re-pointed meanwhile: leave the newer registration alone.
                if let Some(e) = envs
                    .iter_mut()
                    .find(|e| e.name == stored.name && e.python == stored.python)
                {
                    *e = stored;
                }
                Ok(())
            })
        })
        .await?;
        let problem = probe
            .ipykernel_error
            .filter(|_| !fresh.has_ipykernel)
            .map(|why| {
                format!(
                    "'{}' cannot import ipykernel ({why}).",
                    fresh.python.display()
                )
            });
        Ok(Validation {
            env: fresh,
            runs: true,
            problem,
        })
    }

    fn require_path(&self) -> Result<PathBuf, SessionError> {
        self.path.clone().ok_or_else(|| {
            SessionError::Internal(
                "Neither XDG_CONFIG_HOME nor HOME is set, so there is no place to keep environments.".into(),
            )
        })
    }
}

/// The registration `name` in `envs`. Errors: `KERNEL_NOT_FOUND` listing the names.
fn find<'a>(envs: &'a [Environment], name: &str) -> Result<&'a Environment, SessionError> {
    envs.iter()
        .find(|e| e.name == name)
        .ok_or_else(|| SessionError::EnvironmentNotFound {
            name: name.to_string(),
            known: envs.iter().map(|e| e.name.clone()).collect(),
        })
}

/// 1-64 characters from `[A-Za-z0-9._-]`.
pub fn validate_name(name: &str) -> Result<(), SessionError> {
    if crate::session::ids::is_valid_name(name) {
        Ok(())
    } else {
        Err(SessionError::InvalidArgument(format!(
            "Invalid environment name {name:?}: use 1-64 characters from letters, digits, '.', '_' and '-'."
        )))
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Run a store operation on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, SessionError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(SessionError::Internal(format!("environment store: {e}"))))
}

/// The file's registrations; an absent file is an empty registry.
fn read_store(path: &Path) -> Result<StoreFile, SessionError> {
    let io =
        |e: std::io::Error| SessionError::io(path, format!("cannot read {}: {e}", path.display()));
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(StoreFile {
                version: FORMAT_VERSION,
                environments: Vec::new(),
            });
        }
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(SessionError::io(
            path,
            format!(
                "{} is larger than {MAX_FILE_BYTES} bytes; it is not a registry this program wrote.",
                path.display()
            ),
        ));
    }
    let mut store: StoreFile = serde_json::from_slice(&bytes).map_err(|e| {
        SessionError::io(
            path,
            format!(
                "{} is not a valid environment registry ({e}); fix it or move it away (registrations are lost then).",
                path.display()
            ),
        )
    })?;
    store.environments.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(store)
}

/// Read, change with `f` and write back atomically, under the registry's lock.
fn update_store<T>(
    path: &Path,
    f: impl FnOnce(&mut Vec<Environment>) -> Result<T, SessionError>,
) -> Result<T, SessionError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let io = |what: &str, e: std::io::Error| {
        SessionError::io(path, format!("cannot {what} {}: {e}", path.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
    let _lock = lock(&path.with_extension("json.lock"))?;
    let mut store = read_store(path)?;
    let out = f(&mut store.environments)?;
    store.version = FORMAT_VERSION;
    store.environments.sort_by(|a, b| a.name.cmp(&b.name));
    let mut bytes = serde_json::to_vec_pretty(&store)
        .map_err(|e| SessionError::Internal(format!("environment store: {e}")))?;
    bytes.push(b'\n');
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io("write", e))?;
    tmp.write_all(&bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| io("write", e))?;
    tmp.persist(path).map_err(|e| io("replace", e.error))?;
    Ok(out)
}

/// An exclusive advisory lock on `path`, waited for at most [`LOCK_WAIT`].
fn lock(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, SessionError> {
    use nix::fcntl::{Flock, FlockArg};
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| SessionError::io(path, format!("cannot open {}: {e}", path.display())))?;
    let start = Instant::now();
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(l),
            Err((f, _)) if start.elapsed() < LOCK_WAIT => {
                file = f;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((_, e)) => {
                return Err(SessionError::io(
                    path,
                    format!(
                        "another process has held {} for {} s ({e}); try again.",
                        path.display(),
                        LOCK_WAIT.as_secs()
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Environment {
        Environment {
            name: name.into(),
            python: PathBuf::from("/usr/bin/python3"),
            python_version: "3.12.0".into(),
            has_ipykernel: false,
            install_hint: Some("x".into()),
            prefix: "/usr".into(),
            registered_at: now(),
            checked_at: now(),
        }
    }

    #[test]
    fn changes_land_in_the_file_and_survive_a_reread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kernel-mcp").join("environments.json");
        update_store(&path, |envs| {
            envs.push(env("b"));
            envs.push(env("a"));
            Ok(())
        })
        .unwrap();
        let names: Vec<String> = read_store(&path)
            .unwrap()
            .environments
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        let err = update_store(&path, |envs| find(envs, "zz").map(|_| ())).unwrap_err();
        assert_eq!(err.code(), crate::session::ErrorCode::KernelNotFound);
        assert!(err.to_string().contains("a, b"), "{err}");
    }

    #[test]
    fn a_corrupted_registry_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("environments.json");
        std::fs::write(&path, "{not json").unwrap();
        let err = update_store(&path, |envs| {
            envs.push(env("a"));
            Ok(())
        })
        .unwrap_err();
        assert_eq!(err.code(), crate::session::ErrorCode::IoError);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("py-3.12_x").is_ok());
        for bad in ["", "a b", "x/y", &"n".repeat(65)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_program_that_is_not_python_is_reported_unusable() {
        let err = probe(Path::new("/bin/false")).await.unwrap_err();
        assert_eq!(err.code(), crate::session::ErrorCode::InvalidArgument);
        assert!(err.to_string().contains("/bin/false"), "{err}");
    }
}
