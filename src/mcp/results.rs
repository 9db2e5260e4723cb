//! The `structuredContent` of the tools whose results are not a session record as is. Each
//! derives `JsonSchema`, so the tool's `outputSchema` (see [`super::schema`]) is generated
//! from the same type that is serialized. Field names are the tool contract (docs/tools.md).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::config::Limits;
use crate::kernel::ShutdownRung;
use crate::session::output::StreamPage;
use crate::session::{ExecutionResult, RunId, RunStatus, SessionInfo};

/// One installed kernelspec.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KernelEntry {
    pub name: String,
    pub display_name: String,
    pub language: String,
    pub interrupt_mode: crate::kernel::spec::InterruptMode,
    pub resource_dir: PathBuf,
    pub gateway: Option<String>,
}

/// `list_kernels`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KernelList {
    pub kernels: Vec<KernelEntry>,
    pub default_kernel: Option<String>,
    /// Each gateway; `error` when unreachable.
    pub gateways: Vec<crate::registry::sources::remote::GatewayState>,
}

/// `list_sessions`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
}

/// `get_session`: SessionInfo, plus the variables when asked for.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub info: SessionInfo,
    /// name, type, summary per variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables: Option<Vec<Value>>,
    /// Why variables are missing or incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables_note: Option<String>,
}

/// `interrupt_session`: SessionInfo (after the wait), the run it interrupted, and whether
/// that run stopped within the interrupt grace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Interrupted {
    #[serde(flatten)]
    pub info: SessionInfo,
    pub interrupted_run_id: Option<RunId>,
    /// The interrupted run's status when the call returned: final when it stopped, else
    /// `running` (or `awaiting_input`); null when nothing was running.
    pub run_status: Option<RunStatus>,
    /// True when the run reached a final status within the grace; null when nothing ran.
    pub stopped: Option<bool>,
    /// Plain sentences: how long it took, or that the run goes on and what will stop it.
    pub notices: Vec<String>,
}

/// `destroy_session`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Destroyed {
    pub session_id: String,
    pub shutdown: ShutdownRung,
}

/// `server_info`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub jupyter_protocol_version: String,
    pub mcp_protocol_versions: Vec<String>,
    pub limits: Limits,
    pub kernelspec_dirs: Vec<PathBuf>,
    pub python_environment: Option<PathBuf>,
    pub session_count: usize,
    /// Warm pool per kernelspec (`--pool`); these kernels count toward max_sessions.
    pub pool: std::collections::BTreeMap<String, crate::registry::sources::pool::PoolCount>,
    /// A fresh id per server process: a different one means a new server lifetime.
    pub server_instance: String,
    /// When this server process started (RFC 3339).
    pub started_at: String,
    /// Default policy and host support (docs/sandbox.md).
    pub sandbox: SandboxInfo,
}

/// `server_info.sandbox` (docs/sandbox.md).
#[derive(Debug, Serialize, JsonSchema)]
pub struct SandboxInfo {
    // The policy of a session that does not choose one, and the least any may ask for
    // (`--sandbox`, or stricter when this client asked for more).
    pub default_policy: crate::kernel::SandboxPolicy,
    // Whether sandboxed sessions may reach the network (`--sandbox-network`).
    pub network: bool,
    // The floors in force for this client's sessions: the server's, made stricter by what
    // the client asked for in its hello (a relay's --sandbox, --max-memory-mib).
    pub floors: crate::registry::floors::Floors,
    // The server's own floors.
    pub server_floors: crate::registry::floors::Floors,
    // What this host's kernel offers.
    pub host: crate::kernel::sandbox::HostSupport,
}

/// A page of one part of a run (`get_execution` with `stream`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunPage {
    pub run_id: RunId,
    pub stream: String,
    #[serde(flatten)]
    pub page: StreamPage,
}

/// `get_execution`: the run, or a page of one of its parts.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum RunOrPage {
    Run(Box<ExecutionResult>),
    Page(RunPage),
}

/// One entry of `get_history`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryRow {
    pub index: usize,
    pub run_id: String,
    pub code: String,
    pub status: RunStatus,
    pub execution_count: Option<i64>,
    pub generation: u64,
    /// A short summary of what the run printed and returned.
    pub output: String,
    /// Another client of the kernel ran it (a person in Jupyter), not a tool call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub other_client: bool,
}

/// `get_history`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    pub session_id: String,
    pub entries: Vec<HistoryRow>,
    pub total: usize,
}

/// `delete_history`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub deleted: usize,
}

/// `complete`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Completion {
    pub matches: Vec<String>,
    pub cursor_start: Option<i64>,
    pub cursor_end: Option<i64>,
}

/// `is_complete`: the kernel's `is_complete_reply`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Completeness {
    /// complete, incomplete, invalid or unknown.
    pub status: String,
    /// For incomplete code: the indent of the next line.
    pub indent: Option<String>,
}

/// `inspect`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Inspection {
    pub found: bool,
    pub text: String,
}

/// `checkpoint_session`: the file written, what was saved and what was skipped (and why).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Checkpointed {
    pub path: PathBuf,
    pub saved: Vec<String>,
    /// `{name, reason}` per variable left out.
    pub skipped: Vec<serde_json::Value>,
}

/// `restore_session`: the variables loaded.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RestoredVars {
    pub path: PathBuf,
    pub restored: Vec<String>,
}

/// One registered Python environment (`register_environment`, `get_environment`,
/// `validate_environment`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnvironmentOut {
    pub name: String,
    pub python: PathBuf,
}

/// `list_environments`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnvironmentList {
    pub environments: Vec<serde_json::Value>,
}

/// `remove_environment`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnvironmentRemoved {
    pub name: String,
    pub removed: bool,
}

/// `clear_queue`: the runs taken out of the queue.
#[derive(Debug, Serialize, JsonSchema)]
pub struct QueueCleared {
    pub session_id: String,
    pub cancelled: Vec<String>,
}
