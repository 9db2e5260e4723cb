//! What the commands share once the command line is parsed: the [`Context`] (kernelspecs,
//! the Python environment, gateways, how to start the service) and the [`Failure`] of a
//! serving command with its exit status.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use super::env_prefix::EnvCandidate;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::kernel::remote::Rest;
use kernel_mcp::service::paths::ServicePaths;

use super::args::GlobalArgs;
use super::client::Target;

/// Why a serving command ended badly, and so its exit status.
#[derive(Debug)]
pub enum Failure {
    /// The options cannot work (a bad pool, a token that cannot be read…): status 2.
    Usage(anyhow::Error),
    /// It started and then failed: status 1 (logged, so the service's log has it too).
    Run(anyhow::Error),
}

impl Failure {
    pub fn usage(e: impl Into<anyhow::Error>) -> Failure {
        Failure::Usage(e.into())
    }
    pub fn run(e: impl Into<anyhow::Error>) -> Failure {
        Failure::Run(e.into())
    }
    pub fn exit(self) -> ExitCode {
        match self {
            Failure::Usage(e) => {
                eprintln!("kernel-mcp: {e:#}");
                ExitCode::from(2)
            }
            Failure::Run(e) => {
                tracing::error!("{e:#}");
                ExitCode::FAILURE
            }
        }
    }
}

/// What every command shares: where kernels come from and how to start the service.
pub struct Context {
    pub global: GlobalArgs,
    pub search: KernelSearch,
    /// The selected Python environment (`--python-env`, `$VIRTUAL_ENV`…).
    pub python_env: Option<EnvCandidate>,
    pub env_prefix: Option<PathBuf>,
    pub gateways: Vec<Rest>,
}

impl Context {
    /// Errors: a `--gateway` or `--gateway-token-file` that cannot work (naming the flag,
    /// never a token).
    pub fn new(global: GlobalArgs) -> Result<Context, Failure> {
        let python_env = super::env_prefix::select_from_process(global.python_env.as_deref());
        let env_prefix = python_env.as_ref().map(|c| c.prefix.clone());
        let search = KernelSearch::new(
            &global.kernelspec_dir,
            env_prefix.as_deref(),
            project_kernelspecs().as_deref(),
        );
        let env_token = std::env::var("KERNEL_MCP_GATEWAY_TOKEN").ok();
        let gateways = kernel_mcp::kernel::remote::parse_gateways(
            &global.gateway,
            &global.gateway_token_file,
            env_token.as_deref(),
        )
        .and_then(|g| g.into_iter().map(Rest::new).collect::<Result<Vec<_>, _>>())
        .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
        Ok(Context {
            global,
            search,
            python_env,
            env_prefix,
            gateways,
        })
    }

    /// The arguments that start the service of `paths` with this command's kernelspec
    /// directories, Python environment and gateways (a token in KERNEL_MCP_GATEWAY_TOKEN
    /// reaches it through the environment).
    pub fn service_args(&self, paths: &ServicePaths) -> Vec<OsString> {
        let g = &self.global;
        let gateways = g.gateway.iter().flat_map(|x| ["--gateway", x.as_str()]);
        let files = g
            .gateway_token_file
            .iter()
            .flat_map(|f| ["--gateway-token-file", f.as_str()]);
        let flags: Vec<OsString> = gateways.chain(files).map(Into::into).collect();
        kernel_mcp::service::relay::service_args(
            paths,
            &g.kernelspec_dir,
            g.python_env.as_deref(),
            &flags,
        )
    }

    /// The service on `socket` (default: the per-user one), for the commands for people.
    pub fn target(&self, socket: Option<PathBuf>) -> Target {
        let paths =
            ServicePaths::new(socket.unwrap_or_else(kernel_mcp::service::paths::default_socket));
        let service_args = self.service_args(&paths);
        Target {
            paths,
            service_args,
        }
    }
}

/// The project's own `kernelspecs/`: next to the sources in a dev build, or
/// `<exe>/../share/kernel-mcp/kernelspecs` when installed.
fn project_kernelspecs() -> Option<PathBuf> {
    let dev = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernelspecs");
    if dev.is_dir() {
        return Some(dev);
    }
    let exe = std::env::current_exe().ok()?;
    let installed = exe.parent()?.parent()?.join("share/kernel-mcp/kernelspecs");
    installed.is_dir().then_some(installed)
}
