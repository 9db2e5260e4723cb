//! The records sessions hand to callers: [`SessionInfo`] and [`ExecutionResult`] (docs/tools.md).
//! Field names are the tool contract; change them only together with docs/tools.md.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Lifecycle state of a session's kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Starting,
    Idle,
    Busy,
    AwaitingInput,
    Restarting,
    /// An adopted kernel that misses its heartbeat (stopped, or too busy to answer).
    Unresponsive,
    Dead,
}

impl SessionStatus {
    /// The contract's string for this status.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Starting => "starting",
            SessionStatus::Idle => "idle",
            SessionStatus::Busy => "busy",
            SessionStatus::AwaitingInput => "awaiting_input",
            SessionStatus::Restarting => "restarting",
            SessionStatus::Unresponsive => "unresponsive",
            SessionStatus::Dead => "dead",
        }
    }
}

/// State of one run (one `execute_request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    AwaitingInput,
    Ok,
    Error,
    Aborted,
    Timeout,
    Interrupted,
    Cancelled,
    KernelDied,
}

impl RunStatus {
    /// True once the run can no longer change status.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            RunStatus::Queued | RunStatus::Running | RunStatus::AwaitingInput
        )
    }

    /// The contract's string for this status.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::AwaitingInput => "awaiting_input",
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Aborted => "aborted",
            RunStatus::Timeout => "timeout",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Cancelled => "cancelled",
            RunStatus::KernelDied => "kernel_died",
        }
    }
}

/// What `create_session`, `get_session`, `list_sessions`… return.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionInfo {
    pub session_id: String,
    /// Kernelspec name.
    pub kernel: String,
    pub language: String,
    pub display_name: String,
    pub status: SessionStatus,
    /// 1 for the first kernel; +1 each time a new kernel replaces the old one.
    pub generation: u64,
    pub pid: Option<u32>,
    /// Resident memory of the kernel and every process it started (MiB), where measurable.
    pub memory_mib: Option<u64>,
    /// Messages from the current kernel dropped as malformed or badly signed.
    pub dropped_messages: u64,
    pub cwd: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub last_activity: String,
    pub history_count: usize,
    pub queue_length: usize,
    pub current_run_id: Option<String>,
    /// From `kernel_info_reply`: implementation, language_info, protocol_version, banner.
    pub kernel_info: Value,
    /// The id of the server process holding the session (as in `server_info`).
    pub server_instance: String,
    /// When that server process started (RFC 3339).
    pub server_started_at: String,
    /// When the session expires if left idle (RFC 3339), or `None`: never.
    pub expires_at: Option<String>,
    /// The kernel's connection file (`jupyter console --existing FILE` attaches to it).
    pub connection_file: Option<String>,
    /// True for a kernel someone else started and this session adopted.
    pub attached: bool,
    /// `local`, or the gateway the kernel runs on.
    pub location: String,
    /// The kernel's id on its gateway.
    pub kernel_id: Option<String>,
    // The session this one was forked from (`fork_session`), absent for every other session.
    // No doc comment: it would repeat in every tool's schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    // The OS sandbox (docs/sandbox.md), absent for `none`. No doc comment and not required:
    // both would repeat in every tool's schema, which `--tools minimal` keeps small.
    #[serde(skip_serializing_if = "crate::kernel::Sandbox::is_none")]
    pub sandbox: crate::kernel::Sandbox,
    // The principal the session belongs to, shown to an admin for another principal's
    // session (its `session_id` is then `OWNER/NAME`); absent otherwise. No doc comment: it
    // would repeat in every tool's schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// One display output (display_data / execute_result beyond text/plain), in order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OutputItem {
    /// `display_data` or `execute_result`.
    pub kind: String,
    pub mime_types: Vec<String>,
    /// The display as text: its richest readable form (text/markdown, application/json
    /// pretty-printed, text/latex, else text/plain, else the text of text/html), bounded.
    pub text: Option<String>,
    /// The first image in the bundle (base64 as sent by the kernel).
    pub image: Option<ImageData>,
    pub display_id: Option<String>,
    /// Its position among the run's display outputs (`kernel-mcp://runs/{run_id}/outputs/{index}`);
    /// a response that leaves outputs out keeps the others' indices.
    pub index: usize,
    /// The MIME bundle as history and the notebook export keep it; not in the JSON.
    #[serde(skip)]
    pub bundle: std::sync::Arc<DisplayBundle>,
}

/// What is kept of a display's MIME bundle for history and the notebook export (docs/semantics.md:
/// "a notebook export keeps every MIME type of the bundle"), bounded per value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DisplayBundle {
    /// MIME type → value as the kernel sent it, except the image in [`OutputItem::image`]
    /// (its base64 is kept there, once) and values over the per-value cap.
    pub data: serde_json::Map<String, Value>,
    /// The bundle's `metadata`, plus a `kernel_mcp` note naming values left out.
    pub metadata: serde_json::Map<String, Value>,
}

/// An image from a MIME bundle.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ImageData {
    pub mime: String,
    /// Base64, as the kernel sent it. Returned as an `image` content block, not in the JSON.
    #[serde(skip)]
    pub data: String,
    /// Decoded size in bytes.
    pub bytes: usize,
}

/// An exception raised by the code (from the `error` message or `execute_reply`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorInfo {
    pub ename: String,
    pub evalue: String,
    /// Plain text: ANSI escapes removed.
    pub traceback: Vec<String>,
}

/// The kernel is waiting for `input()`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Prompt {
    pub text: String,
    pub password: bool,
}

/// How much of one stream the response left out.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StreamTruncation {
    pub total_bytes: usize,
    pub omitted_bytes: usize,
    /// The whole text kept by reference (`result` only; see docs/tools.md "Artifacts").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<crate::artifacts::ArtifactRef>,
}

/// What `execute`, `get_execution`, `send_input` and `cancel_execution` return.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExecutionResult {
    pub run_id: String,
    pub session_id: String,
    pub generation: u64,
    /// The kernel this ran in is not the one the session's previous run saw.
    pub state_reset: bool,
    pub status: RunStatus,
    pub execution_count: Option<i64>,
    pub stdout: String,
    pub stderr: String,
    /// text/plain of the execute_result.
    pub result: Option<String>,
    pub outputs: Vec<OutputItem>,
    pub error: Option<ErrorInfo>,
    pub prompt: Option<Prompt>,
    /// Per stream (`stdout`, `stderr`), when the response shows only head + tail.
    pub truncated: Option<std::collections::BTreeMap<String, StreamTruncation>>,
    /// Bytes of output that arrived after the run finished.
    pub late_output: usize,
    pub queued_ms: u64,
    pub elapsed_ms: u64,
    /// Plain sentences: state lost, kernel restarted, interrupt escalated…
    pub notices: Vec<String>,
    /// When the run was queued and when it finished (wall clock; not in the JSON): the dates
    /// of its MCP task, fixed once known.
    #[serde(skip)]
    pub queued_date: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip)]
    pub finished_date: Option<chrono::DateTime<chrono::Utc>>,
}
