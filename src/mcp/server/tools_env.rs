//! Named Python environments: register, list, get, validate and remove them. They are kept
//! in the user's config dir across server lifetimes; `create_session(environment=NAME)`
//! launches ipykernel from one. These tools form their own router so a minimal tool set can
//! leave them out.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{Value, json};

use super::KernelMcp;
use crate::mcp::error::ToolResult;
use crate::mcp::params::{EnvironmentNameParams, RegisterEnvironmentParams};
use crate::mcp::render;
use crate::registry::sources::environments::Environment;

/// One line per environment, for models that read text.
pub(crate) fn environment_line(e: &Environment) -> String {
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

fn with(e: &Environment, extra: Value) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let (Value::Object(m), Value::Object(x)) = (&mut v, extra) {
        m.extend(x);
    }
    v
}

#[tool_router(router = env_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Register a Python interpreter or venv under a name (kept across restarts) for
    /// create_session(environment=name). Checks it runs; reports version and ipykernel.
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::EnvironmentOut>()
    )]
    async fn register_environment(
        &self,
        Parameters(p): Parameters<RegisterEnvironmentParams>,
    ) -> ToolResult {
        let base = std::env::current_dir().unwrap_or_default();
        let (env, replaced) = self
            .registry()
            .sources()
            .environments
            .register(&p.name, &p.python, &base, p.replace.unwrap_or(false))
            .await?;
        Ok(render::success(
            format!(
                "{} environment {}",
                if replaced {
                    "re-registered"
                } else {
                    "registered"
                },
                environment_line(&env)
            ),
            &with(&env, json!({"replaced": replaced})),
            vec![],
        ))
    }

    /// List the registered Python environments.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::EnvironmentList>()
    )]
    async fn list_environments(&self) -> ToolResult {
        let envs = self.registry().sources().environments.list().await?;
        let text = if envs.is_empty() {
            "no environments registered (register_environment adds one)".to_string()
        } else {
            envs.iter()
                .map(environment_line)
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok(render::success(
            text,
            &json!({"environments": envs, "path": self.registry().sources().environments.path()}),
            vec![],
        ))
    }

    /// Show one registered Python environment.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::EnvironmentOut>()
    )]
    async fn get_environment(
        &self,
        Parameters(p): Parameters<EnvironmentNameParams>,
    ) -> ToolResult {
        let env = self.registry().sources().environments.get(&p.name).await?;
        Ok(render::success(environment_line(&env), &env, vec![]))
    }

    /// Re-check a registered environment: ok when a session can start from it, else the problem
    /// and install command.
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::EnvironmentOut>()
    )]
    async fn validate_environment(
        &self,
        Parameters(p): Parameters<EnvironmentNameParams>,
    ) -> ToolResult {
        let found = self
            .registry()
            .sources()
            .environments
            .validate(&p.name)
            .await?;
        let line = environment_line(&found.env);
        let text = match &found.problem {
            None => format!("ok: {line}"),
            Some(why) => format!("NOT USABLE: {line}\nproblem: {why}"),
        };
        let v = with(
            &found.env,
            json!({"ok": found.ok(), "runs": found.runs, "problem": found.problem}),
        );
        Ok(render::success(text, &v, vec![]))
    }

    /// Forget a registered environment (running sessions are not affected).
    #[tool(
        annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ),
        output_schema = crate::mcp::schema::output::<crate::mcp::results::EnvironmentRemoved>()
    )]
    async fn remove_environment(
        &self,
        Parameters(p): Parameters<EnvironmentNameParams>,
    ) -> ToolResult {
        let env = self
            .registry()
            .sources()
            .environments
            .remove(&p.name)
            .await?;
        Ok(render::success(
            format!("removed environment {}", env.name),
            &json!({"name": env.name, "removed": true, "python": env.python}),
            vec![],
        ))
    }
}
