//! Tools about kernels and sessions: list kernels, create, list, get, interrupt, restart and
//! destroy sessions, and server_info. Each validates its parameters, calls the registry or a
//! session handle and renders the record.

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

use super::error::ToolResult;
use super::params::*;
use super::render;
use super::results::{
    Destroyed, Interrupted, KernelEntry, KernelList, ServerInfo, SessionDetail, SessionList,
};
use super::schema::output;
use super::server::{KernelMcp, seconds};
use crate::ops::variables_note;
use crate::registry::CreateRequest;
use crate::session::SessionInfo;

#[tool_router(router = session_router, vis = "pub(crate)")]
impl KernelMcp {
    /// The installed kernelspecs (name, language, interrupt mode, where) and the default kernel.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<KernelList>()
    )]
    async fn list_kernels(&self) -> ToolResult {
        let (remote, gateways) =
            crate::registry::sources::remote::list_all(&self.registry.gateways).await;
        let mut kernels: Vec<_> = self
            .registry
            .search
            .list()
            .into_iter()
            .map(|k| KernelEntry {
                name: k.name,
                display_name: k.display_name,
                language: k.language,
                interrupt_mode: k.interrupt_mode,
                resource_dir: k.resource_dir,
                gateway: None,
            })
            .collect();
        kernels.extend(remote.into_iter().map(|r| KernelEntry {
            name: r.spec.name,
            display_name: r.spec.display_name,
            language: r.spec.language,
            interrupt_mode: r.spec.interrupt_mode,
            resource_dir: r.spec.resource_dir,
            gateway: Some(r.gateway),
        }));
        let list = KernelList {
            kernels,
            default_kernel: self.registry.default_kernel(),
            gateways,
        };
        Ok(render::success(render::kernels_text(&list), &list, vec![]))
    }

    /// Start a named session on a Jupyter kernel.
    #[tool(
        annotations(destructive_hint = false, open_world_hint = true),
        output_schema = output::<SessionInfo>()
    )]
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
            gateway: p.gateway,
            kernel_id: p.kernel_id,
            sandbox: p.sandbox,
            sandbox_network: p.sandbox_network,
            notebook: p.notebook.map(PathBuf::from),
            notebook_path: p.notebook_path,
            jupyter_kernel_id: None,
        };
        let info = self.registry.create(req).await?;
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// List sessions: status, kernel, generation, queue.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<SessionList>()
    )]
    async fn list_sessions(&self) -> ToolResult {
        let sessions = self.registry.list().await;
        let text = if sessions.is_empty() {
            "no sessions".to_string()
        } else {
            let lines: Vec<String> = sessions.iter().map(render::session_text).collect();
            lines.join("\n")
        };
        Ok(render::success(text, &SessionList { sessions }, vec![]))
    }

    /// Show one session: status, kernel, generation, pid, history count, queue, current run.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<SessionDetail>()
    )]
    async fn get_session(&self, Parameters(p): Parameters<GetSessionParams>) -> ToolResult {
        let handle = self.registry.get(&p.session_id)?;
        let info = handle.info().await?;
        let mut text = render::session_text(&info);
        let mut detail = SessionDetail {
            info,
            variables: None,
            variables_note: None,
        };
        if p.include_variables.unwrap_or(false) {
            match handle.variables().await {
                Ok((vars, total)) => {
                    text.push_str(&render::variables_text(&vars));
                    detail.variables_note = variables_note(vars.len(), total)
                        .and_then(|n| n.as_str().map(String::from));
                    detail.variables = Some(vars);
                }
                Err(e) => detail.variables_note = Some(e.to_string()),
            }
        }
        Ok(render::success(text, &detail, vec![]))
    }

    /// Interrupt the running code (Ctrl-C); state is kept.
    #[tool(
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = output::<Interrupted>()
    )]
    async fn interrupt_session(&self, Parameters(p): Parameters<SessionIdParams>) -> ToolResult {
        let handle = self.registry.get(&p.session_id)?;
        let (info, run) = handle.interrupt().await?;
        let text = match &run {
            Some(r) => format!("interrupted run {r}\n{}", render::session_text(&info)),
            None => format!("nothing was running\n{}", render::session_text(&info)),
        };
        let v = Interrupted {
            info,
            interrupted_run_id: run,
        };
        Ok(render::success(text, &v, vec![]))
    }

    /// Restart a session's kernel: variables are lost, generation +1.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = false),
        output_schema = output::<SessionInfo>()
    )]
    async fn restart_session(&self, Parameters(p): Parameters<RestartSessionParams>) -> ToolResult {
        let handle = self.registry.get(&p.session_id)?;
        let info = handle.restart(p.clear_history.unwrap_or(false)).await?;
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// Shut a session's kernel down (and every process it started) and forget the session.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = false),
        output_schema = output::<Destroyed>()
    )]
    async fn destroy_session(&self, Parameters(p): Parameters<SessionIdParams>) -> ToolResult {
        let shutdown = self.registry.destroy(&p.session_id).await?;
        let text = format!(
            "session '{}' destroyed (shutdown: {})",
            p.session_id,
            format!("{shutdown:?}").to_lowercase()
        );
        let v = Destroyed {
            session_id: p.session_id,
            shutdown,
        };
        Ok(render::success(text, &v, vec![]))
    }

    /// Server version, protocols, limits, kernelspec dirs, sessions, server_instance.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<ServerInfo>()
    )]
    async fn server_info(&self) -> ToolResult {
        let sessions = self.registry.session_ids().len();
        let v = ServerInfo {
            name: "kernel-mcp".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            jupyter_protocol_version: crate::wire::PROTOCOL_VERSION.into(),
            mcp_protocol_versions: rmcp::model::ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .map(|v| v.to_string())
                .collect(),
            limits: (*self.registry.limits).clone(),
            kernelspec_dirs: self.registry.search.dirs().to_vec(),
            python_environment: self.registry.env_prefix.clone(),
            session_count: sessions,
            pool: self.registry.pool.counts(),
            server_instance: crate::instance::current().id.clone(),
            started_at: crate::instance::current().started_at.clone(),
            sandbox: super::results::SandboxInfo {
                default_policy: self.registry.sandbox.policy,
                network: self.registry.sandbox.network,
                host: crate::kernel::sandbox::HostSupport::current().clone(),
            },
        };
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
