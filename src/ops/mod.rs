//! Session operations built from several actor calls: running a file, listing variables,
//! installing packages (Python kernels), history from a live session or its journal, replaying
//! history and exporting it. They hold the policy; `mcp/` only turns parameters into these
//! calls and their results into tool results.
//!
//! Layout: this file (files to run, variables, packages, history sources, replay, export),
//! `history_query.rs` (which entries `get_history` returns), `checkpoint.rs` (a Python
//! namespace to a file and back), `export/` (transcript, script, notebook), `files/` (files
//! users name, read and written safely), `packages.rs` (pip / uv in a session's interpreter),
//! `python.rs` (silent Python expressions and the code that runs a file).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::registry::Registry;
use crate::session::history::{self, HistoryEntry, Journal};
use crate::session::language::Language;
use crate::session::{
    ExecuteRequest, RunId, RunStatus, SessionError, SessionHandle, SessionInfo, wait_settled,
};
use export::{ExportContext, ExportFormat};
use packages::InstallOutcome;

pub(crate) mod checkpoint;
pub(crate) mod export;
pub(crate) mod files;
pub(crate) mod history_query;
pub(crate) mod packages;
pub(crate) mod python;

/// Variables listed by `variables` at most (the rest are counted, not listed).
pub const MAX_VARIABLES: usize = 200;

impl ExportContext {
    /// The export context of a live session.
    pub fn from_info(info: &SessionInfo) -> ExportContext {
        ExportContext {
            session_id: info.session_id.clone(),
            kernel: info.kernel.clone(),
            display_name: info.display_name.clone(),
            language: info.language.clone(),
            language_info: info.kernel_info["language_info"].clone(),
            exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }
}

impl SessionHandle {
    /// The session's language, from what its kernel reported.
    pub async fn language(&self) -> Result<Language, SessionError> {
        Ok(Language::from_name(&self.info().await?.language))
    }

    /// The user's variables (name, type, short summary), at most `MAX_VARIABLES`, and how
    /// many there are in all. Never calls a user-defined `__repr__`. While a run executes, the
    /// kernel's subshell answers (see `session/actor/subshell.rs`).
    /// Errors: `UNSUPPORTED` for kernels other than Python; `SESSION_BUSY` while a run executes
    /// in a kernel without subshells.
    pub async fn variables(&self) -> Result<(Vec<Value>, usize), SessionError> {
        if !self.language().await?.is_python() {
            return Err(SessionError::Unsupported(
                "Variables are listed for Python kernels only.".into(),
            ));
        }
        let vars = python::eval_json_beside(self, python::VARIABLES).await?;
        let mut vars = match vars {
            Value::Array(v) => v,
            _ => Vec::new(),
        };
        let total = vars.len();
        vars.truncate(MAX_VARIABLES);
        Ok((vars, total))
    }

    /// The code that runs the file at `path` (relative to the session's cwd) with `argv`:
    /// for Python, in the session's namespace with its real filename, `__file__` and
    /// `sys.argv = [path, *argv]`; for other kernels, the file's contents.
    /// Errors: `IO_ERROR` (missing, not a regular file…), `LIMIT_EXCEEDED` (over `max_bytes`),
    /// `INVALID_ARGUMENT` (a file of another language), `UNSUPPORTED` (argv for non-Python).
    pub async fn file_code(
        &self,
        path: &Path,
        argv: &[String],
        max_bytes: usize,
    ) -> Result<String, SessionError> {
        let info = self.info().await?;
        let path = PathBuf::from(&info.cwd).join(path);
        let contents = files::read_capped(&path, max_bytes).await?;
        let language = Language::from_name(&info.language);
        if language.is_python() && info.location != "local" {
            return Ok(python::run_source_code(
                &path.display().to_string(),
                &contents,
                argv,
            ));
        }
        if language.is_python() {
            return Ok(python::run_file_code(&path.display().to_string(), argv));
        }
        let expected = info.kernel_info["language_info"]["file_extension"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches('.')
            .to_ascii_lowercase();
        let actual = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if !expected.is_empty() && !actual.is_empty() && actual != expected {
            return Err(SessionError::InvalidArgument(format!(
                "{} is a .{actual} file, but session '{}' runs {} (.{expected} files). Run it in a session of its own language.",
                path.display(),
                info.session_id,
                info.language
            )));
        }
        if !argv.is_empty() {
            return Err(SessionError::Unsupported(format!(
                "argv is only supported for Python kernels; this session runs {}.",
                info.language
            )));
        }
        Ok(String::from_utf8_lossy(&contents).into_owned())
    }

    /// Install `packages` into the Python session's own interpreter, then let the running
    /// kernel see new modules. Errors: `INVALID_ARGUMENT`, `UNSUPPORTED` (not Python),
    /// `SESSION_BUSY`, `IO_ERROR`, `LIMIT_EXCEEDED` (the installer's time limit).
    pub async fn install_packages(
        &self,
        packages_: &[String],
    ) -> Result<InstallOutcome, SessionError> {
        packages::validate(packages_)?;
        if !self.language().await?.is_python() {
            return Err(SessionError::Unsupported(
                "Packages can be installed for Python kernels. For R run install.packages(\"name\"); for Octave, pkg install -forge name; for bash, the system package manager.".into(),
            ));
        }
        if self.info().await?.location != "local" {
            return self.install_in_kernel(packages_).await;
        }
        let exe = python::eval_json(self, python::EXECUTABLE).await?;
        let Some(exe) = exe.as_str().filter(|s| !s.is_empty()) else {
            return Err(SessionError::Internal(
                "The kernel did not report its interpreter (sys.executable is empty).".into(),
            ));
        };
        let outcome = packages::install(Path::new(exe), packages_).await?;
        if outcome.ok {
            // Let the running kernel see the new modules without a restart.
            let _ = python::eval_json(
                self,
                "__import__('importlib').invalidate_caches() or '6e756c6c'",
            )
            .await;
        }
        Ok(outcome)
    }
}

impl SessionHandle {
    /// `install_packages` on a remote kernel: pip runs inside the kernel, on its machine.
    async fn install_in_kernel(
        &self,
        packages_: &[String],
    ) -> Result<InstallOutcome, SessionError> {
        let expr = python::pip_in_kernel_expr(packages_, 4000);
        let v = python::eval_json_within(self, &expr, packages::INSTALL_TIMEOUT).await?;
        let code = v[0].as_i64().unwrap_or(-1);
        let output = v[1].as_str().unwrap_or_default().to_string();
        let mut command: Vec<String> = ["sys.executable", "-m", "pip", "install"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        command.extend(packages_.iter().cloned());
        if code == 0 {
            let _ = python::eval_json(
                self,
                "__import__('importlib').invalidate_caches() or '6e756c6c'",
            )
            .await;
        }
        Ok(InstallOutcome {
            ok: code == 0,
            command,
            restart_recommended: output.contains("Successfully uninstalled"),
            output,
            notices: vec![REMOTE_INSTALL_NOTICE.into()],
        })
    }
}

/// Said by `install_packages` on a remote session.
pub const REMOTE_INSTALL_NOTICE: &str = "The kernel runs on a gateway: pip ran inside it (sys.executable -m pip), on the kernel's machine.";

/// Said by `execute_file` on a remote session.
pub const REMOTE_FILE_NOTICE: &str =
    "The kernel runs on a gateway: the file was read here and its contents sent to the kernel.";

/// History entries of a session, live or from its journal.
pub struct HistorySource {
    /// Entries with their indices.
    pub entries: Vec<(usize, HistoryEntry)>,
    pub total: usize,
    pub ctx: ExportContext,
    /// The session's cwd (live sessions) for resolving relative export paths.
    pub cwd: Option<PathBuf>,
    /// Plain sentences about how the history was read (a journal's torn last line).
    pub notices: Vec<String>,
}

/// One replayed history entry.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Replayed {
    pub index: usize,
    pub run_id: RunId,
    pub status: RunStatus,
    pub execution_count: Option<i64>,
    /// `ename: evalue` when it failed.
    pub error: Option<String>,
}

/// What a replay did: each run, and the index it stopped at (the first run not `ok`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Replay {
    pub runs: Vec<Replayed>,
    pub stopped_at: Option<usize>,
}

/// What an export wrote.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Exported {
    pub path: PathBuf,
    pub entries: usize,
    pub bytes: usize,
}

impl Registry {
    /// Entries `[start, end)` of the live session's history, else of the latest journal of
    /// that session id. Errors: `SESSION_NOT_FOUND` (neither), `IO_ERROR` (unreadable journal).
    pub async fn history_source(
        &self,
        session_id: &str,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<HistorySource, SessionError> {
        if let Ok(handle) = self.get(session_id) {
            let (entries, total) = handle.history(start, end).await?;
            let info = handle.info().await?;
            return Ok(HistorySource {
                entries,
                total,
                ctx: ExportContext::from_info(&info),
                cwd: Some(PathBuf::from(info.cwd)),
                notices: Vec::new(),
            });
        }
        let not_found = SessionError::NotFound {
            id: session_id.to_string(),
            known: self.session_ids(),
            journal_checked: true,
        };
        let id = session_id.to_string();
        let read = tokio::task::spawn_blocking(move || {
            let dir = Journal::dir().ok()?;
            let path = history::latest_journal(&dir, &id)?;
            Some(history::read_journal(&path).map_err(|e| (path, e)))
        })
        .await
        .map_err(|e| SessionError::Internal(format!("reading the journal failed: {e}")))?;
        let j = match read {
            None => return Err(not_found),
            Some(Err((path, e))) => {
                return Err(SessionError::io(
                    &path,
                    format!("cannot read {}: {e}", path.display()),
                ));
            }
            Some(Ok(j)) => j,
        };
        let range = history::slice_range(j.entries.len(), start, end);
        let entries = range.map(|i| (i, j.entries[i].clone())).collect();
        Ok(HistorySource {
            entries,
            total: j.entries.len(),
            ctx: ExportContext {
                session_id: session_id.to_string(),
                kernel: j.header.kernel,
                display_name: j.header.display_name,
                language: j.language_info["name"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or(j.header.language),
                language_info: j.language_info,
                exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            },
            cwd: None,
            notices: if j.torn_tail {
                vec!["The journal's last line was cut off (the server stopped while writing it) and was skipped; every earlier entry is here.".to_string()]
            } else {
                Vec::new()
            },
        })
    }

    /// Re-run the entries `[start, end)` of a live session in order (after a restart when
    /// `restart`), each waited for up to the default wait, stopping at the first that does
    /// not end `ok`.
    pub async fn rerun(
        &self,
        handle: &SessionHandle,
        start: Option<i64>,
        end: Option<i64>,
        restart: bool,
        timeout: Option<Duration>,
    ) -> Result<Replay, SessionError> {
        let (entries, _) = handle.history(start, end).await?;
        if restart {
            handle.restart(false).await?;
        }
        let wait = Duration::from_secs_f64(self.limits.default_wait_s);
        let mut runs = Vec::new();
        let mut stopped_at = None;
        for (index, entry) in entries {
            let req = ExecuteRequest {
                timeout,
                ..ExecuteRequest::new(entry.code)
            };
            let (run_id, mut rx) = self.submit(handle, req).await?;
            wait_settled(&mut rx, wait).await;
            let r = handle.get_run(&run_id).await?;
            let ok = r.status == RunStatus::Ok;
            runs.push(Replayed {
                index,
                run_id,
                status: r.status,
                execution_count: r.execution_count,
                error: r
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.ename, e.evalue)),
            });
            if !ok {
                stopped_at = Some(index);
                break;
            }
        }
        Ok(Replay { runs, stopped_at })
    }

    /// Write entries `[start, end)` of a session's history (live or journalled) to `path` in
    /// `format`. A relative path resolves against the session's cwd; the format's extension
    /// is added when the path has none; parent directories are created.
    /// Errors: `SESSION_NOT_FOUND`, `IO_ERROR` (a directory, an unwritable path…).
    pub async fn export(
        &self,
        session_id: &str,
        path: &Path,
        format: ExportFormat,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<Exported, SessionError> {
        let src = self.history_source(session_id, start, end).await?;
        let mut path = path.to_path_buf();
        if path.is_relative() {
            let base = src
                .cwd
                .clone()
                .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
            path = base.join(path);
        }
        if path.extension().is_none() && !path.is_dir() {
            let ext = match format {
                ExportFormat::Script => export::script_extension(&src.ctx),
                ExportFormat::Notebook => ".ipynb".into(),
                ExportFormat::Transcript => ".txt".into(),
            };
            path.set_extension(ext.trim_start_matches('.'));
        }
        let entries: Vec<HistoryEntry> = src.entries.into_iter().map(|(_, e)| e).collect();
        let content = export::render(format, &src.ctx, &entries);
        let bytes = content.len();
        files::write_file(&path, content.into_bytes()).await?;
        Ok(Exported {
            path,
            entries: entries.len(),
            bytes,
        })
    }
}

/// `{"variables": [...]}` details for a listing cut short.
pub fn variables_note(listed: usize, total: usize) -> Option<Value> {
    (total > listed).then(|| {
        json!(format!(
            "{listed} of {total} variables are listed; the rest are left out."
        ))
    })
}
