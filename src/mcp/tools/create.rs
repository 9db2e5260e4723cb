//! `create_session`: its parameters, parsed once into a [`NewSession`] (the exclusive
//! kernel choices become one [`KernelSource`], so nothing deeper checks combinations of
//! `Option`s), and the tool, which creates the session in the caller's scope and, when asked,
//! starts its live notebook.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{ExpiresAfterS, Seconds, StartupTimeoutS};
use super::out::Json;
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::ops::export::mirror::Mirrors;
use crate::registry::{KernelSource, SessionOptions};
use crate::session::SessionInfo;

#[tool_router(router = create_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Start a named session on a Jupyter kernel.
    #[tool]
    async fn create_session(
        &self,
        caller: Caller,
        Parameters(p): Parameters<CreateSessionParams>,
    ) -> Result<Json<SessionInfo>, ToolError> {
        let new = NewSession::try_from(p)?;
        let key = match &new.session_id {
            Some(id) => caller.scope.key(id),
            None => caller.scope.new_key(),
        };
        let registry = caller.registry();
        let info = registry.create(&key, new.source, new.options).await?;
        if let Some(notebook) = &new.notebook {
            // A live notebook that cannot be written leaves no session behind.
            let mirrored = match registry.get(&key) {
                Ok(handle) => Mirrors::global().start(&handle, notebook).await,
                Err(e) => Err(e),
            };
            if let Err(e) = mirrored {
                let _ = registry.destroy(&key).await;
                return Err(e.into());
            }
        }
        Ok(Json(info))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateSessionParams {
    /// Session name (1-64 of A-Za-z0-9._-).
    pub session_id: Option<String>,
    /// Kernelspec name (list_kernels).
    pub kernel: Option<String>,
    /// Python interpreter or venv.
    pub python: Option<String>,
    /// Registered environment name.
    pub environment: Option<String>,
    /// Kernel working directory.
    pub cwd: Option<String>,
    /// Extra kernel env vars.
    pub env: Option<BTreeMap<String, String>>,
    /// Readiness wait, s (default 60).
    pub startup_timeout_s: Option<Seconds<StartupTimeoutS>>,
    /// Memory limit, MiB (0 = none).
    pub max_memory_mib: Option<u64>,
    /// Idle seconds until shut down (0 = never).
    pub expires_after_s: Option<Seconds<ExpiresAfterS>>,
    /// Connection file to adopt.
    pub connection_file: Option<String>,
    /// A --gateway name (list_kernels).
    pub gateway: Option<String>,
    /// Adopt this kernel on gateway.
    pub kernel_id: Option<String>,
    /// OS sandbox (default: server's)
    pub sandbox: Option<crate::kernel::SandboxPolicy>,
    pub sandbox_network: Option<bool>,
    /// Live .ipynb to keep.
    pub notebook: Option<String>,
    /// Adopt this notebook's kernel (gateway).
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
    /// without `gateway`, `env` for an adopted kernel, or a bad environment variable name (a
    /// time out of range is refused as the arguments are parsed, see [`Seconds`]).
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
                startup_timeout: p.startup_timeout_s.map(|s| s.get()),
                max_memory_mib: p.max_memory_mib,
                expires_after: p.expires_after_s.map(|s| s.get()),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The arguments parsed as rmcp parses them (a value of the wrong type or out of range
    /// is `INVALID_ARGUMENT` there too), then checked together.
    fn parse(v: serde_json::Value) -> Result<NewSession, ToolError> {
        let params: CreateSessionParams =
            serde_json::from_value(v).map_err(|e| ToolError::invalid(e.to_string()))?;
        NewSession::try_from(params)
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
