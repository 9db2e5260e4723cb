//! Where a session's kernel comes from. `create_session`'s exclusive choices are one
//! [`KernelSource`] (parsed once at the MCP edge, `mcp/params.rs`); everything else a session
//! may ask for sits beside it in [`SessionOptions`]. [`Sources`] turns a source and its
//! options into a kernelspec and a launcher: a kernelspec or interpreter found here
//! (`specs`), a registered Python environment (`environments`), a Jupyter server or gateway
//! (`remote`), a running kernel's connection file, or a ready kernel of the warm pool
//! (`pool`, adapted to the session that takes one in `adapt`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Limits;
use crate::kernel::discovery::KernelSearch;
use crate::kernel::remote::{Gateways, Rest};
use crate::kernel::sandbox::paths::PATH_VARS;
use crate::kernel::sandbox::rules::{Protected, Use};
use crate::kernel::{
    KernelEnvHook, KernelLauncher, KernelSpec, LaunchOptions, LocalLauncher, Sandbox,
    SandboxPolicy, SandboxUnavailable,
};
use crate::registry::floors::Floors;
use crate::session::SessionError;

pub mod adapt;
pub mod environments;
pub mod pool;
pub mod remote;
pub(crate) mod specs;

/// Where a session's kernel comes from: exactly one of `create_session`'s `kernel`, `python`,
/// `environment`, `connection_file`, `gateway` + `kernel`, `gateway` + `kernel_id`,
/// `gateway` + `notebook_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// Nothing named: a `.venv` in the session's cwd that has ipykernel, else the default
    /// kernelspec (`python3` if installed, else the first found).
    Default,
    /// An installed kernelspec by name (`list_kernels`).
    Kernelspec(String),
    /// ipykernel from this interpreter or venv directory (relative: the session's cwd).
    Python(PathBuf),
    /// A registered Python environment (`register_environment`).
    Environment(String),
    /// Adopt the running kernel of this connection file (relative: the session's cwd).
    ConnectionFile(PathBuf),
    /// Start `kernel` (`None`: the gateway's default) on a configured gateway.
    Gateway {
        gateway: String,
        kernel: Option<String>,
    },
    /// Adopt the running kernel `kernel_id` on a configured gateway.
    GatewayKernel { gateway: String, kernel_id: String },
    /// Adopt the kernel of the notebook open at `notebook_path` on a configured Jupyter
    /// Server (its `/api/sessions`, docs/jupyter.md).
    GatewayNotebook {
        gateway: String,
        notebook_path: String,
    },
}

impl KernelSource {
    /// True when the source starts a kernel of ours, so `env` applies; an adopted kernel
    /// runs with the environment it was started with.
    pub fn starts_a_kernel(&self) -> bool {
        !matches!(
            self,
            KernelSource::ConnectionFile(_)
                | KernelSource::GatewayKernel { .. }
                | KernelSource::GatewayNotebook { .. }
        )
    }

    /// The configured gateway this source's kernel lives on, if any.
    pub fn gateway(&self) -> Option<&str> {
        match self {
            KernelSource::Gateway { gateway, .. }
            | KernelSource::GatewayKernel { gateway, .. }
            | KernelSource::GatewayNotebook { gateway, .. } => Some(gateway),
            _ => None,
        }
    }
}

/// What a session asks for besides its kernel's source. New per-session options (a sandbox
/// policy, a notebook to mirror, broker settings) belong here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionOptions {
    /// The kernel's working directory (`None`: the server's).
    pub cwd: Option<PathBuf>,
    /// Extra environment variables for the kernel (names checked at the edge).
    pub env: BTreeMap<String, String>,
    /// How long to wait for the kernel to be ready (`None`: the server's default).
    pub startup_timeout: Option<Duration>,
    /// The kernel tree's memory limit (MiB; 0 = none); `None`: the server's default.
    pub max_memory_mib: Option<u64>,
    /// Idle time before the session expires: `None` the server's default, zero never.
    pub expires_after: Option<Duration>,
    /// The sandbox policy; `None`: the server's (`--sandbox`).
    pub sandbox: Option<SandboxPolicy>,
    /// Allow outbound network in the sandbox; `None`: the server's.
    pub sandbox_network: Option<bool>,
    /// The id Jupyter clients will know the session's kernel by (the Jupyter face names a
    /// kernel it starts before the session exists); `None`: a new UUID.
    pub jupyter_kernel_id: Option<String>,
}

/// A kernelspec and the launcher that starts its kernels.
pub struct Launch {
    pub spec: KernelSpec,
    pub launcher: Arc<dyn KernelLauncher>,
}

/// Everything kernels come from, for one server process.
pub struct Sources {
    pub search: KernelSearch,
    /// The Python environment the server was started in (resolves `python` in argv).
    pub env_prefix: Option<PathBuf>,
    /// Named Python environments (`create_session(environment=…)`).
    pub environments: environments::EnvironmentStore,
    /// The configured Jupyter servers and gateways (`--gateway`).
    pub gateways: Gateways,
    /// Started kernels waiting for a session (`--pool`).
    pub pool: pool::Pool,
    /// The `kernel-mcp` binary that supervises each local kernel (see `kernel::supervise`).
    pub supervisor: Option<PathBuf>,
    /// The sandbox every session gets at least (`--sandbox`; see `docs/sandbox.md`).
    pub sandbox: Sandbox,
    /// Adds the broker's variables to each local kernel's environment (`crate::broker`).
    pub env_hook: Option<KernelEnvHook>,
    /// What no sandboxed kernel may be granted (`kernel::sandbox::rules`).
    pub protected: Arc<Protected>,
    ipykernel: specs::IpykernelCache,
}

/// Who asks for a launch, and what it must respect.
pub struct Asker<'a> {
    /// Sessions running now (the pool gives a kernel up when a cold one needs room).
    pub live: usize,
    /// The sandbox and memory floors in force for the asker ([`crate::registry::floors`]).
    pub floors: Floors,
    /// Who a gateway kernel runs as (`KERNEL_USERNAME`, see [`remote::gateway_env`]).
    pub username: &'a str,
}

impl Sources {
    pub fn new(search: KernelSearch, env_prefix: Option<PathBuf>) -> Sources {
        Sources {
            search,
            env_prefix,
            environments: environments::EnvironmentStore::from_env(),
            gateways: Default::default(),
            pool: Default::default(),
            supervisor: None,
            sandbox: Sandbox::NONE,
            env_hook: None,
            protected: Arc::new(Protected::for_user()),
            ipykernel: Default::default(),
        }
    }

    /// The kernel used when none is named: `python3` if installed, else the first found.
    pub fn default_kernel(&self) -> Option<String> {
        specs::default_kernel(&self.search)
    }

    /// The gateway named `name`. Errors: `INVALID_ARGUMENT` naming the configured ones.
    pub fn gateway(&self, name: &str) -> Result<&Rest, SessionError> {
        remote::find(&self.gateways, name)
    }

    /// The spec and launcher of a new session of `source` with `opts`, in `cwd` (resolved),
    /// confined at least as `floors` (the server's, with its client's: see
    /// [`crate::registry::floors`]). `live`: sessions running now (the pool gives a kernel up
    /// when a cold one needs room).
    /// Errors: `KERNEL_NOT_FOUND`, `KERNEL_START_FAILED` (an interpreter without ipykernel),
    /// `INVALID_ARGUMENT` (an unknown gateway), `GATEWAY_UNAVAILABLE`, `UNAUTHORIZED`, `IO_ERROR`.
    /// `asker`: the sessions running now and the floors and name of who asks.
    pub async fn launch(
        &self,
        source: &KernelSource,
        opts: &SessionOptions,
        cwd: &Path,
        limits: &Limits,
        asker: Asker<'_>,
    ) -> Result<Launch, SessionError> {
        let Asker {
            live,
            floors,
            username,
        } = asker;
        let startup_timeout = opts
            .startup_timeout
            .unwrap_or(Duration::from_secs(limits.startup_timeout_s));
        let sandbox = self.sandbox_for(source, opts, cwd, floors.sandbox)?;
        let max_memory_mib = memory_limit(opts.max_memory_mib, floors.max_memory_mib)?;
        let spec = match source {
            KernelSource::ConnectionFile(file) => {
                let (spec, launcher) = specs::adopted(file, cwd, startup_timeout)?;
                return Ok(Launch { spec, launcher });
            }
            KernelSource::Gateway { gateway, kernel } => {
                let rest = self.gateway(gateway)?;
                let env = remote::gateway_env(&opts.env, username)?;
                let (spec, launcher) =
                    remote::launch(rest, kernel.as_deref(), None, &env, startup_timeout).await?;
                return Ok(Launch { spec, launcher });
            }
            KernelSource::GatewayKernel { gateway, kernel_id } => {
                let rest = self.gateway(gateway)?;
                let (spec, launcher) =
                    remote::launch(rest, None, Some(kernel_id), &opts.env, startup_timeout).await?;
                return Ok(Launch { spec, launcher });
            }
            KernelSource::GatewayNotebook {
                gateway,
                notebook_path,
            } => {
                let rest = self.gateway(gateway)?;
                let kernel_id = remote::notebook_kernel(rest, notebook_path).await?;
                let (spec, launcher) =
                    remote::launch(rest, None, Some(&kernel_id), &opts.env, startup_timeout)
                        .await?;
                return Ok(Launch { spec, launcher });
            }
            KernelSource::Default => specs::default(&self.ipykernel, &self.search, cwd).await?,
            KernelSource::Kernelspec(name) => specs::kernelspec(&self.search, name)?,
            KernelSource::Python(python) => specs::python(&self.ipykernel, python, cwd).await?,
            KernelSource::Environment(name) => {
                let env = self.environments.get(name).await?;
                let mut spec = specs::python(&self.ipykernel, &env.python, cwd).await?;
                spec.display_name = format!("Python (environment {name})");
                spec
            }
        };
        let local = LocalLauncher {
            spec,
            opts: LaunchOptions {
                cwd: cwd.to_path_buf(),
                env: opts.env.clone(),
                env_prefix: self.env_prefix.clone(),
                startup_timeout,
                supervisor: self.supervisor.clone(),
                max_memory_mib,
                sandbox,
                env_hook: self.env_hook.clone(),
                protected: self.protected.clone(),
            },
        };
        Ok(Launch {
            spec: local.spec.clone(),
            launcher: self.pool.launcher_for(local, live, limits),
        })
    }

    /// The sandbox of a new session of `source` with `opts` in `cwd`: what it asks for, at
    /// least `floor`. Errors: `INVALID_ARGUMENT` (weaker than the server's, or a grant
    /// the sandbox's rules refuse: see [`Self::check_grants`]), `SANDBOX_UNAVAILABLE` (a
    /// kernel kernel-mcp does not start).
    fn sandbox_for(
        &self,
        source: &KernelSource,
        opts: &SessionOptions,
        cwd: &Path,
        floor: Sandbox,
    ) -> Result<Sandbox, SessionError> {
        let sandbox = Sandbox {
            policy: opts.sandbox.unwrap_or(floor.policy),
            network: opts.sandbox_network.unwrap_or(floor.network),
        };
        if !sandbox.at_least(floor) {
            return Err(SessionError::InvalidArgument(format!(
                "This server sandboxes every session at least as '{floor}' (--sandbox{}, the server's or its client's); a session may ask for a stricter sandbox, not for '{sandbox}'.",
                if floor.network {
                    ", --sandbox-network"
                } else {
                    ""
                }
            )));
        }
        if !sandbox.restricts() {
            return Ok(sandbox);
        }
        let elsewhere = match (source, source.gateway()) {
            (_, Some(gateway)) => Some(format!(
                "the kernels of gateway '{gateway}' run where that server puts them"
            )),
            (KernelSource::ConnectionFile(_), _) => {
                Some("an adopted kernel was started by someone else".to_string())
            }
            _ => None,
        };
        if let Some(why) = elsewhere {
            return Err(SessionError::SandboxUnavailable(SandboxUnavailable {
                sandbox,
                missing: vec![format!(
                    "kernel-mcp sandboxes only the kernels it starts, and {why}"
                )],
            }));
        }
        self.check_grants(opts, cwd)?;
        Ok(sandbox)
    }

    /// The grants a sandboxed session asks for go through the sandbox's rules
    /// (`kernel::sandbox::rules`): its cwd (given, or the server's when it gives none) and
    /// the path entries of its `env` (`PYTHONPATH`, `R_LIBS`…). Errors: `INVALID_ARGUMENT`
    /// naming the path, the rule and the fix.
    fn check_grants(&self, opts: &SessionOptions, cwd: &Path) -> Result<(), SessionError> {
        if let Err(r) = self.protected.check(cwd, Use::Cwd) {
            let whose = match opts.cwd {
                Some(_) => "its cwd".to_string(),
                None => "its cwd (none was given, so the server's working directory)".to_string(),
            };
            return Err(SessionError::InvalidArgument(format!(
                "A sandboxed session cannot have {} as {whose}: {r}. Give a project directory as cwd (create_session(cwd=\"/path/to/project\")), or start kernel-mcp from one.",
                r.path.display()
            )));
        }
        for var in PATH_VARS {
            let Some(value) = opts.env.get(*var) else {
                continue;
            };
            for entry in value.split(':').filter(|e| e.starts_with('/')) {
                if let Err(r) = self.protected.check(Path::new(entry), Use::Read) {
                    return Err(SessionError::InvalidArgument(format!(
                        "env {var} names {entry}, which a sandboxed kernel may not read: {r}. Leave it out of env, or point {var} at a directory inside the project."
                    )));
                }
            }
        }
        Ok(())
    }

    /// Keep `wanted` started kernels for each (kernelspec name, N) in `pool`, launched as a
    /// session with no cwd, env or memory limit of its own would be (see [`pool`]). Filling
    /// starts with [`pool::Pool::fill`]. Errors: a kernelspec not found.
    pub fn add_pool(
        &self,
        pool: &[(String, usize)],
        limits: &Limits,
    ) -> Result<(), pool::PoolError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        for (name, wanted) in pool {
            let spec = self
                .search
                .find(name)
                .map_err(|source| pool::PoolError::NotFound {
                    name: name.clone(),
                    wanted: *wanted,
                    source,
                })?;
            let opts = LaunchOptions {
                cwd: cwd.clone(),
                env: Default::default(),
                env_prefix: self.env_prefix.clone(),
                startup_timeout: Duration::from_secs(limits.startup_timeout_s),
                supervisor: self.supervisor.clone(),
                max_memory_mib: limits.max_memory_mib,
                sandbox: self.sandbox,
                env_hook: self.env_hook.clone(),
                protected: self.protected.clone(),
            };
            self.pool.add(LocalLauncher { spec, opts }, *wanted);
        }
        Ok(())
    }
}

/// The memory limit a session gets (MiB): what it asks for, which may not be more than the
/// server's `ceiling` (`--max-memory-mib`) nor "none" (0) while there is a ceiling; without
/// one, anything. Errors: `INVALID_ARGUMENT` naming the ceiling.
pub fn memory_limit(asked: Option<u64>, ceiling: u64) -> Result<u64, SessionError> {
    match asked {
        None => Ok(ceiling),
        Some(n) if ceiling == 0 || (n > 0 && n <= ceiling) => Ok(n),
        Some(0) => Err(SessionError::InvalidArgument(format!(
            "max_memory_mib 0 (no limit) is not allowed: this server's ceiling is {ceiling} MiB (--max-memory-mib). Ask for at most {ceiling}, or leave max_memory_mib out to get it."
        ))),
        Some(n) => Err(SessionError::InvalidArgument(format!(
            "max_memory_mib {n} is above this server's ceiling of {ceiling} MiB (--max-memory-mib). Ask for at most {ceiling}, or leave max_memory_mib out to get it."
        ))),
    }
}
