//! What the server has to offer: `list_kernels` (the kernelspecs, local and on gateways,
//! and the default kernel) and `server_info` (version, protocols, limits, where kernelspecs
//! are searched, the server's identity and sandbox).

use std::fmt::Write;
use std::path::PathBuf;

use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Serialize;

use super::out::{Json, Output};
use crate::config::Limits;
use crate::mcp::KernelMcp;
use crate::mcp::caller::Caller;
use crate::mcp::error::ToolError;

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

impl Output for KernelList {
    /// One line per kernelspec, then the default kernel and each gateway's state.
    fn text(&self) -> String {
        let lines: Vec<String> = self
            .kernels
            .iter()
            .map(|k| match &k.gateway {
                Some(g) => format!(
                    "{} — {} ({}) gateway={g}",
                    k.name, k.display_name, k.language
                ),
                None => format!("{} — {} ({})", k.name, k.display_name, k.language),
            })
            .collect();
        let mut text = format!(
            "{}\ndefault kernel: {}",
            lines.join("\n"),
            self.default_kernel.as_deref().unwrap_or("none")
        );
        for g in &self.gateways {
            match &g.error {
                Some(e) => write!(text, "\ngateway {} ({}): {e}", g.name, g.url),
                None => write!(text, "\ngateway {} ({}): ok", g.name, g.url),
            }
            .ok();
        }
        text
    }
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

impl Output for ServerInfo {
    fn text(&self) -> String {
        format!(
            "kernel-mcp {} — {} session(s)",
            self.version, self.session_count
        )
    }
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

#[tool_router(router = kernels_router, vis = "pub(crate)")]
impl KernelMcp {
    /// The installed kernelspecs, the default kernel and the gateways.
    #[tool]
    async fn list_kernels(&self, caller: Caller) -> Result<Json<KernelList>, ToolError> {
        let sources = caller.registry().sources();
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
        Ok(Json(KernelList {
            kernels,
            default_kernel: sources.default_kernel(),
            gateways,
        }))
    }

    /// Server version, protocols, limits and state.
    #[tool]
    async fn server_info(&self, caller: Caller) -> Result<Json<ServerInfo>, ToolError> {
        let registry = caller.registry();
        let sources = registry.sources();
        let floors = registry.floors(&caller.scope.viewer());
        Ok(Json(ServerInfo {
            name: "kernel-mcp".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            jupyter_protocol_version: crate::wire::PROTOCOL_VERSION.into(),
            mcp_protocol_versions: rmcp::model::ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .map(|v| v.to_string())
                .collect(),
            limits: caller.limits().clone(),
            kernelspec_dirs: sources.search.dirs().to_vec(),
            python_environment: sources.env_prefix.clone(),
            session_count: registry.names(&caller.scope.viewer()).len(),
            pool: sources.pool.counts(),
            server_instance: crate::instance::current().id.clone(),
            started_at: crate::instance::current().started_at.clone(),
            sandbox: SandboxInfo {
                default_policy: floors.sandbox.policy,
                network: floors.sandbox.network,
                floors,
                server_floors: registry.server_floors(),
                host: crate::kernel::sandbox::HostSupport::current().clone(),
            },
        }))
    }
}
