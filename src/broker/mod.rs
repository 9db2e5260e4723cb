//! The broker (docs/broker.md): code in a local Python kernel calls the tools of
//! other MCP servers — `from kernel_mcp import mcp; mcp.call("server", "tool", arguments={…})`
//! — against the project's registry (`.mcp.json` in the session's cwd, or `--mcp-config`),
//! whose `allowedTools` grant is checked on every call.
//!
//! How the pieces fit:
//! - [`Broker`] belongs to the process. It writes the Python helper (`kernel_mcp.py`, shipped
//!   in the binary) once into a private directory, and gives every launch of a Python kernel
//!   a [`KernelEnvHook`]: that directory on `PYTHONPATH`, and `KERNEL_MCP_ENDPOINT` naming the
//!   kernel's *endpoint file* (its connection file with the extension `.mcp`). A pooled
//!   kernel, started before any session, is launched the same way: the file it names is
//!   written only when a session takes it.
//! - [`Broker::attach`] gives a new local Python session an [`endpoint::Endpoint`]: a Unix
//!   socket (0600, in a 0700 directory of the runtime dir) and a random key. The endpoint is
//!   the session's [`SessionObserver`]: when a kernel of the session is ready it writes that
//!   kernel's endpoint file (socket path and key, 0600); when the session interrupts, restarts
//!   or loses its kernel, the calls in flight are cancelled (`outcome_unknown`). It ends when
//!   the session ends (the last holder drops it). Kernel code keeps and uses the session's
//!   artifacts through it too (`from kernel_mcp import artifact`, [`artifacts`]).
//! - A [`project::Project`] is one registry (same file, same content) and its downstream
//!   servers ([`downstream::Downstream`], rmcp clients started lazily), shared by the
//!   sessions attached to it and stopped when the last of them ends.
//!
//! `--mcp-scope none` turns the broker off: no registry is read, no socket is made; Python
//! kernels still find the helper, which says why every call fails. A kernel-mcp started as a
//! downstream stdio server of another one ([`downstream::NO_BROKER_ENV`]) is off the same way
//! (the recursion guard). Remote kernels get no helper; their sessions say so in a notice.

pub mod artifacts;
pub mod bound;
pub mod config;
pub mod conn;
pub mod dialer;
pub mod downstream;
pub mod endpoint;
pub mod expand;
pub mod explain;
pub mod forward;
pub mod helper;
pub mod journal;
pub mod oauth;
pub mod ops;
pub mod project;
pub mod redact;
pub mod shared;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::kernel::{KernelEnvHook, KernelSpec};
use crate::session::observer::SessionObserver;

/// The kernel's endpoint file (set for Python kernels while the broker is on).
pub const ENDPOINT_ENV: &str = "KERNEL_MCP_ENDPOINT";
/// Why the broker is off (set for Python kernels instead of [`ENDPOINT_ENV`]).
pub const OFF_ENV: &str = "KERNEL_MCP_BROKER_OFF";

/// Which registry sessions use (`--mcp-scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum McpScope {
    /// The session cwd's `.mcp.json` (or `--mcp-config PATH` for every session).
    #[default]
    Project,
    /// No broker.
    None,
}

/// The broker's command-line options (on `serve` and `service`, with or without the word).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BrokerArgs {
    /// The broker's registry for every session: a JSON file with `mcpServers` (as in
    /// `.mcp.json`). Default: the `.mcp.json` in each session's cwd.
    #[arg(long, env = "KERNEL_MCP_MCP_CONFIG", value_name = "PATH")]
    pub mcp_config: Option<PathBuf>,
    /// `project` (default: kernels call the registry's MCP tools through `kernel_mcp`) or
    /// `none` (no broker).
    #[arg(long, env = "KERNEL_MCP_MCP_SCOPE", value_enum, default_value_t)]
    pub mcp_scope: McpScope,
}

impl BrokerArgs {
    /// The flags to hand a service this process starts (`serve --shared`, the CLI).
    pub fn service_flags(&self) -> Vec<OsString> {
        let mut flags = Vec::new();
        if self.mcp_scope == McpScope::None {
            flags.extend(["--mcp-scope".into(), "none".into()]);
        }
        if let Some(p) = &self.mcp_config {
            flags.push("--mcp-config".into());
            flags.push(std::path::absolute(p).unwrap_or_else(|_| p.clone()).into());
        }
        flags
    }
}

/// The broker's settings for this process.
#[derive(Debug, Clone, Default)]
pub struct BrokerSettings {
    /// `--mcp-config`: one registry for every session.
    pub config: Option<PathBuf>,
    /// Why the broker is off; `None`: it is on.
    pub off: Option<String>,
}

impl BrokerSettings {
    /// From the command line and the environment: off with `--mcp-scope none`, or when this
    /// kernel-mcp is a downstream server of another one's broker (the recursion guard).
    pub fn from_args(args: &BrokerArgs) -> BrokerSettings {
        let guarded = std::env::var_os(downstream::NO_BROKER_ENV).is_some_and(|v| v == "1");
        let off = if guarded {
            Some("this kernel-mcp runs as an MCP server of another kernel-mcp's broker, so it does not broker again (recursion guard)".to_string())
        } else if args.mcp_scope == McpScope::None {
            Some("kernel-mcp was started with --mcp-scope none".to_string())
        } else {
            None
        };
        BrokerSettings {
            config: args
                .mcp_config
                .as_ref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            off,
        }
    }
}

/// The endpoint file of the kernel with this connection file.
pub fn endpoint_file(connection_file: &Path) -> PathBuf {
    connection_file.with_extension(crate::kernel::connection::ENDPOINT_EXTENSION)
}

fn is_python(spec: &KernelSpec) -> bool {
    spec.language.eq_ignore_ascii_case("python")
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The broker of one server process.
pub struct Broker {
    settings: BrokerSettings,
    /// Where endpoints listen and downstream clients run (the sessions runtime).
    runtime: tokio::runtime::Handle,
    /// The directory holding the helper (`kernel_mcp.py`, `_kernel_mcp_artifacts.py`); `None`
    /// if it could not be written.
    helper_dir: Option<PathBuf>,
    /// Live projects by registry path and content.
    projects: Mutex<HashMap<String, Weak<project::Project>>>,
    /// Sandboxed kernels' dialers waiting for their session ([`dialer`]).
    dialers: Arc<dialer::Dialers>,
}

impl Broker {
    /// The broker for `settings`, running its sockets and clients on `runtime`. Writes the
    /// Python helper (a failure is logged: kernels then have no `kernel_mcp`).
    pub fn new(settings: BrokerSettings, runtime: tokio::runtime::Handle) -> Broker {
        let helper_dir = helper::install()
            .inspect_err(|e| {
                tracing::warn!("the kernel_mcp helper is not available to kernels: {e}")
            })
            .ok();
        if let Some(reason) = &settings.off {
            tracing::info!("broker off: {reason}");
        }
        // What servers that were killed left (a clean exit removes its own).
        if let Ok(dir) = crate::kernel::connection::runtime_dir() {
            let removed = endpoint::remove_dead(&dir);
            if removed > 0 {
                tracing::debug!(removed, "removed dead broker endpoints");
            }
        }
        Broker {
            settings,
            runtime,
            helper_dir,
            projects: Mutex::new(HashMap::new()),
            dialers: Default::default(),
        }
    }

    /// True when sessions get endpoints.
    pub fn is_on(&self) -> bool {
        self.settings.off.is_none()
    }

    /// What every kernel launch adds to a Python kernel's environment (see the module docs);
    /// `None` when the helper could not be written.
    pub fn env_hook(&self) -> Option<KernelEnvHook> {
        let helper = self.helper_dir.clone()?;
        let off = self.settings.off.clone();
        let dialers = self.dialers.clone();
        Some(KernelEnvHook::new(move |launch, env| {
            if !is_python(launch.spec) {
                return None;
            }
            // A sandboxed kernel imports a copy of its own, which it cannot write either.
            let helper = match launch.private_dir.map(helper::install_private) {
                None => helper.clone(),
                Some(Ok(dir)) => dir,
                Some(Err(e)) => {
                    tracing::warn!("the sandboxed kernel gets no kernel_mcp helper: {e}");
                    return None;
                }
            };
            let existing = env
                .get("PYTHONPATH")
                .cloned()
                .or_else(|| std::env::var("PYTHONPATH").ok())
                .filter(|p| !p.is_empty());
            let path = match existing {
                Some(p) => format!("{}:{p}", helper.display()),
                None => helper.display().to_string(),
            };
            env.insert("PYTHONPATH".into(), path);
            if let Some(reason) = &off {
                env.insert(OFF_ENV.into(), reason.clone());
                return None;
            }
            env.insert(
                ENDPOINT_ENV.into(),
                endpoint_file(launch.connection_file).display().to_string(),
            );
            // A sandboxed kernel cannot open a Unix socket: it dials through a descriptor.
            launch.private_dir?;
            match dialers.make(launch.connection_file) {
                Ok(fd) => {
                    env.insert(dialer::DIALER_ENV.into(), dialer::DIALER_FD.to_string());
                    Some(fd)
                }
                Err(e) => {
                    tracing::warn!("the sandboxed kernel gets no broker dialer: {e}");
                    None
                }
            }
        }))
    }

    /// The observer of a new local session of `spec` in `cwd`: an endpoint on the registry
    /// that applies there, through which its kernels also reach the session's `artifacts`,
    /// for a Python kernel while the broker is on; else `None`.
    pub fn attach(
        &self,
        session_id: &str,
        spec: &KernelSpec,
        cwd: &Path,
        artifacts: shared::SessionArtifacts,
    ) -> Option<Arc<dyn SessionObserver>> {
        if !self.is_on() || !is_python(spec) || self.helper_dir.is_none() {
            return None;
        }
        let project = self.project_for(cwd);
        let (runtime, dialers) = (&self.runtime, self.dialers.clone());
        match endpoint::Endpoint::bind(session_id, project, artifacts, runtime, dialers) {
            Ok(e) => Some(Arc::new(e)),
            Err(e) => {
                tracing::warn!(
                    session = session_id,
                    "no broker endpoint for the session: {e}"
                );
                None
            }
        }
    }

    /// The observer of a session whose kernel is remote: its first run (and any run that
    /// mentions `kernel_mcp`) says the broker is not available there.
    pub fn attach_remote(&self, gateway: &str) -> Option<Arc<dyn SessionObserver>> {
        self.is_on().then(|| {
            Arc::new(RemoteNotice {
                gateway: gateway.to_string(),
                told: AtomicBool::new(false),
            }) as Arc<dyn SessionObserver>
        })
    }

    /// The live project of the registry that applies in `cwd`, or a new one.
    fn project_for(&self, cwd: &Path) -> Arc<project::Project> {
        let (path, required) = match &self.settings.config {
            Some(p) => (p.clone(), true),
            None => (cwd.join(".mcp.json"), false),
        };
        let lookup = |k: &str| std::env::var(k).ok();
        let (registry, fingerprint) =
            config::McpRegistry::load_fingerprinted(&path, required, &lookup);
        let key = format!("{}\u{0}{fingerprint}", path.display());
        let mut projects = lock(&self.projects);
        projects.retain(|_, p| p.strong_count() > 0);
        if let Some(p) = projects.get(&key).and_then(Weak::upgrade) {
            return p;
        }
        if !registry.is_valid() {
            tracing::warn!(
                registry = %path.display(),
                "broker registry is invalid; broker calls will fail: {}",
                registry.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
            );
        }
        let project = Arc::new(project::Project::new(registry, self.runtime.clone()));
        projects.insert(key, Arc::downgrade(&project));
        project
    }

    /// Stop every downstream server (server exit), bounded by each server's stop grace.
    pub async fn shutdown(&self) {
        let live: Vec<Arc<project::Project>> = lock(&self.projects)
            .drain()
            .filter_map(|(_, p)| p.upgrade())
            .collect();
        futures::future::join_all(live.iter().map(|p| p.stop())).await;
    }
}

/// A remote session's notice that the broker does not reach its kernel.
struct RemoteNotice {
    gateway: String,
    told: AtomicBool,
}

impl SessionObserver for RemoteNotice {
    fn run_notices(&self, code: &str) -> Vec<String> {
        let first = !self.told.swap(true, Ordering::SeqCst);
        if first || code.contains("kernel_mcp") {
            vec![format!(
                "The MCP broker (`from kernel_mcp import mcp`) is not available in this session: its kernel runs on gateway '{}', which cannot reach kernel-mcp's local socket. Use a local session to call MCP tools from code.",
                self.gateway
            )]
        } else {
            Vec::new()
        }
    }
}
