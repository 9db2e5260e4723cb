//! From a parsed command line to its end: the process-wide setup (signals, the allocator,
//! logging), what every command shares ([`Context`]: kernelspecs, the Python environment,
//! gateways), the one runtime the command needs, and the command itself.
//!
//! Runtimes: `serve` and `service` run on the serving pair ([`kernel_mcp::mcp::serve::Runtimes`],
//! built where the registry is, in [`super::serve`]); the relay, `doctor` and `env` on one
//! current-thread runtime; the MCP clients of the service (`exec`, `sessions`, `session`,
//! `history`, `console`) on one two-worker runtime (the console's live view runs beside its
//! prompt); `kernels`, `install` and `token` need none.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::kernel::env_prefix::EnvCandidate;
use kernel_mcp::kernel::remote::Rest;
use kernel_mcp::service::paths::ServicePaths;

use super::args::{Command, GlobalArgs};
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
    fn exit(self) -> ExitCode {
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
    fn new(global: GlobalArgs) -> Result<Context, Failure> {
        let python_env =
            kernel_mcp::kernel::env_prefix::select_from_process(global.python_env.as_deref());
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
    fn target(&self, socket: Option<PathBuf>) -> Target {
        let paths =
            ServicePaths::new(socket.unwrap_or_else(kernel_mcp::service::paths::default_socket));
        let service_args = self.service_args(&paths);
        Target {
            paths,
            service_args,
        }
    }
}

/// Run `command` to its end (everything but `supervise`, which `main` runs before any setup).
pub fn run(global: GlobalArgs, command: Command) -> ExitCode {
    setup_process(&command);
    let ctx = match Context::new(global) {
        Ok(c) => c,
        Err(f) => return f.exit(),
    };
    let outcome = match command {
        Command::Serve(args) if args.shared => {
            return with_runtime(Flavor::Light, |rt| {
                super::serve::relay(&ctx, args.socket, &args.sessions, rt)
            });
        }
        Command::Serve(args) => super::serve::serve(ctx, args),
        Command::Service(args) => super::serve::service(ctx, args),
        Command::Supervise(_) => Ok(()), // run by main before any setup
        Command::Kernels => return kernels(&ctx.search),
        Command::Install(args) => return super::install::run(&args, ctx.python_env.as_ref()),
        Command::Token(args) => return super::token::run(args),
        Command::Doctor { json } => {
            return with_runtime(Flavor::Light, |rt| {
                super::doctor::run(
                    rt,
                    &ctx.search,
                    ctx.global.python_env.as_deref(),
                    &ctx.gateways,
                    json,
                )
            });
        }
        Command::Env { command } => {
            return with_runtime(Flavor::Light, |rt| super::env::run(rt, command));
        }
        Command::Exec(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| super::exec::run(args, target, rt));
        }
        Command::Sessions(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| {
                super::sessions::run_sessions(args, target, rt)
            });
        }
        Command::Session(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| {
                super::sessions::run_session(args, target, rt)
            });
        }
        Command::History(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| {
                super::sessions::run_history(args, target, rt)
            });
        }
        Command::Console(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| super::console::run(args, target, rt));
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit(),
    }
}

/// The process-wide setup every command but `supervise` gets.
fn setup_process(command: &Command) {
    // A file-size limit (RLIMIT_FSIZE) must fail a write, not kill the server and every session.
    // SAFETY: setting a signal's disposition to ignore is always sound.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGXFSZ,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
    kernel_mcp::memory::configure();
    match command {
        Command::Service(_) => {
            if let Err(e) = kernel_mcp::service::log::init_service() {
                eprintln!("kernel-mcp service: no log file ({e}); logging to stderr only");
            }
        }
        _ => kernel_mcp::service::log::init_stderr(),
    }
}

/// The runtime a command runs on (see the module docs).
enum Flavor {
    /// One thread: the relay, `doctor`, `env`.
    Light,
    /// Two workers: the MCP clients of the service.
    Client,
}

/// Build the runtime of `flavor`, run `body` with it, and stop it (briefly: a reader thread
/// blocked on stdin must not keep the process alive).
fn with_runtime(
    flavor: Flavor,
    body: impl FnOnce(&tokio::runtime::Runtime) -> ExitCode,
) -> ExitCode {
    let built = match flavor {
        Flavor::Light => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Flavor::Client => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kernel-mcp: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = body(&rt);
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

/// `kernel-mcp kernels`: one line per kernelspec, then the directories searched.
fn kernels(search: &KernelSearch) -> ExitCode {
    let mut text = String::new();
    for spec in search.list() {
        text.push_str(&format!(
            "{:<16} {:<10} {:<32} {}\n",
            spec.name,
            spec.language,
            spec.display_name,
            spec.resource_dir.display()
        ));
    }
    let dirs: Vec<String> = search
        .dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    text.push_str(&format!("searched: {}\n", dirs.join(", ")));
    super::client::out(&text);
    ExitCode::SUCCESS
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
