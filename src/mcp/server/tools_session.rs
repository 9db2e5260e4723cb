//! Tools about kernels and sessions: list kernels, create, fork, list, get, interrupt, restart
//! and destroy sessions, and server_info. Each validates its parameters, calls the registry or a
//! session handle and renders the record.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

use super::KernelMcp;
use crate::mcp::error::ToolResult;
use crate::mcp::params::*;
use crate::mcp::render;
use crate::mcp::results::{
    Destroyed, Interrupted, KernelEntry, KernelList, ServerInfo, SessionDetail, SessionList,
};
use crate::mcp::schema::output;
use crate::ops::export::mirror::Mirrors;
use crate::ops::variables_note;
use crate::session::{RunId, RunStatus, SessionHandle, SessionInfo};

#[tool_router(router = session_router, vis = "pub(crate)")]
impl KernelMcp {
    /// The installed kernelspecs (name, language, interrupt mode, where) and the default kernel.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<KernelList>()
    )]
    async fn list_kernels(&self) -> ToolResult {
        let sources = self.registry().sources();
        let (remote, gateways) =
            crate::registry::sources::remote::list_all(&sources.gateways).await;
        let mut kernels: Vec<_> = sources
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
            default_kernel: sources.default_kernel(),
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
        let new = NewSession::try_from(p)?;
        let key = match &new.session_id {
            Some(id) => self.scope.key(id),
            None => self.scope.new_key(),
        };
        let info = self
            .registry()
            .create(&key, new.source, new.options)
            .await?;
        if let Some(notebook) = &new.notebook {
            // A live notebook that cannot be written leaves no session behind.
            let mirrored = match self.registry().get(&key) {
                Ok(handle) => Mirrors::global().start(&handle, notebook).await,
                Err(e) => Err(e),
            };
            if let Err(e) = mirrored {
                let _ = self.registry().destroy(&key).await;
                return Err(e.into());
            }
        }
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// List sessions: status, kernel, generation, queue.
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = output::<SessionList>()
    )]
    async fn list_sessions(&self) -> ToolResult {
        let sessions = self.registry().list(self.scope.viewer()).await;
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
        let handle = self.session(&p.session_id)?;
        let info = handle.info().await?;
        let mut text = render::session_text(&info);
        let mut detail = SessionDetail {
            info,
            variables: None,
            variables_note: None,
        };
        if p.include_variables.unwrap_or(false) {
            match crate::ops::variables(&handle).await {
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

    /// A new session whose kernel is a copy of an idle Python session's live kernel
    /// (variables included); the source is untouched.
    #[tool(
        annotations(destructive_hint = false, open_world_hint = false),
        output_schema = output::<SessionInfo>()
    )]
    async fn fork_session(&self, Parameters(p): Parameters<ForkSessionParams>) -> ToolResult {
        if !crate::session::ids::is_valid_name(&p.new_session_id) {
            return Err(crate::mcp::error::ToolError::invalid(format!(
                "Invalid new_session_id '{}': use 1-64 characters from letters, digits, '.', '_' and '-'.",
                p.new_session_id
            )));
        }
        let info = self
            .registry()
            .fork_session(
                &self.scope.key(&p.session_id),
                &self.scope.key(&p.new_session_id),
            )
            .await?;
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// Interrupt the running code (Ctrl-C), keeping state; waits up to 5 s and says whether the
    /// run stopped. One that did not goes on: restart_session stops it (losing state).
    #[tool(
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = output::<Interrupted>()
    )]
    async fn interrupt_session(&self, Parameters(p): Parameters<SessionIdParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let (_, run) = handle.interrupt().await?;
        let grace = self.limits().interrupt_grace();
        let outcome = match &run {
            Some(r) => Some(stop_outcome(&handle, r, grace).await),
            None => None,
        };
        let info = handle.info().await?;
        let (run_status, stopped, notice) = match (&run, outcome) {
            (Some(r), Some((status, waited))) => {
                let stopped = status.is_final();
                let notice = if stopped {
                    format!(
                        "Run {r} stopped ({}) {} ms after the interrupt; the session's variables are kept.",
                        status.as_str(),
                        waited.as_millis()
                    )
                } else {
                    format!(
                        "Run {r} is still {} {} s after the interrupt: the code ignores SIGINT or is blocked \
                         where an interrupt cannot reach it. It goes on (get_execution(run_id=\"{r}\") waits for it); \
                         restart_session(session_id=\"{}\") will stop it, and loses the session's variables.",
                        status.as_str(),
                        waited.as_secs_f64().round(),
                        info.session_id
                    )
                };
                (Some(status), Some(stopped), Some(notice))
            }
            _ => (None, None, None),
        };
        let text = match &notice {
            Some(n) => format!("{n}\n{}", render::session_text(&info)),
            None => format!("nothing was running\n{}", render::session_text(&info)),
        };
        let v = Interrupted {
            info,
            interrupted_run_id: run,
            run_status,
            stopped,
            notices: notice.into_iter().collect(),
        };
        Ok(render::success(text, &v, vec![]))
    }

    /// Restart a session's kernel: variables are lost, generation +1.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = false),
        output_schema = output::<SessionInfo>()
    )]
    async fn restart_session(&self, Parameters(p): Parameters<RestartSessionParams>) -> ToolResult {
        let handle = self.session(&p.session_id)?;
        let info = handle.restart(p.clear_history.unwrap_or(false)).await?;
        Ok(render::success(render::session_text(&info), &info, vec![]))
    }

    /// Shut a session's kernel down (and every process it started) and forget the session.
    #[tool(
        annotations(destructive_hint = true, open_world_hint = false),
        output_schema = output::<Destroyed>()
    )]
    async fn destroy_session(&self, Parameters(p): Parameters<SessionIdParams>) -> ToolResult {
        let shutdown = self
            .registry()
            .destroy(&self.scope.key(&p.session_id))
            .await?;
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
        let registry = self.registry();
        let sessions = registry.names(self.scope.viewer()).len();
        let floors = registry.floors(self.scope.viewer());
        let v = ServerInfo {
            name: "kernel-mcp".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            jupyter_protocol_version: crate::wire::PROTOCOL_VERSION.into(),
            mcp_protocol_versions: rmcp::model::ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .map(|v| v.to_string())
                .collect(),
            limits: self.limits().clone(),
            kernelspec_dirs: registry.sources().search.dirs().to_vec(),
            python_environment: registry.sources().env_prefix.clone(),
            session_count: sessions,
            pool: registry.sources().pool.counts(),
            server_instance: crate::instance::current().id.clone(),
            started_at: crate::instance::current().started_at.clone(),
            sandbox: crate::mcp::results::SandboxInfo {
                default_policy: floors.sandbox.policy,
                network: floors.sandbox.network,
                floors,
                server_floors: registry.server_floors(),
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

/// Wait up to `grace` for `run` to stop after an interrupt: its status then (final, or still
/// `running` / `awaiting_input`) and how long the wait took. A run that is no longer kept
/// counts as stopped (`interrupted`).
async fn stop_outcome(
    handle: &SessionHandle,
    run: &RunId,
    grace: std::time::Duration,
) -> (RunStatus, std::time::Duration) {
    let started = tokio::time::Instant::now();
    let Ok(mut rx) = handle.watch_run(run).await else {
        return (RunStatus::Interrupted, started.elapsed());
    };
    // An input() after the KeyboardInterrupt is a prompt, not a stop: only a final status
    // ends the wait (the prompt shows as awaiting_input).
    let _ = tokio::time::timeout(grace, rx.wait_for(|s| s.is_final())).await;
    let status = *rx.borrow();
    (status, started.elapsed())
}
