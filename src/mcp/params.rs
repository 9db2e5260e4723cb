//! Tool parameters as the model types them (serde + JSON Schema). Doc comments become the
//! schema descriptions. `create_session`'s are parsed once into a [`NewSession`]: its
//! exclusive choices become one [`KernelSource`], so nothing deeper checks combinations of
//! `Option`s. Other validation beyond types happens in the tools.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::error::ToolError;
use crate::registry::{KernelSource, SessionOptions};

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

/// What `create_session` asks for, parsed: the name (`None`: one is made up), where the
/// kernel comes from, and the options beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    pub session_id: Option<String>,
    pub source: KernelSource,
    pub options: SessionOptions,
    /// Keep a live `.ipynb` of the session here from its start (`ops::export::mirror`).
    pub notebook: Option<PathBuf>,
}

impl TryFrom<CreateSessionParams> for NewSession {
    type Error = ToolError;

    /// Errors: `INVALID_ARGUMENT` for a bad name, several kernel sources at once, `kernel_id`
    /// without `gateway`, `env` for an adopted kernel, a bad environment variable name, or a
    /// time out of range.
    fn try_from(p: CreateSessionParams) -> Result<NewSession, ToolError> {
        if let Some(id) = &p.session_id
            && !crate::session::ids::is_valid_name(id)
        {
            return Err(ToolError::invalid(format!(
                "Invalid session_id '{id}': use 1-64 characters from letters, digits, '.', '_' and '-'."
            )));
        }
        let kernel_id = match (p.kernel_id, p.notebook_path) {
            (Some(_), Some(_)) => {
                return Err(ToolError::invalid(
                    "Give notebook_path or kernel_id to adopt a kernel on a gateway, not both.",
                ));
            }
            (Some(id), None) => Some(Adopt::KernelId(id)),
            (None, Some(path)) => Some(Adopt::Notebook(path)),
            (None, None) => None,
        };
        let source = kernel_source(
            p.kernel,
            p.python,
            p.environment,
            p.connection_file,
            p.gateway,
            kernel_id,
        )?;
        let env = p.env.unwrap_or_default();
        if let Some(problem) = crate::kernel::env_problem(&env) {
            return Err(ToolError::invalid(problem));
        }
        if !env.is_empty() && !source.starts_a_kernel() {
            return Err(ToolError::invalid(
                "connection_file, kernel_id and notebook_path adopt a running kernel, which keeps the environment it was started with: give no env with them.",
            ));
        }
        Ok(NewSession {
            session_id: p.session_id,
            source,
            options: SessionOptions {
                cwd: p.cwd.map(PathBuf::from),
                env,
                startup_timeout: seconds(p.startup_timeout_s, "startup_timeout_s")?,
                max_memory_mib: p.max_memory_mib,
                expires_after: seconds(p.expires_after_s, "expires_after_s")?,
                sandbox: p.sandbox,
                sandbox_network: p.sandbox_network,
                jupyter_kernel_id: None,
            },
            notebook: p.notebook.map(PathBuf::from),
        })
    }
}

/// How `create_session` names a running kernel on a gateway to adopt.
#[derive(Debug)]
enum Adopt {
    /// `kernel_id`.
    KernelId(String),
    /// `notebook_path`: the kernel of the notebook open there (a Jupyter Server's sessions).
    Notebook(String),
}

impl Adopt {
    fn param(&self) -> &'static str {
        match self {
            Adopt::KernelId(_) => "kernel_id",
            Adopt::Notebook(_) => "notebook_path",
        }
    }
}

/// The one kernel source `create_session`'s arguments name.
/// Errors: `INVALID_ARGUMENT` naming the arguments that cannot go together.
fn kernel_source(
    kernel: Option<String>,
    python: Option<String>,
    environment: Option<String>,
    connection_file: Option<String>,
    gateway: Option<String>,
    adopt: Option<Adopt>,
) -> Result<KernelSource, ToolError> {
    use KernelSource as S;
    match (kernel, python, environment, connection_file, gateway, adopt) {
        (None, None, None, None, None, None) => Ok(S::Default),
        (Some(k), None, None, None, None, None) => Ok(S::Kernelspec(k)),
        (None, Some(py), None, None, None, None) => Ok(S::Python(py.into())),
        (None, None, Some(e), None, None, None) => Ok(S::Environment(e)),
        (None, None, None, Some(f), None, None) => Ok(S::ConnectionFile(f.into())),
        (kernel, None, None, None, Some(gateway), None) => Ok(S::Gateway { gateway, kernel }),
        (None, None, None, None, Some(gateway), Some(Adopt::KernelId(kernel_id))) => {
            Ok(S::GatewayKernel { gateway, kernel_id })
        }
        (None, None, None, None, Some(gateway), Some(Adopt::Notebook(notebook_path))) => {
            Ok(S::GatewayNotebook {
                gateway,
                notebook_path,
            })
        }
        (Some(_), None, None, None, Some(_), Some(a)) => Err(ToolError::invalid(format!(
            "{} adopts a running kernel: give no kernel with it.",
            a.param()
        ))),
        (_, _, _, _, None, Some(Adopt::KernelId(_))) => Err(ToolError::invalid(
            "kernel_id names a kernel on a gateway: give `gateway` too.",
        )),
        (_, _, _, _, None, Some(Adopt::Notebook(_))) => Err(ToolError::invalid(
            "notebook_path names a notebook open on a Jupyter Server: give `gateway` (that server's name) too.",
        )),
        (kernel, python, environment, connection_file, gateway, adopt) => {
            let given: Vec<&str> = [
                ("kernel", kernel.is_some()),
                ("python", python.is_some()),
                ("environment", environment.is_some()),
                ("connection_file", connection_file.is_some()),
                ("gateway", gateway.is_some()),
                (
                    adopt.as_ref().map_or("kernel_id", Adopt::param),
                    adopt.is_some(),
                ),
            ]
            .into_iter()
            .filter_map(|(name, set)| set.then_some(name))
            .collect();
            Err(ToolError::invalid(format!(
                "{} cannot go together: give one of kernel (a kernelspec), python (an interpreter or venv), environment (a registered one), connection_file (adopt a running kernel), or gateway with kernel, kernel_id or notebook_path.",
                given.join(", ")
            )))
        }
    }
}

/// `v` seconds as a duration. Errors: `INVALID_ARGUMENT` outside `0..=1e7` or not finite.
pub(crate) fn seconds(v: Option<f64>, name: &str) -> Result<Option<Duration>, ToolError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.0..=1e7).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => Err(ToolError::invalid(format!(
            "{name} must be a number of seconds between 0 and 10000000, not {s:?}."
        ))),
    }
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
    /// Longest wait before the code starts, s; then "cancelled". 0: none.
    #[serde(default)]
    pub queue_timeout_s: Option<f64>,
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
    /// Run now beside a busy run (kernel subshell); not in history.
    #[serde(default)]
    pub subshell: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForkSessionParams {
    /// The session to copy (a local Python session, idle).
    pub session_id: String,
    /// The new session's id.
    pub new_session_id: String,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: serde_json::Value) -> CreateSessionParams {
        serde_json::from_value(v).expect("parameters")
    }

    fn parse(v: serde_json::Value) -> Result<NewSession, ToolError> {
        NewSession::try_from(params(v))
    }

    #[test]
    fn each_kernel_choice_is_one_source() {
        let cases = [
            (serde_json::json!({}), KernelSource::Default),
            (
                serde_json::json!({"kernel": "ir"}),
                KernelSource::Kernelspec("ir".into()),
            ),
            (
                serde_json::json!({"python": ".venv"}),
                KernelSource::Python(".venv".into()),
            ),
            (
                serde_json::json!({"environment": "proj"}),
                KernelSource::Environment("proj".into()),
            ),
            (
                serde_json::json!({"connection_file": "k.json"}),
                KernelSource::ConnectionFile("k.json".into()),
            ),
            (
                serde_json::json!({"gateway": "gw"}),
                KernelSource::Gateway {
                    gateway: "gw".into(),
                    kernel: None,
                },
            ),
            (
                serde_json::json!({"gateway": "gw", "kernel": "python3"}),
                KernelSource::Gateway {
                    gateway: "gw".into(),
                    kernel: Some("python3".into()),
                },
            ),
            (
                serde_json::json!({"gateway": "gw", "kernel_id": "abc"}),
                KernelSource::GatewayKernel {
                    gateway: "gw".into(),
                    kernel_id: "abc".into(),
                },
            ),
            (
                serde_json::json!({"gateway": "gw", "notebook_path": "work/a.ipynb"}),
                KernelSource::GatewayNotebook {
                    gateway: "gw".into(),
                    notebook_path: "work/a.ipynb".into(),
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args.clone()).expect("valid").source, want, "{args}");
        }
    }

    #[test]
    fn exclusive_choices_together_are_invalid_and_named() {
        for args in [
            serde_json::json!({"kernel": "python3", "python": "/usr/bin/python3"}),
            serde_json::json!({"environment": "proj", "kernel": "python3"}),
            serde_json::json!({"connection_file": "k.json", "python": "p"}),
            serde_json::json!({"gateway": "gw", "python": "p"}),
            serde_json::json!({"gateway": "gw", "kernel": "k", "kernel_id": "id"}),
            serde_json::json!({"kernel_id": "id"}),
            serde_json::json!({"notebook_path": "a.ipynb"}),
            serde_json::json!({"gateway": "gw", "kernel_id": "id", "notebook_path": "a.ipynb"}),
            serde_json::json!({"gateway": "gw", "kernel": "k", "notebook_path": "a.ipynb"}),
            serde_json::json!({"gateway": "gw", "notebook_path": "a.ipynb", "env": {"A": "1"}}),
            serde_json::json!({"connection_file": "k.json", "env": {"A": "1"}}),
            serde_json::json!({"gateway": "gw", "kernel_id": "id", "env": {"A": "1"}}),
            serde_json::json!({"env": {"A=B": "1"}}),
            serde_json::json!({"session_id": "no spaces"}),
            serde_json::json!({"startup_timeout_s": -1.0}),
        ] {
            let e = parse(args.clone()).expect_err("invalid");
            assert_eq!(e.code, crate::session::ErrorCode::InvalidArgument, "{args}");
        }
        let e = parse(serde_json::json!({"kernel": "a", "environment": "b"})).unwrap_err();
        assert!(
            e.message
                .starts_with("kernel, environment cannot go together"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_options_sit_beside_the_source() {
        let new = parse(serde_json::json!({
            "session_id": "s", "cwd": "/tmp", "env": {"A": "1"},
            "startup_timeout_s": 5, "max_memory_mib": 100, "expires_after_s": 0,
            "notebook": "live.ipynb"
        }))
        .unwrap();
        assert_eq!(new.session_id.as_deref(), Some("s"));
        assert_eq!(new.options.cwd, Some(PathBuf::from("/tmp")));
        assert_eq!(new.options.env.get("A").map(String::as_str), Some("1"));
        assert_eq!(new.options.startup_timeout, Some(Duration::from_secs(5)));
        assert_eq!(new.options.max_memory_mib, Some(100));
        assert_eq!(new.options.expires_after, Some(Duration::ZERO));
        assert_eq!(new.notebook, Some(PathBuf::from("live.ipynb")));
    }
}
