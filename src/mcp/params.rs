//! Tool parameters as the model types them (serde + JSON Schema). Doc comments become the
//! schema descriptions. Validation beyond types happens in the tools.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateSessionParams {
    /// Session name (1-64 of A-Za-z0-9._-).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Kernelspec name (list_kernels).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Python interpreter or venv.
    #[serde(default)]
    pub python: Option<String>,
    /// Registered environment name.
    #[serde(default)]
    pub environment: Option<String>,
    /// Kernel working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Extra kernel env vars.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Readiness wait, s (default 60).
    #[serde(default)]
    pub startup_timeout_s: Option<f64>,
    /// Memory limit, MiB (0 = none).
    #[serde(default)]
    pub max_memory_mib: Option<u64>,
    /// Idle seconds until shut down (0 = never).
    #[serde(default)]
    pub expires_after_s: Option<f64>,
    /// Connection file to adopt.
    #[serde(default)]
    pub connection_file: Option<String>,
    /// A --gateway name (list_kernels).
    #[serde(default)]
    pub gateway: Option<String>,
    /// Adopt this kernel on gateway.
    #[serde(default)]
    pub kernel_id: Option<String>,
    /// OS sandbox (default: server's)
    #[serde(default)]
    pub sandbox: Option<crate::kernel::SandboxPolicy>,
    #[serde(default)]
    pub sandbox_network: Option<bool>,
    /// Live .ipynb to keep.
    #[serde(default)]
    pub notebook: Option<String>,
    /// Adopt this notebook's kernel (gateway).
    #[serde(default)]
    pub notebook_path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionIdParams {
    /// The session's id.
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetSessionParams {
    /// The session's id.
    pub session_id: String,
    /// Also list Python variables (no user __repr__ is called).
    #[serde(default)]
    pub include_variables: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestartSessionParams {
    /// The session's id.
    pub session_id: String,
    /// Also forget the session's history (default false).
    #[serde(default)]
    pub clear_history: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteParams {
    /// Session to run in (default: "default", made on first use).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The code to run (at most 1 MiB).
    pub code: String,
    /// Run-time limit, s (interrupt, then restart). 0: none.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Seconds to wait (default 50), then "running".
    #[serde(default)]
    pub wait_s: Option<f64>,
    /// Answers for input() prompts, in order.
    #[serde(default)]
    pub stdin: Option<Vec<String>>,
    /// Fail unless at this generation.
    #[serde(default)]
    pub expected_generation: Option<u64>,
    /// Kernel history (default true).
    #[serde(default)]
    pub store_history: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetExecutionParams {
    /// From an execute result.
    pub run_id: String,
    /// Seconds to wait for it (default 0).
    #[serde(default)]
    pub wait_s: Option<f64>,
    /// Page one stream instead: "stdout" or "stderr".
    #[serde(default)]
    pub stream: Option<String>,
    /// Byte offset (default 0).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Bytes to return (default 20000).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendInputParams {
    /// The run waiting for input.
    pub run_id: String,
    /// The line to answer with (no trailing newline needed).
    pub value: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunIdParams {
    /// The run's id.
    pub run_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HistoryParams {
    /// The session (a past one is read from its journal).
    pub session_id: String,
    /// First index (Python slice). Omitted: the start.
    #[serde(default)]
    pub start: Option<i64>,
    /// End index, exclusive. Omitted: the end.
    #[serde(default)]
    pub end: Option<i64>,
    /// Only this run's entry (not with start/end/latest_n).
    #[serde(default)]
    pub run_id: Option<String>,
    /// Only the last N entries (not with start/end/run_id).
    #[serde(default)]
    pub latest_n: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteHistoryParams {
    /// The session's id.
    pub session_id: String,
    /// First index to delete, 0-based, negative from the end; must name an entry.
    pub start: i64,
    /// End index, exclusive. Omitted: only the entry at `start` is deleted.
    #[serde(default)]
    pub end: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RerunHistoryParams {
    /// The session's id.
    pub session_id: String,
    /// First index, 0-based; must name an entry. Omitted: the start.
    #[serde(default)]
    pub start: Option<i64>,
    /// End index, exclusive. Omitted: to the end.
    #[serde(default)]
    pub end: Option<i64>,
    /// Restart the kernel first (default true).
    #[serde(default)]
    pub restart: Option<bool>,
    /// Run-time limit per block in seconds (0 or omitted = none).
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExportHistoryParams {
    /// The session (a past one is read from its journal).
    pub session_id: String,
    /// File to write (relative: to the session's cwd).
    pub path: String,
    /// "transcript", "script" or "notebook".
    pub format: String,
    #[serde(default)]
    pub start: Option<i64>,
    #[serde(default)]
    pub end: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MirrorNotebookParams {
    /// The session.
    pub session_id: String,
    /// The .ipynb to keep up to date (relative: the session's cwd).
    pub path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteFileParams {
    /// Session to run in (default: "default").
    #[serde(default)]
    pub session_id: Option<String>,
    /// The file to run (relative: the session's cwd).
    pub path: String,
    /// Python sees sys.argv = [path, *argv].
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// As for execute.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// As for execute.
    #[serde(default)]
    pub wait_s: Option<f64>,
    /// "persistent" (default) or "fresh" (a new, short-lived kernel).
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InstallPackagesParams {
    /// The session whose Python environment gets the packages.
    pub session_id: String,
    /// Requirement specifiers, e.g. ["tabulate", "numpy>=2"].
    pub packages: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompleteParams {
    /// The session's id.
    pub session_id: String,
    /// The code being completed.
    pub code: String,
    /// Cursor position in Unicode code points (default: the end of `code`).
    #[serde(default)]
    pub cursor_pos: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct IsCompleteParams {
    pub session_id: String,
    /// Code typed so far.
    pub code: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InspectParams {
    /// The session's id.
    pub session_id: String,
    /// The code containing the name to inspect.
    pub code: String,
    /// Cursor position in Unicode code points (default: the end of `code`).
    #[serde(default)]
    pub cursor_pos: Option<usize>,
    /// 0 (signature and docstring) or 1 (also source, when available).
    #[serde(default)]
    pub detail_level: Option<u8>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RegisterEnvironmentParams {
    /// 1-64 of letters, digits, '.', '_', '-'.
    pub name: String,
    /// Interpreter or venv directory.
    pub python: String,
    /// Re-point an existing name at another interpreter (default false).
    #[serde(default)]
    pub replace: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnvironmentNameParams {
    /// The registered name.
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckpointParams {
    /// The Python session's id.
    pub session_id: String,
    /// The checkpoint file (relative: the session's cwd).
    pub path: String,
}
