//! Tools about kernels and sessions: list kernels, create, list, get, interrupt, restart and
//! destroy sessions, and server_info. Each validates its parameters, calls the registry or a
//! session handle and renders the record.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::json;

use super::error::ToolResult;
use super::params::*;
use super::render;
use super::server::{KernelMcp, seconds};
use crate::session::CreateRequest;
use crate::session::ops::variables_note;

#[tool_router(router = session_router, vis = "pub(crate)")]
impl KernelMcp {
    /// List the installed Jupyter kernelspecs (name, language, display name, interrupt mode, where found) and the default kernel.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_kernels(&self) -> ToolResult {
        let kernels: Vec<_> = self
            .registry
            .search
            .list()
            .into_iter()
            .map(|k| {
                json!({
                    "name": k.name, "display_name": k.display_name, "language": k.language,
                    "interrupt_mode": k.interrupt_mode, "resource_dir": k.resource_dir,
                })
            })
            .collect();
        let default = self.registry.default_kernel();
        Ok(render::success(
            render::kernels_text(&kernels, default.as_deref()),
            &json!({"kernels": kernels, "default_kernel": default}),
            vec![],
        ))
    }

    /// Start a new named session on a Jupyter kernel. Variables, imports and data persist across execute calls in it.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = true
    ))]
    async fn create_session(&self, Parameters(p): Parameters<CreateSessionParams>) -> ToolResult {
        let req = CreateRequest {
            session_id: p.session_id,
            kernel: p.kernel,
            python: p.python,
            environment: p.environment,
            cwd: p.cwd.map(PathBuf::from),
            env: p.env.unwrap_or_default(),
            startup_timeout: seconds(p.startup_timeout_s, "startup_timeout_s")?,
            max_memory_mib: p.max_memory_mib,
            expires_after: seconds(p.expires_after_s, "expires_after_s")?,
            connection_file: p.connection_file.map(PathBuf::from),
        };
        let info = self.registry.create(req).await?;
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// List all sessions with their status, kernel, generation and queue.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_sessions(&self) -> ToolResult {
        let sessions = self.registry.list().await;
        let text = if sessions.is_empty() {
            "no sessions".to_string()
        } else {
            let lines: Vec<String> = sessions.iter().map(render::session_text).collect();
            lines.join("\n")
        };
        Ok(render::success(
            text,
            &json!({"sessions": sessions}),
            vec![],
        ))
    }

    /// Show one session: status, kernel, generation, pid, history count, queue, current run.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_session(&self, Parameters(p): Parameters<GetSessionParams>) -> ToolResult {
        let handle = self.registry.get(&p.session_id)?;
        let info = handle.info().await?;
        let mut v = serde_json::to_value(&info).unwrap_or_default();
        let mut text = render::session_text(&info);
        if p.include_variables.unwrap_or(false) {
            match handle.variables().await {
                Ok((vars, total)) => {
                    text.push_str(&render::variables_text(&vars));
                    if let Some(note) = variables_note(vars.len(), total) {
                        v["variables_note"] = note;
                    }
                    v["variables"] = json!(vars);
                }
                Err(e) => v["variables_note"] = json!(e.to_string()),
            }
        }
        Ok(render::success(text, &v, vec![]))
    }

    /// Interrupt the code running in a session (like Ctrl-C). Variables are kept; the kernel is never restarted.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn interrupt_session(&self, Parameters(p): Parameters<SessionIdParams>) -> ToolResult {
        let handle = self.registry.get(&p.session_id)?;
        let (info, run) = handle.interrupt().await?;
        let mut v = serde_json::to_value(&info).unwrap_or_default();
        v["interrupted_run_id"] = json!(run);
        let text = match &run {
            Some(r) => format!("interrupted run {r}\n{}", render::session_text(&info)),
            None => format!("nothing was running\n{}", render::session_text(&info)),
        };
        Ok(render::success(text, &v, vec![]))
    }

    /// Restart a session's kernel: all variables are lost, the generation goes up by one.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    async fn restart_session(&self, Parameters(p): Parameters<RestartSessionParams>) -> ToolResult {
        let handle = self.registry.get(&p.session_id)?;
        let info = handle.restart(p.clear_history.unwrap_or(false)).await?;
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// Shut a session's kernel down (and every process it started) and forget the session.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn destroy_session(&self, Parameters(p): Parameters<SessionIdParams>) -> ToolResult {
        let rung = self.registry.destroy(&p.session_id).await?;
        let v = json!({"session_id": p.session_id, "shutdown": rung});
        Ok(render::success(
            format!(
                "session '{}' destroyed (shutdown: {})",
                p.session_id,
                v["shutdown"].as_str().unwrap_or("")
            ),
            &v,
            vec![],
        ))
    }

    /// Server version, protocol versions, limits, kernelspec directories, session count, and
    /// server_instance (a new id = a new server process).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn server_info(&self) -> ToolResult {
        let sessions = self.registry.session_ids().len();
        let v = json!({
            "name": "kernel-mcp",
            "version": env!("CARGO_PKG_VERSION"),
            "jupyter_protocol_version": crate::wire::PROTOCOL_VERSION,
            "mcp_protocol_versions": rmcp::model::ProtocolVersion::KNOWN_VERSIONS.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            "limits": &*self.registry.limits,
            "kernelspec_dirs": self.registry.search.dirs(),
            "python_environment": self.registry.env_prefix,
            "session_count": sessions,
            "server_instance": crate::instance::current().id,
            "started_at": crate::instance::current().started_at,
        });
        Ok(render::success(
            format!(
                "kernel-mcp {} — {} session(s)",
                env!("CARGO_PKG_VERSION"),
                sessions
            ),
            &v,
            vec![],
        ))
    }
}
