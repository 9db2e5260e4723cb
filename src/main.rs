//! The `kernel-mcp` command line: `serve` (the default; MCP over stdio), `kernels`, `doctor`
//! and `install` (in [`cli`]), and `env` (named Python environments, [`env_cli`]).

mod cli;
mod env_cli;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::session::Registry;

/// MCP server giving AI agents named, persistent sessions on real Jupyter kernels.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Extra directory of kernelspecs (`<dir>/<name>/kernel.json`), searched first. Repeatable.
    #[arg(long, global = true)]
    kernelspec_dir: Vec<PathBuf>,
    /// Python environment (venv or prefix) used to find kernelspecs and resolve `python` in them.
    /// Default: $VIRTUAL_ENV, else the environment this binary is installed in, else
    /// $CONDA_PREFIX, else ./.venv if present.
    #[arg(long, global = true, env = "KERNEL_MCP_PYTHON_ENV")]
    python_env: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP (default: over stdio).
    Serve {
        /// `stdio`, or `http` (= `streamable-http`).
        #[arg(long, env = "MCP_TRANSPORT", default_value = "stdio")]
        transport: String,
        /// Address to listen on in HTTP mode.
        #[arg(long, env = "MCP_HOST", default_value = "127.0.0.1")]
        host: std::net::IpAddr,
        /// Port to listen on in HTTP mode.
        #[arg(long, env = "MCP_PORT", default_value_t = 8000)]
        port: u16,
        /// Memory limit per session (the kernel's whole process tree), MiB; 0 = none.
        #[arg(long, env = "KERNEL_MCP_MAX_MEMORY_MIB", default_value_t = 4096)]
        max_memory_mib: u64,
    },
    /// List the kernelspecs kernel-mcp can launch, and where it looked.
    Kernels,
    /// Named Python environments for `create_session(environment=NAME)`.
    Env {
        #[command(subcommand)]
        command: env_cli::EnvCommand,
    },
    /// Run a kernel under supervision (used by the server for each kernel; not for people).
    #[command(hide = true)]
    Supervise {
        /// Stop the kernel when its process tree's memory exceeds this (MiB); 0 = none.
        #[arg(long, default_value_t = 0)]
        max_memory_mib: u64,
        /// The kernel's argv.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Check the setup: kernelspecs, Python environments, the service. Exit 0 when the
    /// default kernel can start; otherwise 1, with the fix.
    Doctor {
        /// Print the report as JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Write kernel-mcp's entry into an MCP client's config (shown first; the rest of the file
    /// is kept).
    Install(cli::install::InstallArgs),
}

fn main() -> ExitCode {
    // The supervisor is a tiny sync process between the server and a kernel: no runtime, no
    // logging setup, and it must parse its own arguments before anything else runs.
    let cli = Cli::parse();
    if let Some(Command::Supervise {
        max_memory_mib,
        argv,
    }) = cli.command
    {
        return kernel_mcp::kernel::supervise::run(kernel_mcp::kernel::supervise::SuperviseArgs {
            argv,
            max_memory_mib,
        });
    }
    // A file-size limit (RLIMIT_FSIZE) must fail a write, not kill the server and every session.
    // SAFETY: setting a signal's disposition to ignore is always sound.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGXFSZ,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KERNEL_MCP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("kernel_mcp=info")),
        )
        .init();
    let python_env = kernel_mcp::kernel::env_prefix::select_from_process(cli.python_env.as_deref());
    let env_prefix = python_env.as_ref().map(|c| c.prefix.clone());
    let search = KernelSearch::new(
        &cli.kernelspec_dir,
        env_prefix.as_deref(),
        project_kernelspecs().as_deref(),
    );
    let command = cli.command.unwrap_or_else(|| Command::Serve {
        transport: std::env::var("MCP_TRANSPORT").unwrap_or_else(|_| "stdio".into()),
        host: std::env::var("MCP_HOST")
            .ok()
            .and_then(|h| h.parse().ok())
            .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1])),
        port: std::env::var("MCP_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(8000),
        max_memory_mib: std::env::var("KERNEL_MCP_MAX_MEMORY_MIB")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(4096),
    });
    match command {
        Command::Doctor { json } => cli::doctor::run(&search, cli.python_env.as_deref(), json),
        Command::Install(args) => cli::install::run(&args, python_env.as_ref()),
        Command::Env { command } => env_cli::run(command),
        Command::Kernels => {
            for spec in search.list() {
                println!(
                    "{:<16} {:<10} {:<32} {}",
                    spec.name,
                    spec.language,
                    spec.display_name,
                    spec.resource_dir.display()
                );
            }
            println!(
                "searched: {}",
                search
                    .dirs()
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            ExitCode::SUCCESS
        }
        Command::Supervise { .. } => ExitCode::SUCCESS, // handled before logging starts
        Command::Serve {
            transport,
            host,
            port,
            max_memory_mib,
        } => {
            let http = match transport.as_str() {
                "stdio" => false,
                "http" | "streamable-http" => true,
                other => {
                    eprintln!("kernel-mcp: unknown transport '{other}'; use stdio or http");
                    return ExitCode::from(2);
                }
            };
            let runtimes = match kernel_mcp::mcp::serve::Runtimes::new() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("kernel-mcp: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if let Ok(dir) = kernel_mcp::session::history::Journal::dir() {
                let pruned = kernel_mcp::session::history::prune_journals(
                    &dir,
                    kernel_mcp::session::history::JOURNAL_RETENTION,
                );
                if pruned > 0 {
                    tracing::info!("removed {pruned} history journals older than 30 days");
                }
            }
            let limits = Limits {
                max_memory_mib,
                ..Limits::default()
            };
            let mut registry = Registry::new(search, env_prefix, limits, runtimes.sessions());
            match std::env::current_exe() {
                Ok(exe) => registry = registry.with_supervisor(exe),
                Err(e) => tracing::warn!("kernels run unsupervised: {e}"),
            }
            let registry = Arc::new(registry);
            let result = if http {
                runtimes.block_on(kernel_mcp::mcp::serve::serve_http(
                    registry,
                    std::net::SocketAddr::new(host, port),
                ))
            } else {
                runtimes.block_on(kernel_mcp::mcp::serve::serve_stdio(registry))
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    ExitCode::FAILURE
                }
            }
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
