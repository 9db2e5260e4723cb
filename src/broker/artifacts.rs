//! Artifacts from kernel code (docs/broker.md "Artifacts from kernel code"; `from kernel_mcp
//! import artifact`): the endpoint's `artifact_*` operations over the session's part of the
//! server's artifact store ([`crate::artifacts`]) — the store, ids, bounds and error codes of
//! the agent's artifact tools. A kernel reaches its own session's artifacts and no other.
//!
//! | `op` | parameters | answer (`result`) |
//! |---|---|---|
//! | `artifact_put` | `mime`, `bytes`, `path`? — then exactly `bytes` raw bytes after the line | `{artifact, notices}` |
//! | `artifact_read` | `id`, `offset`, `length` (at most [`MAX_KERNEL_READ_BYTES`]) | `{id, bytes, mime, sha256, offset, next_offset, data}` (base64) |
//! | `artifact_list` | — | the session's artifact records, oldest first |
//! | `artifact_delete` | `id` | `{id, bytes, mime, sha256}` |
//! | `artifact_forward` | `id`, `server`, `tool`, `argument`, `arguments`, `timeout` | the tool's result envelope, as `call` |
//!
//! `artifact_put` is the one request with a body: its line says how many bytes follow, and
//! the connection reads exactly that many ([`frame`]) when they fit one artifact (else it
//! answers `LIMIT_EXCEEDED` without reading them), so a request stays bounded on the wire;
//! at most [`MAX_BODIES`] bodies are held at once, across the server.
//! A failure is `{"kind": "artifact", "code", "message"}` with the agent's tools' codes
//! (`ARTIFACT_NOT_FOUND`, `LIMIT_EXCEEDED`, `INVALID_ARGUMENT`, `IO_ERROR`); a forward that
//! reached the broker fails as a kernel's `call` does, except that one over the argument
//! budget (nothing sent) is `LIMIT_EXCEEDED` too.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::ops::{self, FailureKind, Gone, Request};
use super::shared::{SessionArtifacts, Shared};
use crate::artifacts::{Again, ArtifactError, MAX_FORWARD_BYTES, argument_value};
use crate::session::ErrorCode;

/// The operations' common prefix.
pub const PREFIX: &str = "artifact_";
/// The operation whose request carries a body.
const PUT: &str = "artifact_put";
/// Bytes one `artifact_read` returns at most (base64 in a line of about 5.4 MiB); the helper
/// reads a larger range in pieces.
pub const MAX_KERNEL_READ_BYTES: usize = 4 * 1024 * 1024;
/// The longest MIME type a kernel may give (bytes).
const MAX_MIME_BYTES: usize = 200;
/// The longest path shown in an artifact's origin (characters).
const MAX_ORIGIN_CHARS: usize = 300;

/// What an `artifact_*` request carries besides [`Request`]'s fields.
#[derive(Deserialize, Default)]
struct Params {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    mime: Option<String>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    length: Option<u64>,
    #[serde(default)]
    argument: Option<String>,
}

/// The head of a request line, as much as [`frame`] needs.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    key: String,
    #[serde(default)]
    op: String,
    #[serde(default)]
    bytes: Option<u64>,
}

/// A failure reply with an artifact error code.
fn failure(code: ErrorCode, message: impl Into<String>) -> Value {
    json!({"ok": false, "error": {"kind": "artifact", "code": code.as_str(), "message": message.into()}})
}

/// The reply for a store error, with what to do next.
fn store_failure(e: ArtifactError) -> Value {
    let (code, next) = match &e {
        ArtifactError::NotFound(_) => (
            ErrorCode::ArtifactNotFound,
            " artifact.list() shows this session's artifacts.",
        ),
        ArtifactError::TooLarge { .. } => (
            ErrorCode::LimitExceeded,
            " Keep a smaller value, or write it to a file.",
        ),
        ArtifactError::PastEnd { .. } => (ErrorCode::InvalidArgument, ""),
        ArtifactError::Io(_) => (ErrorCode::IoError, ""),
    };
    failure(code, format!("{e}{next}"))
}

/// What a request line asks of its connection ([`frame`]).
pub(super) enum Framed {
    /// Not an artifact operation: [`ops::handle`] answers it.
    Broker,
    /// An artifact operation, with the bytes that followed an `artifact_put` line.
    Artifact(Body),
    /// Refused before its bytes were read: this reply.
    Refused(Value),
}

/// The bytes that followed an `artifact_put` line, holding one of [`BODIES`] until they are
/// kept.
#[derive(Default)]
pub(super) struct Body {
    bytes: Vec<u8>,
    _held: Option<SemaphorePermit<'static>>,
}

/// `artifact_put` bodies held in memory at once, across the server (each at most 16 MiB):
/// a further one waits before it is read.
const MAX_BODIES: usize = 4;
static BODIES: Semaphore = Semaphore::const_new(MAX_BODIES);

/// What `line` is, reading from `rd` the bytes an `artifact_put` line with the session's key
/// announces (exactly as many); refused unread when they exceed one artifact.
/// Errors: the peer closed the connection before the last byte.
pub(super) async fn frame<R: AsyncRead + Unpin>(
    shared: &Shared,
    line: &[u8],
    rd: &mut R,
) -> std::io::Result<Framed> {
    let head = match serde_json::from_slice::<Head>(line) {
        Ok(h) if h.op.starts_with(PREFIX) => h,
        _ => return Ok(Framed::Broker),
    };
    let (Some(bytes), true) = (head.bytes, head.op == PUT && shared.key_matches(&head.key)) else {
        return Ok(Framed::Artifact(Body::default()));
    };
    let max = shared.artifacts.store.bounds().artifact_bytes;
    if bytes > max {
        let refused = store_failure(ArtifactError::TooLarge { bytes, max });
        return Ok(Framed::Refused(refused));
    }
    let held = BODIES.acquire().await.ok();
    let mut body = Vec::with_capacity(bytes as usize);
    rd.take(bytes).read_to_end(&mut body).await?;
    if (body.len() as u64) < bytes {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Framed::Artifact(Body {
        bytes: body,
        _held: held,
    }))
}

/// Answer an `artifact_*` request line (with the `body` [`frame`] read for it); `None` when
/// the peer went away before the answer.
pub(super) async fn handle(shared: &Shared, line: &[u8], body: Body, gone: Gone) -> Option<Value> {
    let req = match ops::parse(shared, line) {
        Ok(r) => r,
        Err(reply) => return Some(reply),
    };
    let p: Params = serde_json::from_slice(line).unwrap_or_default();
    let mine = &shared.artifacts;
    let answer = match req.op.as_str() {
        PUT => put(shared, &p, body.bytes).await,
        "artifact_read" => read(mine, &p).await,
        "artifact_list" => Ok(json!(mine.store.list(mine.sees()))),
        "artifact_delete" => match p.id.as_deref() {
            Some(id) => mine
                .store
                .delete(id, mine.sees())
                .map(|a| json!(a))
                .map_err(store_failure),
            None => Err(missing("id")),
        },
        "artifact_forward" => return forward(shared, req, p, gone).await,
        other => Err(ops::failure(
            FailureKind::Protocol,
            format!("unknown operation {other:?}"),
        )),
    };
    Some(match answer {
        Ok(result) => json!({"ok": true, "result": result}),
        Err(reply) => reply,
    })
}

fn missing(what: &str) -> Value {
    failure(ErrorCode::InvalidArgument, format!("missing {what}"))
}

/// True for a MIME type a kernel may give: `type/subtype` (parameters allowed), printable
/// ASCII, at most [`MAX_MIME_BYTES`].
fn valid_mime(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or("").trim();
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    mime.len() <= MAX_MIME_BYTES
        && mime.bytes().all(|b| (0x20..0x7f).contains(&b))
        && essence
            .split_once('/')
            .is_some_and(|(t, s)| token(t) && token(s))
}

/// `artifact_put`: keep `body` as a new artifact of the session.
async fn put(shared: &Shared, p: &Params, body: Vec<u8>) -> Result<Value, Value> {
    let mime = p.mime.as_deref().unwrap_or("application/octet-stream");
    if !valid_mime(mime) {
        return Err(failure(
            ErrorCode::InvalidArgument,
            format!("{mime:?} is not a MIME type (type/subtype, e.g. text/csv)"),
        ));
    }
    if p.bytes != Some(body.len() as u64) {
        return Err(missing(
            "bytes (the size of the value that follows the line)",
        ));
    }
    // Always `kernel`: kernel code cannot pass for a run's result (`run-…/result`).
    let origin = match &p.path {
        Some(path) => format!(
            "kernel: {}",
            path.chars().take(MAX_ORIGIN_CHARS).collect::<String>()
        ),
        None => "kernel".to_string(),
    };
    let mine = &shared.artifacts;
    let kept = mine
        .store
        .keep(
            &mine.slot,
            mine.slot.name(),
            mime,
            body,
            &origin,
            Again::New,
        )
        .await
        .map_err(store_failure)?;
    tracing::debug!(session = %shared.session, id = %kept.artifact.id, bytes = kept.artifact.bytes, "artifact kept by kernel code");
    Ok(json!({"artifact": kept.artifact, "notices": kept.notices()}))
}

/// `artifact_read`: a range of at most [`MAX_KERNEL_READ_BYTES`], base64.
async fn read(mine: &SessionArtifacts, p: &Params) -> Result<Value, Value> {
    let id = p.id.as_deref().ok_or_else(|| missing("id"))?;
    let offset = p.offset.unwrap_or(0);
    let length = p.length.map_or(MAX_KERNEL_READ_BYTES, |l| {
        l.min(MAX_KERNEL_READ_BYTES as u64) as usize
    });
    let (artifact, bytes) = mine
        .store
        .read(id, mine.sees(), offset, length)
        .await
        .map_err(store_failure)?;
    let mut v = json!(artifact);
    v["offset"] = json!(offset);
    v["next_offset"] = json!(offset + bytes.len() as u64);
    v["data"] = json!(base64::engine::general_purpose::STANDARD.encode(&bytes));
    Ok(v)
}

/// `artifact_forward`: the artifact as one argument of a `call` with the forward's budget
/// ([`MAX_FORWARD_BYTES`]), in the kernel's trace context, abandoned if the kernel goes away.
async fn forward(shared: &Shared, req: Request, p: Params, gone: Gone) -> Option<Value> {
    let mine = &shared.artifacts;
    let (Some(id), Some(argument)) = (p.id.as_deref(), p.argument.clone()) else {
        return Some(missing("id or argument"));
    };
    let mut arguments = match req.arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Some(failure(
                ErrorCode::InvalidArgument,
                "arguments must be a dict (a JSON object)",
            ));
        }
    };
    let (artifact, bytes) = match mine.store.read_all(id, mine.sees()).await {
        Ok(r) => r,
        Err(e) => return Some(store_failure(e)),
    };
    arguments.insert(argument, argument_value(&artifact, bytes));
    let call = Request {
        op: "call".into(),
        arguments: Some(Value::Object(arguments)),
        budget: Some(MAX_FORWARD_BYTES),
        ..req
    };
    Some(match ops::call(shared, call, gone).await? {
        Ok(envelope) => json!({"ok": true, "result": envelope}),
        Err(f) if f.kind() == FailureKind::Limit => failure(ErrorCode::LimitExceeded, f.message()),
        Err(f) => f.into_reply(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mime_type_is_type_slash_subtype_in_printable_ascii() {
        for ok in [
            "text/plain",
            "text/csv; charset=utf-8",
            "application/vnd.x+json",
        ] {
            assert!(valid_mime(ok), "{ok}");
        }
        for bad in [
            "",
            "text",
            "/plain",
            "text/",
            "text/pl ain",
            "text/plain\n",
            "tëxt/plain",
        ] {
            assert!(!valid_mime(bad), "{bad:?}");
        }
        assert!(!valid_mime(&format!("text/{}", "x".repeat(MAX_MIME_BYTES))));
    }
}
