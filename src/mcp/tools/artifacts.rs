//! Artifacts (the `artifacts` tool set, docs/tools.md "Artifacts"): `list_artifacts`,
//! `read_artifact` (a range, at most 64 KiB), `save_artifact` (to a file, held to the
//! session's sandbox grants), `delete_artifact`; and [`keep_result`], which keeps the whole
//! text of a result its response cut and puts the reference beside the preview
//! (`truncated.result.artifact`). The store is the registry's ([`crate::artifacts`]); a caller
//! reaches the artifacts of the sessions its scope sees, and no other (`ARTIFACT_NOT_FOUND`).

use std::path::PathBuf;

use base64::Engine;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::forward::{ForwardArtifactParams, Forwarded};
use super::out::{Json, Output};
use crate::artifacts::{Again, ArtifactInfo, ArtifactRef, MAX_READ_BYTES};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::files;
use crate::registry::RunHandle;
use crate::registry::scope::key::Slot;
use crate::session::{ErrorCode, ExecutionResult, Part, cmd};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArtifactsParams {
    /// Only this session's (default: every session you see).
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadArtifactParams {
    /// The artifact's id (art-…).
    pub id: String,
    /// Byte offset (default 0).
    pub offset: Option<u64>,
    /// Bytes to read (default and most: 65536).
    pub length: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveArtifactParams {
    /// The artifact's id.
    pub id: String,
    /// File to write (relative: the session's cwd); replaced if it exists.
    pub path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ArtifactIdParams {
    /// The artifact's id.
    pub id: String,
}

/// `list_artifacts`' result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ArtifactList {
    pub artifacts: Vec<ArtifactInfo>,
    /// Their bytes, together.
    pub bytes: u64,
}

impl Output for ArtifactList {
    fn text(&self) -> String {
        if self.artifacts.is_empty() {
            return "no artifacts".into();
        }
        let lines: Vec<String> = self
            .artifacts
            .iter()
            .map(|a| {
                format!(
                    "{} {} {} bytes in '{}' ({})",
                    a.artifact.id, a.artifact.mime, a.artifact.bytes, a.session_id, a.origin
                )
            })
            .collect();
        lines.join("\n")
    }
}

/// A range of an artifact (`read_artifact`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ArtifactRange {
    #[serde(flatten)]
    pub artifact: ArtifactRef,
    pub offset: u64,
    /// Where the next range starts; equal to `bytes` at the end.
    pub next_offset: u64,
    /// `text` (UTF-8, for text types) or `base64`.
    pub encoding: String,
    pub data: String,
}

impl Output for ArtifactRange {
    fn text(&self) -> String {
        let more = if self.next_offset < self.artifact.bytes {
            format!(
                "\n[{} of {} bytes remain: read_artifact(id=\"{}\", offset={})]",
                self.artifact.bytes - self.next_offset,
                self.artifact.bytes,
                self.artifact.id,
                self.next_offset
            )
        } else {
            String::new()
        };
        format!("{}{more}", self.data)
    }
}

/// What `save_artifact` wrote.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ArtifactSaved {
    #[serde(flatten)]
    pub artifact: ArtifactRef,
    pub path: PathBuf,
}

impl Output for ArtifactSaved {
    fn text(&self) -> String {
        format!(
            "saved {} ({} bytes) to {}",
            self.artifact.id,
            self.artifact.bytes,
            self.path.display()
        )
    }
}

/// What `delete_artifact` forgot.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ArtifactDeleted {
    #[serde(flatten)]
    pub artifact: ArtifactRef,
    pub deleted: bool,
}

impl Output for ArtifactDeleted {
    fn text(&self) -> String {
        format!(
            "deleted {} ({} bytes)",
            self.artifact.id, self.artifact.bytes
        )
    }
}

/// `bytes` as `read_artifact` answers them: text for a text type (a range that cuts a
/// character short ends before it), else base64. Returns the encoding, the data and how
/// many bytes it covers.
pub(crate) fn encode(artifact: &ArtifactRef, bytes: &[u8]) -> (&'static str, String, usize) {
    if artifact.is_text() {
        match std::str::from_utf8(bytes) {
            Ok(s) => return ("text", s.to_string(), bytes.len()),
            // Cut inside the last character: stop before it (the next read starts there).
            Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => {
                let n = e.valid_up_to();
                let s = String::from_utf8_lossy(&bytes[..n]).into_owned();
                return ("text", s, n);
            }
            Err(_) => {}
        }
    }
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    ("base64", data, bytes.len())
}

#[tool_router(router = artifacts_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Artifacts kept by reference (large results, values kept by kernel code): id, bytes,
    /// mime, sha256, session.
    #[tool]
    async fn list_artifacts(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ListArtifactsParams>,
    ) -> Result<Json<ArtifactList>, ToolError> {
        let viewer = caller.scope.viewer();
        let only: Option<Slot> = match &p.session_id {
            Some(id) => {
                let key = caller.scope.key(id);
                caller.registry().get(&key)?;
                Some(key.slot().clone())
            }
            None => None,
        };
        let artifacts = caller
            .registry()
            .artifacts()
            .list(|s| viewer.sees(s) && only.as_ref().is_none_or(|o| o == s));
        let bytes = artifacts.iter().map(|a| a.artifact.bytes).sum();
        Ok(Json(ArtifactList { artifacts, bytes }))
    }

    /// Read an artifact's bytes from offset (at most 65536 a read): text for text types,
    /// else base64.
    #[tool]
    async fn read_artifact(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ReadArtifactParams>,
    ) -> Result<Json<ArtifactRange>, ToolError> {
        let viewer = caller.scope.viewer();
        let offset = p.offset.unwrap_or(0);
        let length = match p.length {
            Some(0) => {
                return Err(ToolError::invalid(format!(
                    "length must be at least 1 (bytes; at most {MAX_READ_BYTES})."
                )));
            }
            Some(n) => n.min(MAX_READ_BYTES),
            None => MAX_READ_BYTES,
        };
        let store = caller.registry().artifacts();
        let (artifact, bytes) = store
            .read(&p.id, |s| viewer.sees(s), offset, length)
            .await?;
        let (encoding, data, covered) = encode(&artifact, &bytes);
        Ok(Json(ArtifactRange {
            next_offset: offset + covered as u64,
            artifact,
            offset,
            encoding: encoding.into(),
            data,
        }))
    }

    /// Write an artifact to a file (relative: its session's cwd; a sandboxed session writes
    /// only where its grants allow).
    #[tool]
    async fn save_artifact(
        &self,
        caller: Caller,
        Parameters(p): Parameters<SaveArtifactParams>,
    ) -> Result<Json<ArtifactSaved>, ToolError> {
        let viewer = caller.scope.viewer();
        let store = caller.registry().artifacts();
        let (_, slot) = store.info(&p.id, |s| viewer.sees(s))?;
        let handle = caller.registry().session_in(&slot).ok_or_else(|| {
            ToolError::from(crate::artifacts::ArtifactError::NotFound(p.id.clone()))
        })?;
        let info = handle.call(cmd::Info).await?;
        let path = PathBuf::from(&info.cwd).join(&p.path);
        let reach = files::Reach::of_session(&info);
        reach
            .check_write(&path)
            .map_err(crate::session::SessionError::from)?;
        let (artifact, bytes) = store.read_all(&p.id, |s| viewer.sees(s)).await?;
        files::write_file_in(&reach, &path, bytes, files::FileMode::Private)
            .await
            .map_err(crate::session::SessionError::from)?;
        Ok(Json(ArtifactSaved { artifact, path }))
    }

    /// Send an artifact as one argument of a tool of its session's MCP broker (grant, budget
    /// and journal as a kernel's mcp.call); the payload never passes through this context.
    #[tool]
    async fn forward_artifact(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ForwardArtifactParams>,
    ) -> Result<Json<Forwarded>, ToolError> {
        super::forward::forward_artifact(&caller, p).await.map(Json)
    }

    /// Forget an artifact.
    #[tool]
    async fn delete_artifact(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ArtifactIdParams>,
    ) -> Result<Json<ArtifactDeleted>, ToolError> {
        let viewer = caller.scope.viewer();
        let artifact = caller
            .registry()
            .artifacts()
            .delete(&p.id, |s| viewer.sees(s))?;
        Ok(Json(ArtifactDeleted {
            artifact,
            deleted: true,
        }))
    }
}

/// When `r`'s response cut its `result`, keep the whole text as an artifact of the run's
/// session (once per run) and put the reference in `truncated.result.artifact`; a notice
/// says which artifacts were evicted for it, or why none was kept.
pub(crate) async fn keep_result(caller: &Caller, run: &RunHandle, r: &mut ExecutionResult) {
    let Some(total) = r
        .truncated
        .as_ref()
        .and_then(|t| t.get("result"))
        .map(|t| t.total_bytes)
    else {
        return;
    };
    let Some(slot) = caller.registry().run_slot(run.key()) else {
        return;
    };
    let store = caller.registry().artifacts();
    let origin = format!("{}/result", r.run_id);
    let kept = match store.kept(&slot, &origin) {
        Some(kept) => Ok(kept),
        None => match run.page(Part::Result, 0, total).await {
            Ok(page) => {
                let data = page.text.into_bytes();
                store
                    .keep(&slot, slot.name(), "text/plain", data, &origin, Again::Same)
                    .await
                    .map_err(ToolError::from)
            }
            Err(e) => Err(ToolError::from(e)),
        },
    };
    match kept {
        Ok(k) => {
            r.notices.extend(k.notices());
            if let Some(t) = r.truncated.as_mut().and_then(|t| t.get_mut("result")) {
                t.artifact = Some(k.artifact);
            }
        }
        Err(e) if e.code == ErrorCode::LimitExceeded => r.notices.push(format!(
            "The result ({total} bytes) is too large to keep as an artifact (at most {} bytes); page it with get_execution(stream=\"result\").",
            store.bounds().artifact_bytes
        )),
        Err(e) => tracing::debug!(run = %r.run_id, "result not kept as an artifact: {}", e.message),
    }
}
