//! Tools that run code: `execute` (code the model sends) and `execute_file` (a file on
//! disk, in the session's kernel or, with `mode: "fresh"`, in a short-lived one; see
//! `fresh.rs`). Both queue a run in the caller's session (`default` when none is named,
//! created on first use) and wait for it like every tool that follows a run (`follow.rs`);
//! the client's cancellation of the call cancels the run.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{QueueTimeoutS, Seconds, TimeoutS, WaitS};
use super::out::{Json, Run};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::session::cmd;
use crate::session::{ErrorCode, ExecuteRequest};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteParams {
    /// Default "default", made on first use.
    pub session_id: Option<String>,
    /// At most 1 MiB.
    pub code: String,
    /// Run-time limit, s (interrupt, then restart). 0: none.
    pub timeout_s: Option<Seconds<TimeoutS>>,
    /// Longest wait to start, s (then "cancelled"). 0: none.
    pub queue_timeout_s: Option<Seconds<QueueTimeoutS>>,
    /// Default 50.
    pub wait_s: Option<Seconds<WaitS>>,
    /// Answers for input() prompts, in order.
    pub stdin: Option<Vec<String>>,
    /// Fail unless at this generation.
    pub expected_generation: Option<u64>,
    /// Kernel history (default true).
    pub store_history: Option<bool>,
    /// Run now beside a busy run (kernel subshell); not in history.
    pub subshell: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteFileParams {
    /// Default "default".
    pub session_id: Option<String>,
    /// Relative: the session's cwd.
    pub path: String,
    /// Python sees sys.argv = [path, *argv].
    pub argv: Option<Vec<String>>,
    /// As for execute.
    pub timeout_s: Option<Seconds<TimeoutS>>,
    /// As for execute.
    pub wait_s: Option<Seconds<WaitS>>,
    /// Default persistent; fresh: a new, short-lived kernel.
    pub mode: Option<Mode>,
}

/// Where `execute_file` runs the file. (The variants have plain comments: documented
/// variants would turn the schema's `enum` into a longer `oneOf`.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Mode {
    // The session's kernel.
    #[default]
    Persistent,
    // A new kernel just for this run, shut down after it (the `fresh` tool set).
    Fresh,
}

#[tool_router(router = execute_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Run code in a session's kernel; returns its output (images as image blocks). After
    /// wait_s: "running"; get_execution(run_id).
    #[tool]
    async fn execute(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ExecuteParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Run>, ToolError> {
        let limits = caller.limits();
        if p.code.len() > limits.max_code_bytes {
            return Err(ToolError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "code is {} bytes; the limit is {} bytes. Put large code in a file and use execute_file.",
                    p.code.len(),
                    limits.max_code_bytes
                ),
            ));
        }
        let key = caller.scope.key_or_default(p.session_id.as_deref());
        caller.registry().get_or_default(&key).await?;
        let req = ExecuteRequest {
            store_history: p.store_history.unwrap_or(true),
            timeout: p.timeout_s.and_then(|t| t.limit()),
            queue_timeout: p.queue_timeout_s.and_then(|t| t.limit()),
            stdin: p.stdin.unwrap_or_default(),
            expected_generation: p.expected_generation,
            subshell: p.subshell.unwrap_or(false),
            ..ExecuteRequest::new(p.code)
        };
        let run = self
            .submit_and_wait(&caller, &key, req, p.wait_s, Mode::Persistent, &ctx)
            .await?;
        Ok(Json(run))
    }

    /// Run a file in a session: Python in its namespace, with __file__, sys.argv and the file's
    /// name in tracebacks; other kernels run its contents.
    #[tool]
    async fn execute_file(
        &self,
        caller: Caller,
        Parameters(p): Parameters<ExecuteFileParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Run>, ToolError> {
        let key = caller.scope.key_or_default(p.session_id.as_deref());
        let handle = caller.registry().get_or_default(&key).await?;
        let argv = p.argv.unwrap_or_default();
        let max = caller.limits().max_code_bytes;
        let code = crate::ops::file_code(&handle, &PathBuf::from(&p.path), &argv, max).await?;
        let remote = handle.call(cmd::Info).await?.location != "local";
        let req = ExecuteRequest {
            timeout: p.timeout_s.and_then(|t| t.limit()),
            notices: remote
                .then(|| crate::ops::REMOTE_FILE_NOTICE.to_string())
                .into_iter()
                .collect(),
            ..ExecuteRequest::new(code)
        };
        let mode = p.mode.unwrap_or_default();
        let run = self
            .submit_and_wait(&caller, &key, req, p.wait_s, mode, &ctx)
            .await?;
        Ok(Json(run))
    }
}
