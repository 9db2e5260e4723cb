//! Artifacts (docs/tools.md "Artifacts", docs/limits.md): values a session keeps *by
//! reference* — the full text of a result its response cut, or what kernel code keeps — so an
//! agent can read a range, save it to a file or forward it to a brokered tool without the
//! payload passing through its context.
//!
//! [`Store`] owns them for the whole process, filed by the key of the session they belong to
//! (`K`: the registry's slot). Ids are unique across the server (`art-` and 16 hex digits), so
//! a tool names an artifact without its session; who may reach it is the caller's business
//! (the `sees` predicate of each lookup), and an id the caller may not reach is
//! [`ArtifactError::NotFound`], exactly like one that never existed.
//!
//! Bounded ([`Bounds`]): entries and bytes per session, bytes per artifact. Keeping one more
//! evicts the session's oldest first, and [`Kept::evicted`] says which (the caller turns that
//! into a notice). Each artifact's bytes live in an unlinked file (`O_TMPFILE`: it never has
//! a name, so no kernel can open it; 0600 all the same); the file goes when the artifact is deleted, evicted, or its session
//! ends ([`Store::forget_session`]). Artifacts do not depend on a kernel: a restart keeps them.
//!
//! One `std::sync::Mutex`, held for map updates only; file I/O runs on tokio's blocking pool.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::hash::Hash;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Artifacts one session keeps at most.
pub const MAX_ENTRIES: usize = 64;
/// Bytes one session's artifacts hold at most, together.
pub const MAX_SESSION_BYTES: u64 = 64 * 1024 * 1024;
/// Bytes one artifact holds at most.
pub const MAX_ARTIFACT_BYTES: u64 = 16 * 1024 * 1024;
/// Bytes one `read_artifact` returns at most.
pub const MAX_READ_BYTES: usize = 64 * 1024;
/// Largest serialized `arguments` of a forward into a brokered tool (bytes of JSON): an
/// artifact of up to 16 MiB fits only if its JSON does.
pub const MAX_FORWARD_BYTES: usize = 16 * 1024 * 1024 + 64 * 1024;

/// What an artifact is, as a result carries it beside its preview: `{id, bytes, mime,
/// sha256}` (sha256 in lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactRef {
    pub id: String,
    pub bytes: u64,
    pub mime: String,
    pub sha256: String,
}

impl ArtifactRef {
    /// True for a type `read_artifact` answers as text (`text/*`, JSON).
    pub fn is_text(&self) -> bool {
        is_text_mime(&self.mime)
    }
}

/// True for MIME types read back as text: `text/*` and JSON.
pub fn is_text_mime(mime: &str) -> bool {
    mime.starts_with("text/") || mime == "application/json" || mime.ends_with("+json")
}

/// The artifact's bytes as a brokered tool's argument value (a forward): JSON parsed, text as
/// a string, else base64.
pub fn argument_value(a: &ArtifactRef, bytes: Vec<u8>) -> serde_json::Value {
    use base64::Engine;
    use serde_json::Value;
    let json = a.mime == "application/json" || a.mime.ends_with("+json");
    if json && let Ok(v) = serde_json::from_slice(&bytes) {
        return v;
    }
    let bytes = match (a.is_text(), String::from_utf8(bytes)) {
        (true, Ok(s)) => return Value::String(s),
        (_, Ok(s)) => s.into_bytes(),
        (_, Err(e)) => e.into_bytes(),
    };
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// An artifact as `list_artifacts` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ArtifactInfo {
    #[serde(flatten)]
    pub artifact: ArtifactRef,
    /// The session it belongs to (its name).
    pub session_id: String,
    /// Where it came from: `run-…/result` (a result its response cut), `kernel` (kept by
    /// kernel code), or what made it.
    pub origin: String,
    /// When it was kept (RFC 3339, UTC).
    pub created: String,
}

/// The store's bounds (docs/limits.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub entries: usize,
    pub session_bytes: u64,
    pub artifact_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            entries: MAX_ENTRIES,
            session_bytes: MAX_SESSION_BYTES,
            artifact_bytes: MAX_ARTIFACT_BYTES,
        }
    }
}

/// Why an artifact operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// No artifact of this id that the caller may reach: never made, deleted, evicted, or
    /// its session ended.
    #[error(
        "Artifact '{0}' not found: it never existed, was deleted or evicted (oldest first, when its session keeps too many), or its session ended."
    )]
    NotFound(String),
    /// The value is larger than one artifact may be.
    #[error("The value is {bytes} bytes; an artifact holds at most {max} bytes.")]
    TooLarge { bytes: u64, max: u64 },
    /// A read starting past the end.
    #[error("offset {offset} is past the end of artifact '{id}' ({bytes} bytes).")]
    PastEnd { id: String, offset: u64, bytes: u64 },
    /// The backing file could not be made, written or read.
    #[error("the artifact's file failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Whether keeping a value from an origin the session already kept an artifact from makes a
/// new one ([`Store::keep`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// No: the artifact kept first answers (a second look at the same run's output).
    Same,
    /// Yes: what kernel code keeps (each call is a value of its own).
    New,
}

/// What [`Store::keep`] did: the artifact, whether it was already kept (the same origin), and
/// the artifacts evicted to make room, oldest first.
#[derive(Debug, Clone)]
pub struct Kept {
    pub artifact: ArtifactRef,
    pub existed: bool,
    pub evicted: Vec<ArtifactRef>,
}

impl Kept {
    /// One notice per evicted artifact, for the response that made room.
    pub fn notices(&self) -> Vec<String> {
        self.evicted
            .iter()
            .map(|a| {
                format!(
                    "Artifact {} ({} bytes, {}) was evicted to make room for {}: a session keeps at most {MAX_ENTRIES} artifacts and {} MiB (oldest go first).",
                    a.id,
                    a.bytes,
                    a.mime,
                    self.artifact.id,
                    MAX_SESSION_BYTES / (1024 * 1024)
                )
            })
            .collect()
    }
}

/// One kept artifact.
struct Entry<K> {
    info: ArtifactInfo,
    key: K,
    /// The bytes: an unlinked file of exactly `info.artifact.bytes` bytes.
    body: Arc<File>,
}

struct Inner<K> {
    by_id: HashMap<String, Entry<K>>,
    /// Each session's ids, oldest first.
    by_key: HashMap<K, VecDeque<String>>,
}

/// The artifacts of every session (see the module docs).
pub struct Store<K> {
    inner: Mutex<Inner<K>>,
    bounds: Bounds,
}

impl<K> Default for Store<K> {
    fn default() -> Store<K> {
        Store::new(Bounds::default())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An unlinked file holding `data` (see the module docs), and its digest. Blocking.
fn write_body(data: &[u8]) -> std::io::Result<(File, String)> {
    let mut file = tempfile::tempfile()?;
    file.write_all(data)?;
    let sha = hex::encode(Sha256::digest(data));
    Ok((file, sha))
}

/// Up to `len` bytes of `file` from `offset`. Blocking.
fn read_body(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ArtifactError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => Ok(r?),
        Err(e) => Err(ArtifactError::Io(std::io::Error::other(e.to_string()))),
    }
}

impl<K> Store<K> {
    /// An empty store with these bounds.
    pub fn new(bounds: Bounds) -> Store<K> {
        Store {
            inner: Mutex::new(Inner {
                by_id: HashMap::new(),
                by_key: HashMap::new(),
            }),
            bounds,
        }
    }

    /// The store's bounds.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Store<K> {
    /// Keep `data` (of type `mime`, from `origin`) for the session `key` (named `session` in
    /// listings); `again` says what it is when `origin` was already kept for that session.
    /// Evicts the session's oldest artifacts while it would hold more than its bounds.
    /// Errors: [`ArtifactError::TooLarge`], [`ArtifactError::Io`].
    pub async fn keep(
        &self,
        key: &K,
        session: &str,
        mime: &str,
        data: Vec<u8>,
        origin: &str,
        again: Again,
    ) -> Result<Kept, ArtifactError> {
        if again == Again::Same
            && let Some(kept) = self.kept(key, origin)
        {
            return Ok(kept);
        }
        let bytes = data.len() as u64;
        if bytes > self.bounds.artifact_bytes {
            return Err(ArtifactError::TooLarge {
                bytes,
                max: self.bounds.artifact_bytes,
            });
        }
        let (file, sha256) = blocking(move || write_body(&data)).await?;
        let mut inner = lock(&self.inner);
        let mut id = new_id();
        while inner.by_id.contains_key(&id) {
            id = new_id();
        }
        let artifact = ArtifactRef {
            id: id.clone(),
            bytes,
            mime: mime.to_string(),
            sha256,
        };
        let evicted = self.make_room(&mut inner, key, bytes);
        let info = ArtifactInfo {
            artifact: artifact.clone(),
            session_id: session.to_string(),
            origin: origin.to_string(),
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        let entry = Entry {
            info,
            key: key.clone(),
            body: Arc::new(file),
        };
        inner.by_id.insert(id.clone(), entry);
        inner.by_key.entry(key.clone()).or_default().push_back(id);
        Ok(Kept {
            artifact,
            existed: false,
            evicted,
        })
    }

    /// Evict `key`'s oldest artifacts until one more of `bytes` fits its bounds.
    fn make_room(&self, inner: &mut Inner<K>, key: &K, bytes: u64) -> Vec<ArtifactRef> {
        let mut evicted = Vec::new();
        loop {
            let ids = inner.by_key.get(key);
            let count = ids.map_or(0, |q| q.len());
            let held: u64 = ids.map_or(0, |q| {
                q.iter()
                    .filter_map(|i| inner.by_id.get(i))
                    .map(|e| e.info.artifact.bytes)
                    .sum()
            });
            if count < self.bounds.entries && held + bytes <= self.bounds.session_bytes {
                return evicted;
            }
            let Some(oldest) = inner.by_key.get_mut(key).and_then(|q| q.pop_front()) else {
                return evicted;
            };
            if let Some(e) = inner.by_id.remove(&oldest) {
                evicted.push(e.info.artifact);
            }
        }
    }

    /// The artifact of `key`'s session that came from `origin`, if it is still kept, as
    /// [`Store::keep`] answers it again (`existed`, nothing evicted).
    pub fn kept(&self, key: &K, origin: &str) -> Option<Kept> {
        let inner = lock(&self.inner);
        let artifact = inner.by_key.get(key)?.iter().find_map(|id| {
            let e = inner.by_id.get(id)?;
            (e.info.origin == origin).then(|| e.info.artifact.clone())
        })?;
        Some(Kept {
            artifact,
            existed: true,
            evicted: Vec::new(),
        })
    }

    /// What `id` is, with the key of its session, when `sees` that session.
    /// Errors: [`ArtifactError::NotFound`].
    pub fn info(
        &self,
        id: &str,
        sees: impl Fn(&K) -> bool,
    ) -> Result<(ArtifactInfo, K), ArtifactError> {
        let inner = lock(&self.inner);
        match inner.by_id.get(id) {
            Some(e) if sees(&e.key) => Ok((e.info.clone(), e.key.clone())),
            _ => Err(ArtifactError::NotFound(id.to_string())),
        }
    }

    fn body(
        &self,
        id: &str,
        sees: impl Fn(&K) -> bool,
    ) -> Result<(ArtifactRef, Arc<File>), ArtifactError> {
        let inner = lock(&self.inner);
        match inner.by_id.get(id) {
            Some(e) if sees(&e.key) => Ok((e.info.artifact.clone(), e.body.clone())),
            _ => Err(ArtifactError::NotFound(id.to_string())),
        }
    }

    /// Up to `len` bytes of `id` from byte `offset` (an offset at the end gives none).
    /// Errors: [`ArtifactError::NotFound`], [`ArtifactError::PastEnd`], [`ArtifactError::Io`].
    pub async fn read(
        &self,
        id: &str,
        sees: impl Fn(&K) -> bool,
        offset: u64,
        len: usize,
    ) -> Result<(ArtifactRef, Vec<u8>), ArtifactError> {
        let (artifact, body) = self.body(id, sees)?;
        if offset > artifact.bytes {
            return Err(ArtifactError::PastEnd {
                id: id.to_string(),
                offset,
                bytes: artifact.bytes,
            });
        }
        let len = len.min((artifact.bytes - offset) as usize);
        let data = blocking(move || read_body(&body, offset, len)).await?;
        Ok((artifact, data))
    }

    /// All of `id`'s bytes (at most the per-artifact bound). Errors: as [`Self::read`].
    pub async fn read_all(
        &self,
        id: &str,
        sees: impl Fn(&K) -> bool,
    ) -> Result<(ArtifactRef, Vec<u8>), ArtifactError> {
        let len = self.bounds.artifact_bytes as usize;
        self.read(id, sees, 0, len).await
    }

    /// The artifacts of the sessions `pick` picks, oldest first.
    pub fn list(&self, pick: impl Fn(&K) -> bool) -> Vec<ArtifactInfo> {
        let inner = lock(&self.inner);
        let mut out: Vec<ArtifactInfo> = Vec::new();
        for (key, ids) in inner.by_key.iter().filter(|(k, _)| pick(k)) {
            let _ = key;
            out.extend(
                ids.iter()
                    .filter_map(|i| inner.by_id.get(i))
                    .map(|e| e.info.clone()),
            );
        }
        out.sort_by(|a, b| a.created.cmp(&b.created));
        out
    }

    /// Forget `id` (its file goes). Errors: [`ArtifactError::NotFound`].
    pub fn delete(
        &self,
        id: &str,
        sees: impl Fn(&K) -> bool,
    ) -> Result<ArtifactRef, ArtifactError> {
        let mut inner = lock(&self.inner);
        let key = match inner.by_id.get(id) {
            Some(e) if sees(&e.key) => e.key.clone(),
            _ => return Err(ArtifactError::NotFound(id.to_string())),
        };
        let entry = inner.by_id.remove(id).map(|e| e.info.artifact);
        if let Some(q) = inner.by_key.get_mut(&key) {
            q.retain(|i| i != id);
            if q.is_empty() {
                inner.by_key.remove(&key);
            }
        }
        entry.ok_or_else(|| ArtifactError::NotFound(id.to_string()))
    }

    /// The session `key` ended: its artifacts go. Returns how many.
    pub fn forget_session(&self, key: &K) -> usize {
        let mut inner = lock(&self.inner);
        let ids = inner.by_key.remove(key).unwrap_or_default();
        for id in &ids {
            inner.by_id.remove(id);
        }
        ids.len()
    }
}

/// A new id: `art-` and 16 random hex digits.
fn new_id() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("art-{}", &u[..16])
}

#[cfg(test)]
#[path = "artifacts_tests.rs"]
mod tests;
