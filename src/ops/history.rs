//! A session's history as the tools read it: from the live session, or — for one that is
//! not live — from its journal (a named session's newest public journal; a connection's own
//! ended `default`, only that connection's journal of it). Which entries `get_history`
//! returns (a Python slice, the latest `n`, or a run id: exclusive, mixing them is
//! `INVALID_ARGUMENT`), replaying entries, and exporting them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::export::{self, ExportContext, ExportFormat};
use super::files;
use crate::registry::scope::key::SessionKey;
use crate::registry::{PastHistory, Registry};
use crate::session::cmd;
use crate::session::history::{self, HistoryEntry};
use crate::session::{ExecuteRequest, RunId, RunStatus, SessionError, wait_settled};

/// A choice of history entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistorySelect {
    /// Entries `[start, end)`, Python slice semantics.
    Slice {
        start: Option<i64>,
        end: Option<i64>,
    },
    /// The last `n` entries (n ≥ 1).
    Latest(usize),
    /// The entry recorded for this run.
    Run(String),
}

impl HistorySelect {
    /// The selection the parameters ask for.
    /// Errors: `INVALID_ARGUMENT` when `run_id` or `latest_n` is mixed with another selector,
    /// or `latest_n` is 0.
    pub fn from_params(
        start: Option<i64>,
        end: Option<i64>,
        run_id: Option<String>,
        latest_n: Option<usize>,
    ) -> Result<HistorySelect, SessionError> {
        let slice = start.is_some() || end.is_some();
        match (run_id, latest_n) {
            (Some(_), Some(_)) => Err(SessionError::InvalidArgument(
                "Give run_id or latest_n, not both.".into(),
            )),
            (Some(_), None) | (None, Some(_)) if slice => Err(SessionError::InvalidArgument(
                "run_id and latest_n cannot be combined with start/end: use one way of choosing entries.".into(),
            )),
            (Some(run), None) => Ok(HistorySelect::Run(run)),
            (None, Some(0)) => Err(SessionError::InvalidArgument(
                "latest_n must be at least 1.".into(),
            )),
            (None, Some(n)) => Ok(HistorySelect::Latest(n)),
            (None, None) => Ok(HistorySelect::Slice { start, end }),
        }
    }
}

/// History entries of a session, live or from its journal.
pub struct HistorySource {
    /// Entries with their indices.
    pub entries: Vec<(usize, HistoryEntry)>,
    pub total: usize,
    pub ctx: ExportContext,
    /// The session's cwd (live sessions, and sandboxed ones that ended) for resolving
    /// relative export paths.
    pub cwd: Option<PathBuf>,
    /// Where an export may write for the session (its sandbox's grants).
    pub reach: files::Reach,
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

/// Entries `[start, end)` of `key`'s history: the live session's, else the journal of its
/// past (see [`Registry::past_history`]).
/// Errors: `SESSION_NOT_FOUND` (neither), `IO_ERROR` (an unreadable journal).
pub async fn source(
    registry: &Registry,
    key: &SessionKey,
    start: Option<i64>,
    end: Option<i64>,
) -> Result<HistorySource, SessionError> {
    if let Ok(handle) = registry.get(key) {
        let cmd::HistoryPage { entries, total } = handle.call(cmd::History { start, end }).await?;
        let info = handle.call(cmd::Info).await?;
        return Ok(HistorySource {
            entries,
            total,
            ctx: ExportContext::from_info(&info),
            reach: files::Reach::of_session(&info),
            cwd: Some(PathBuf::from(info.cwd)),
            notices: Vec::new(),
        });
    }
    let past = registry.past_history(key);
    let read = tokio::task::spawn_blocking(move || {
        let path = match past {
            PastHistory::Journal(path) => path,
            PastHistory::LatestOf { dir, name } => history::latest_journal(&dir, &name)?,
            PastHistory::Nothing => return None,
        };
        Some(history::read_journal(&path).map_err(|e| (path, e)))
    })
    .await
    .map_err(|e| SessionError::Internal(format!("reading the journal failed: {e}")))?;
    let j = match read {
        None => return Err(registry.not_found(key, true)),
        Some(Err((path, e))) => {
            return Err(SessionError::io(
                &path,
                format!("cannot read {}: {e}", path.display()),
            ));
        }
        Some(Ok(j)) => j,
    };
    let reach = past_reach(registry, key.name(), &j.header);
    let range = history::slice_range(j.entries.len(), start, end);
    let entries = range.map(|i| (i, j.entries[i].clone())).collect();
    Ok(HistorySource {
        entries,
        total: j.entries.len(),
        ctx: ExportContext {
            session_id: key.name().to_string(),
            kernel: j.header.kernel,
            display_name: j.header.display_name,
            language: j.language_info["name"]
                .as_str()
                .map(String::from)
                .unwrap_or(j.header.language),
            language_info: j.language_info,
            exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        },
        cwd: reach.cwd().map(Path::to_path_buf),
        reach,
        notices: if j.torn_tail {
            vec!["The journal's last line was cut off (the server stopped while writing it) and was skipped; every earlier entry is here.".to_string()]
        } else {
            Vec::new()
        },
    })
}

/// Where an export of an ended session's journal may write: what the session could (its
/// journal records its sandbox and cwd). A journal that records none, on a server that
/// sandboxes every session, may be a sandboxed session's from an older server: nowhere.
fn past_reach(registry: &Registry, name: &str, header: &history::JournalHeader) -> files::Reach {
    if header.sandbox.restricts() {
        return match &header.cwd {
            Some(cwd) => files::Reach::of(name, header.sandbox, Path::new(cwd)),
            None => files::Reach::Nowhere {
                session: name.to_string(),
                why: "its journal says it was sandboxed but not where it worked".into(),
            },
        };
    }
    let floor = registry.sources().sandbox;
    if floor.restricts() {
        return files::Reach::Nowhere {
            session: name.to_string(),
            why: format!(
                "this server sandboxes every session ('{floor}'), and the journal of this ended session does not say what it was allowed to write; export a live session's history instead"
            ),
        };
    }
    files::Reach::Anywhere
}

/// The entries `select` chooses from `key`'s history (live, else journal).
/// Errors: `SESSION_NOT_FOUND`, `IO_ERROR`; `EXECUTION_NOT_FOUND` for a run id that is not
/// in the history.
pub async fn select(
    registry: &Registry,
    key: &SessionKey,
    select: &HistorySelect,
) -> Result<HistorySource, SessionError> {
    match select {
        HistorySelect::Slice { start, end } => source(registry, key, *start, *end).await,
        HistorySelect::Latest(n) => {
            let start = i64::try_from(*n).map_or(i64::MIN, |n| -n);
            source(registry, key, Some(start), None).await
        }
        HistorySelect::Run(run) => {
            let mut src = source(registry, key, None, None).await?;
            src.entries.retain(|(_, e)| e.run_id == *run);
            if src.entries.is_empty() {
                return Err(SessionError::RunNotInHistory {
                    run: run.clone(),
                    session: key.name().to_string(),
                    total: src.total,
                });
            }
            Ok(src)
        }
    }
}

/// Re-run the entries `[start, end)` of `key`'s live session in order (after a restart when
/// `restart`), each waited for up to the default wait, stopping at the first that does not
/// end `ok`. Errors: as [`Registry::get`], and the session's; `INVALID_ARGUMENT` for an index that
/// names no entry or an empty selection, before anything is restarted or run.
pub async fn rerun(
    registry: &Registry,
    key: &SessionKey,
    start: Option<i64>,
    end: Option<i64>,
    restart: bool,
    timeout: Option<Duration>,
) -> Result<Replay, SessionError> {
    let handle = registry.get(key)?;
    let cmd::HistoryPage { entries, total } = handle.call(cmd::History { start, end }).await?;
    acting_range(
        total,
        start,
        end,
        "Nothing was re-run and the kernel was not restarted",
    )?;
    if restart {
        handle
            .call(cmd::Restart {
                clear_history: false,
            })
            .await?;
    }
    let wait = registry.limits().default_wait();
    let mut runs = Vec::new();
    let mut stopped_at = None;
    for (index, entry) in entries {
        let req = ExecuteRequest {
            timeout,
            ..ExecuteRequest::new(entry.code)
        };
        let (handle, (run_id, mut rx)) = registry.submit(key, req).await?;
        wait_settled(&mut rx, wait).await;
        let r = handle
            .call(cmd::GetRun {
                run: run_id.clone(),
            })
            .await?;
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

/// Write entries `[start, end)` of `key`'s history (live or journalled) to `path` in
/// `format`, readable by its owner only (0600: it holds the session's code and output). A
/// relative path resolves against the session's cwd; the format's extension is added when
/// the path has none; parent directories are created.
/// Errors: `SESSION_NOT_FOUND`, `IO_ERROR` (a directory, an unwritable path…), `INVALID_ARGUMENT`
/// for an index that names no entry or an empty selection (nothing is written).
pub async fn export(
    registry: &Registry,
    key: &SessionKey,
    path: &Path,
    format: ExportFormat,
    start: Option<i64>,
    end: Option<i64>,
) -> Result<Exported, SessionError> {
    let src = source(registry, key, start, end).await?;
    acting_range(src.total, start, end, "Nothing was exported")?;
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
    files::write_file_in(
        &src.reach,
        &path,
        content.into_bytes(),
        files::FileMode::Private,
    )
    .await?;
    Ok(Exported {
        path,
        entries: entries.len(),
        bytes,
    })
}

/// `start`/`end` by the rule for tools that act on entries ([`history::RangeUse::Act`]),
/// against a history of `total` entries. Errors: `INVALID_ARGUMENT`, `outcome` first.
fn acting_range(
    total: usize,
    start: Option<i64>,
    end: Option<i64>,
    outcome: &str,
) -> Result<(), SessionError> {
    history::select_range(total, start, end, history::RangeUse::Act)
        .map(drop)
        .map_err(|e| SessionError::InvalidArgument(format!("{outcome}: {e}.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_and_latest_n_exclude_the_slice_and_each_other() {
        let bad = [
            (Some(0), None, Some("r".to_string()), None),
            (None, Some(2), None, Some(3)),
            (None, None, Some("r".to_string()), Some(1)),
            (None, None, None, Some(0)),
        ];
        for (start, end, run, n) in bad {
            let e = HistorySelect::from_params(start, end, run, n).unwrap_err();
            assert_eq!(e.code(), crate::session::ErrorCode::InvalidArgument);
        }
        assert_eq!(
            HistorySelect::from_params(None, None, None, Some(2)).unwrap(),
            HistorySelect::Latest(2)
        );
        assert_eq!(
            HistorySelect::from_params(Some(1), None, None, None).unwrap(),
            HistorySelect::Slice {
                start: Some(1),
                end: None
            }
        );
    }
}
