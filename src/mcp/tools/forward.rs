//! `forward_artifact`'s work (the tool is declared in `artifacts.rs`): the artifact becomes one
//! argument of a brokered tool's call, made through its session's broker endpoint like a
//! kernel's `mcp.call` (see `crate::broker::forward`); a large result comes back as an
//! artifact of its own.

use serde_json::json;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::out::Output;
use crate::artifacts::{Again, ArtifactError, ArtifactRef};
use crate::artifacts::{MAX_FORWARD_BYTES, argument_value};
use crate::broker::forward::{endpoint_of, forward};
use crate::broker::ops::FailureKind;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::session::ErrorCode;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForwardArtifactParams {
    /// The artifact's id.
    pub id: String,
    /// A server of its session's broker registry (.mcp.json).
    pub server: String,
    /// The tool to call (within the registry's allowedTools).
    pub tool: String,
    /// The argument that receives the artifact (text; JSON parsed; bytes as base64).
    pub argument: String,
    /// The tool's other arguments.
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// Seconds to wait for the tool (default 300).
    pub timeout_s: Option<f64>,
}

/// What `forward_artifact` got back: the tool's result envelope (bounded as a broker call's),
/// or, when that is larger than a response shows, a preview and the envelope kept as an
/// artifact of its own.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Forwarded {
    /// The artifact sent.
    pub forwarded: ArtifactRef,
    pub server: String,
    pub tool: String,
    /// The tool's result: `content`, `structuredContent`, `isError` (null when kept as an
    /// artifact).
    pub result: Option<serde_json::Value>,
    /// The result kept by reference (`application/json`), when it is large.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_artifact: Option<ArtifactRef>,
    /// The head of a result kept by reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    pub notices: Vec<String>,
}

impl Output for Forwarded {
    fn text(&self) -> String {
        let mut t = format!(
            "forwarded {} ({} bytes) to {}.{}",
            self.forwarded.id, self.forwarded.bytes, self.server, self.tool
        );
        if let Some(a) = &self.result_artifact {
            t.push_str(&format!(
                "; its result ({} bytes) is artifact {}:\n{}",
                a.bytes,
                a.id,
                self.preview.as_deref().unwrap_or("")
            ));
        } else if let Some(r) = &self.result {
            t.push_str(&format!(": {r}"));
        }
        for n in &self.notices {
            t.push_str(&format!("\nnote: {n}"));
        }
        t
    }
}

/// A result envelope larger than this (bytes of JSON) is kept as an artifact.
const INLINE_RESULT_BYTES: usize = 20_000;
/// The head of such a result shown in the response.
const PREVIEW_BYTES: usize = 2_000;

/// The error code of a broker failure.
fn code_of(kind: FailureKind) -> ErrorCode {
    match kind {
        FailureKind::Limit => ErrorCode::LimitExceeded,
        FailureKind::Protocol
        | FailureKind::Config
        | FailureKind::UnknownServer
        | FailureKind::UnknownTool
        | FailureKind::Permission => ErrorCode::InvalidArgument,
        FailureKind::Busy => ErrorCode::SessionBusy,
        _ => ErrorCode::IoError,
    }
}

/// See the module docs. Errors: `ARTIFACT_NOT_FOUND`; `UNSUPPORTED` for a session without a
/// broker endpoint; `LIMIT_EXCEEDED` over the budget (nothing sent); `INVALID_ARGUMENT` for
/// an unknown server or tool, or one outside the grant; `IO_ERROR` when the call failed
/// (`details.kind`: the broker's failure kind, e.g. `timeout`, `tool`).
pub(super) async fn forward_artifact(
    caller: &Caller,
    p: ForwardArtifactParams,
) -> Result<Forwarded, ToolError> {
    let viewer = caller.scope.viewer();
    let store = caller.registry().artifacts();
    let (_, slot) = store.info(&p.id, |s| viewer.sees(s))?;
    let handle = caller
        .registry()
        .session_in(&slot)
        .ok_or_else(|| ToolError::from(ArtifactError::NotFound(p.id.clone())))?;
    let shared = handle.desc().observer.as_ref().and_then(endpoint_of).ok_or_else(|| {
        ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "Session '{}' has no MCP broker (a local Python session, with the broker on, has one); its artifacts cannot be forwarded.",
                slot.name()
            ),
        )
    })?;
    let (artifact, bytes) = store.read_all(&p.id, |s| viewer.sees(s)).await?;
    let mut arguments = p.arguments.unwrap_or_default();
    arguments.insert(p.argument.clone(), argument_value(&artifact, bytes));
    let envelope = forward(
        &shared,
        &p.server,
        &p.tool,
        arguments,
        MAX_FORWARD_BYTES,
        p.timeout_s,
    )
    .await
    .map_err(|f| {
        let mut e = ToolError::new(code_of(f.kind()), f.message().to_string());
        e.details = json!({"kind": f.kind()});
        e
    })?;
    let mut out = Forwarded {
        forwarded: artifact,
        server: p.server,
        tool: p.tool,
        result: None,
        result_artifact: None,
        preview: None,
        notices: Vec::new(),
    };
    let text = envelope.to_string();
    if text.len() <= INLINE_RESULT_BYTES {
        out.result = Some(envelope);
        return Ok(out);
    }
    let cut = (0..=PREVIEW_BYTES.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let preview = text[..cut].to_string();
    let origin = format!(
        "forward of {} ({})",
        out.forwarded.id,
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let kept = store
        .keep(
            &slot,
            slot.name(),
            "application/json",
            text.into_bytes(),
            &origin,
            Again::Same,
        )
        .await?;
    out.notices = kept.notices();
    out.result_artifact = Some(kept.artifact);
    out.preview = Some(preview);
    Ok(out)
}
