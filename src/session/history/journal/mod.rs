//! The on-disk journal: one JSON Lines file per session instance under
//! `$XDG_STATE_HOME/kernel-mcp/history/` (default `~/.local/state/kernel-mcp/history/`), named
//! `<session_id>-<created, UTC %Y%m%dT%H%M%S>-<4 hex>.jsonl`. Line 1 is a [`JournalHeader`];
//! each later line is a [`JournalRecord`]. Each record is appended and flushed when it happens,
//! so a crash of the server loses nothing that was already returned. [`latest_journal`] finds a
//! session's newest journal, [`read_journal`] replays it (deletions and clears applied; a torn
//! last line from a crash is ignored) and [`prune_journals`] removes old ones. The journal
//! keeps every entry; memory keeps a bounded window of them ([`super::History`]).

use std::collections::HashSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::HistoryEntry;

/// First line of a journal file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    pub session_id: String,
    pub kernel: String,
    pub display_name: String,
    pub language: String,
    /// RFC 3339.
    pub created_at: String,
    /// The session belonged to one client (a service connection's own `default`): only that
    /// client may read this journal, so [`latest_journal`] never returns it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
    /// The session's sandbox (absent: none), so that an export of its history after it
    /// ended is held to its grants as the live session's was.
    #[serde(default, skip_serializing_if = "crate::kernel::Sandbox::is_none")]
    pub sandbox: crate::kernel::Sandbox,
    /// A sandboxed session's cwd (absent for a session without a sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Every later line of a journal file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// Records are built, written and dropped one at a time; boxing `Entry` would only change the API.
#[allow(clippy::large_enum_variant)]
pub enum JournalRecord {
    /// A block finished executing.
    Entry(HistoryEntry),
    /// `delete_history` removed these run ids.
    Deleted(Vec<String>),
    /// `restart_session(clear_history=true)` emptied the history.
    Cleared,
    /// The kernel's language_info (from kernel_info_reply) became known or changed.
    LanguageInfo(Value),
    /// The outputs with this output's `display_id`, in every entry so far, now show its data
    /// (`update_display_data`, or a later display with the same id; the latest value per id
    /// is written when a run finishes).
    DisplayUpdated(super::HistoryOutput),
}

/// An open journal: appends records, one flushed line each.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

impl Journal {
    /// The directory journals go in (created 0700 if missing).
    ///
    /// `$XDG_STATE_HOME/kernel-mcp/history` when `XDG_STATE_HOME` is set to an absolute path
    /// (the XDG spec says to ignore relative ones), else `$HOME/.local/state/kernel-mcp/history`.
    /// Missing directories along the way are created with mode 0700; existing ones are left
    /// as they are. Errors: `NotFound` when neither variable gives a directory, or the
    /// error from creating it.
    pub fn dir() -> std::io::Result<PathBuf> {
        let dir = journal_dir_from(
            std::env::var_os("XDG_STATE_HOME").as_deref(),
            std::env::var_os("HOME").as_deref(),
        )
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "cannot locate the history journal directory: neither XDG_STATE_HOME nor HOME is set",
            )
        })?;
        create_private_dir(&dir)?;
        Ok(dir)
    }

    /// Create a new journal in `dir` for this session, writing the header line.
    ///
    /// The file is `<session_id>-<now, UTC %Y%m%dT%H%M%S>-<4 random hex>.jsonl`, created new
    /// (never overwriting; another random suffix is tried on a clash) with mode 0600. `dir`
    /// must exist. Errors: `InvalidInput` for a session id that is empty or contains `/` or
    /// NUL; otherwise I/O errors from creating or writing the file.
    pub fn create(dir: &Path, header: &JournalHeader) -> std::io::Result<Journal> {
        let id = &header.session_id;
        if id.is_empty() || id.contains(['/', '\0']) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("session id {id:?} cannot name a journal file"),
            ));
        }
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S").to_string();
        let mut attempts = 0;
        let (path, file) = loop {
            let suffix = &uuid::Uuid::new_v4().simple().to_string()[..4];
            let path = dir.join(format!("{id}-{stamp}-{suffix}.jsonl"));
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => break (path, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 16 => {
                    attempts += 1;
                }
                Err(e) => return Err(e),
            }
        };
        let mut journal = Journal { path, file };
        journal.write_line(header)?;
        Ok(journal)
    }

    /// The journal file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record and flush it to the OS.
    ///
    /// The record is serialized as one JSON line and written with a single `write_all`, so a
    /// crash leaves at most a torn last line, which [`read_journal`] ignores. Not fsynced.
    pub fn append(&mut self, record: &JournalRecord) -> std::io::Result<()> {
        self.write_line(record)
    }

    fn write_line(&mut self, value: &impl Serialize) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }
}

/// Create `dir` and any missing parents with mode 0700 (existing ones are left as they are).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The journal directory for the given `XDG_STATE_HOME` and `HOME` values.
fn journal_dir_from(
    xdg_state_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    let base = match xdg_state_home.map(Path::new) {
        Some(xdg) if xdg.is_absolute() => xdg.to_path_buf(),
        _ => Path::new(home.filter(|h| !h.is_empty())?).join(".local/state"),
    };
    Some(base.join("kernel-mcp").join("history"))
}

/// A journal read back: its header, the surviving entries in order, and the last language_info.
#[derive(Debug, Clone)]
pub struct JournalContents {
    pub header: JournalHeader,
    pub entries: Vec<HistoryEntry>,
    pub language_info: Value,
    /// The last line was cut off (the server stopped mid-write) and was skipped.
    pub torn_tail: bool,
}

/// Read a journal, applying deletions and clears. A torn last line (a crash mid-write) is ignored.
///
/// Records are replayed in order: `entry` appends, `deleted` removes those run ids, `cleared`
/// empties the list, `language_info` replaces the last one (`null` if none was recorded),
/// `display_updated` updates the outputs with its `display_id` in the entries so far. An
/// invalid line that is not the last one is skipped with a warning (it can only come from
/// outside damage). Invalid UTF-8 is decoded lossily. Errors: I/O errors reading the file;
/// `InvalidData` when the first line is not a [`JournalHeader`].
pub fn read_journal(path: &Path) -> std::io::Result<JournalContents> {
    let bytes = fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<(usize, &str)> = text
        .split('\n')
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let Some(((_, first), records)) = lines.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: empty journal (no header line)", path.display()),
        ));
    };
    let header: JournalHeader = serde_json::from_str(first).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: invalid journal header: {e}", path.display()),
        )
    })?;

    let mut entries: Vec<HistoryEntry> = Vec::new();
    let mut language_info = Value::Null;
    let mut torn_tail = false;
    for (i, (line_no, line)) in records.iter().enumerate() {
        let record: JournalRecord = match serde_json::from_str(line) {
            Ok(record) => record,
            Err(e) if i + 1 == records.len() => {
                tracing::debug!(path = %path.display(), line = line_no + 1, error = %e,
                    "ignoring a torn last journal line");
                torn_tail = true;
                continue;
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), line = line_no + 1, error = %e,
                    "skipping an invalid journal line");
                continue;
            }
        };
        match record {
            JournalRecord::Entry(entry) => entries.push(entry),
            JournalRecord::Deleted(run_ids) => {
                let gone: HashSet<&str> = run_ids.iter().map(String::as_str).collect();
                entries.retain(|e| !gone.contains(e.run_id.as_str()));
            }
            JournalRecord::Cleared => entries.clear(),
            JournalRecord::LanguageInfo(info) => language_info = info,
            JournalRecord::DisplayUpdated(update) => {
                for entry in &mut entries {
                    super::update_entry_display(entry, &update);
                }
            }
        }
    }
    Ok(JournalContents {
        torn_tail,
        header,
        entries,
        language_info,
    })
}

/// Journals kept: older ones are removed when a server starts.
pub const JOURNAL_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Delete `*.jsonl` journals in `dir` last written more than `max_age` ago; returns how many.
/// Best effort: unreadable entries are skipped.
pub fn prune_journals(dir: &Path, max_age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > max_age)
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// The most recent journal of `session_id` in `dir` (by file name timestamp), if any.
///
/// Candidates are files named exactly `<session_id>-<%Y%m%dT%H%M%S>-<4 hex>.jsonl` whose
/// header names `session_id` (so session `a` never picks up `a-b`'s journals). Ties within
/// the same second go to the later header `created_at`. `None` if `dir` cannot be read or
/// holds no such file.
pub fn latest_journal(dir: &Path, session_id: &str) -> Option<PathBuf> {
    let prefix = format!("{session_id}-");
    // (file name timestamp, header created_at) → path.
    type Key = (String, Option<chrono::DateTime<chrono::Utc>>);
    let mut best: Option<(Key, PathBuf)> = None;
    for dirent in fs::read_dir(dir).ok()?.flatten() {
        let name = dirent.file_name();
        let Some(stamp) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(journal_name_stamp)
        else {
            continue;
        };
        let path = dirent.path();
        let Some(header) = read_header(&path) else {
            continue;
        };
        if header.session_id != session_id || header.private {
            continue;
        }
        let created = chrono::DateTime::parse_from_rfc3339(&header.created_at)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc));
        let key = (stamp.to_string(), created);
        if best.as_ref().is_none_or(|(k, _)| key > *k) {
            best = Some((key, path));
        }
    }
    best.map(|(_, path)| path)
}

/// The timestamp of a journal file name with the `<session_id>-` prefix removed, if the rest
/// is exactly `<8 digits>T<6 digits>-<4 hex>.jsonl`.
fn journal_name_stamp(rest: &str) -> Option<&str> {
    let b = rest.as_bytes();
    let ok = b.len() == 15 + 1 + 4 + ".jsonl".len()
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'-'
        && b[16..20].iter().all(u8::is_ascii_hexdigit)
        && rest.ends_with(".jsonl");
    ok.then(|| &rest[..15])
}

/// The header (first line) of a journal file, if it has a valid one.
fn read_header(path: &Path) -> Option<JournalHeader> {
    let mut line = String::new();
    BufReader::new(fs::File::open(path).ok()?)
        .read_line(&mut line)
        .ok()?;
    serde_json::from_str(&line).ok()
}

#[cfg(test)]
mod tests;
