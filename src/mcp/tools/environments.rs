//! Named Python environments (the `environments` tool set): register, list, get, validate
//! and remove them. They are kept in the user's config dir across server lifetimes;
//! `create_session(environment=NAME)` launches ipykernel from one.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::out::{Json, Output};
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;
use crate::registry::sources::environments::Environment;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RegisterEnvironmentParams {
    /// 1-64 of letters, digits, '.', '_', '-'.
    pub name: String,
    /// Interpreter or venv directory.
    pub python: String,
    /// Re-point an existing name.
    pub replace: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnvironmentNameParams {
    pub name: String,
}

/// One line per environment, for models that read text.
fn line(e: &Environment) -> String {
    let kernel = if e.has_ipykernel {
        "ipykernel ok".to_string()
    } else {
        format!(
            "no ipykernel — install: {}",
            e.install_hint.as_deref().unwrap_or("")
        )
    };
    format!(
        "{}: Python {} at {} ({kernel})",
        e.name,
        e.python_version,
        e.python.display()
    )
}

impl Output for Environment {
    fn text(&self) -> String {
        line(self)
    }
}

/// `register_environment`: the environment, and whether it replaced one of that name.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Registered {
    #[serde(flatten)]
    pub env: Environment,
    pub replaced: bool,
}

impl Output for Registered {
    fn text(&self) -> String {
        let verb = if self.replaced {
            "re-registered"
        } else {
            "registered"
        };
        format!("{verb} environment {}", line(&self.env))
    }
}

/// `list_environments`: every registration, and the file they are kept in (null without a
/// config dir).
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnvironmentList {
    pub environments: Vec<Environment>,
    pub path: Option<PathBuf>,
}

impl Output for EnvironmentList {
    fn text(&self) -> String {
        if self.environments.is_empty() {
            return "no environments registered (register_environment adds one)".to_string();
        }
        let lines: Vec<String> = self.environments.iter().map(line).collect();
        lines.join("\n")
    }
}

/// `validate_environment`: the refreshed record, whether a session can start from it, and
/// why not.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Validated {
    #[serde(flatten)]
    pub env: Environment,
    /// A session can start from it.
    pub ok: bool,
    /// The interpreter ran.
    pub runs: bool,
    /// Why a session cannot start from it.
    pub problem: Option<String>,
}

impl Output for Validated {
    fn text(&self) -> String {
        match &self.problem {
            None => format!("ok: {}", line(&self.env)),
            Some(why) => format!("NOT USABLE: {}\nproblem: {why}", line(&self.env)),
        }
    }
}

/// `remove_environment`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnvironmentRemoved {
    pub name: String,
    pub removed: bool,
    pub python: PathBuf,
}

impl Output for EnvironmentRemoved {
    fn text(&self) -> String {
        format!("removed environment {}", self.name)
    }
}

#[tool_router(router = environments_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Register a Python interpreter or venv under a name (kept across restarts) for
    /// create_session(environment=name). Checks it runs; reports version and ipykernel.
    #[tool]
    async fn register_environment(
        &self,
        caller: Caller,
        Parameters(p): Parameters<RegisterEnvironmentParams>,
    ) -> Result<Json<Registered>, ToolError> {
        let base = std::env::current_dir().unwrap_or_default();
        let (env, replaced) = caller
            .registry()
            .sources()
            .environments
            .register(&p.name, &p.python, &base, p.replace.unwrap_or(false))
            .await?;
        Ok(Json(Registered { env, replaced }))
    }

    /// List the registered Python environments.
    #[tool]
    async fn list_environments(&self, caller: Caller) -> Result<Json<EnvironmentList>, ToolError> {
        let store = &caller.registry().sources().environments;
        Ok(Json(EnvironmentList {
            environments: store.list().await?,
            path: store.path().map(PathBuf::from),
        }))
    }

    /// Show one registered Python environment.
    #[tool]
    async fn get_environment(
        &self,
        caller: Caller,
        Parameters(p): Parameters<EnvironmentNameParams>,
    ) -> Result<Json<Environment>, ToolError> {
        let store = &caller.registry().sources().environments;
        Ok(Json(store.get(&p.name).await?))
    }

    /// Re-check a registered environment: ok when a session can start from it, else the problem
    /// and install command.
    #[tool]
    async fn validate_environment(
        &self,
        caller: Caller,
        Parameters(p): Parameters<EnvironmentNameParams>,
    ) -> Result<Json<Validated>, ToolError> {
        let store = &caller.registry().sources().environments;
        let found = store.validate(&p.name).await?;
        Ok(Json(Validated {
            ok: found.ok(),
            runs: found.runs,
            problem: found.problem,
            env: found.env,
        }))
    }

    /// Forget a registered environment (running sessions are not affected).
    #[tool]
    async fn remove_environment(
        &self,
        caller: Caller,
        Parameters(p): Parameters<EnvironmentNameParams>,
    ) -> Result<Json<EnvironmentRemoved>, ToolError> {
        let env = caller
            .registry()
            .sources()
            .environments
            .remove(&p.name)
            .await?;
        Ok(Json(EnvironmentRemoved {
            name: env.name,
            removed: true,
            python: env.python,
        }))
    }
}
