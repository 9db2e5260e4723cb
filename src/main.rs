//! The `kernel-mcp` command line: `serve` (the default; MCP over stdio) and `kernels`.

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
    /// Default: $VIRTUAL_ENV, else $CONDA_PREFIX, else ./.venv if present.
    #[arg(long, global = true, env = "KERNEL_MCP_PYTHON_ENV")]
    python_env: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP (default: over stdio).
    Serve {
        /// `stdio`, `http` (= `streamable-http`), or `sse` (the legacy 2024-11-05 HTTP+SSE).
        #[arg(long, env = "MCP_TRANSPORT", default_value = "stdio")]
        transport: String,
        /// Address to listen on in HTTP mode.
        #[arg(long, env = "MCP_HOST", default_value = "127.0.0.1")]
        host: std::net::IpAddr,
        /// Port to listen on in HTTP mode.
        #[arg(long, env = "MCP_PORT", default_value_t = 8000)]
        port: u16,
        /// Bearer token HTTP clients must send (`Authorization: Bearer <token>`); required to
        /// listen beyond loopback.
        #[arg(long, env = "KERNEL_MCP_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Host name clients use to reach this server over HTTP (allowed as Host/Origin besides
        /// loopback and the bind address). Repeatable.
        #[arg(
            long = "allowed-host",
            env = "KERNEL_MCP_ALLOWED_HOSTS",
            value_delimiter = ','
        )]
        allowed_hosts: Vec<String>,
        /// `full` (every tool) or `minimal` (create_session, execute, get_execution,
        /// send_input, interrupt_session, restart_session, list_sessions).
        #[arg(long, env = "KERNEL_MCP_TOOLS", default_value = "full")]
        tools: kernel_mcp::mcp::Toolset,
    },
    /// List the kernelspecs kernel-mcp can launch, and where it looked.
    Kernels,
}

fn main() -> ExitCode {
    {
        use tracing_subscriber::prelude::*;
        let stderr = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_filter(
                tracing_subscriber::EnvFilter::try_from_env("KERNEL_MCP_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("kernel_mcp=info")),
            );
        // Log messages to MCP clients that called logging/setLevel.
        let to_clients = kernel_mcp::mcp::logging::McpLogLayer.with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("kernel_mcp", tracing::Level::DEBUG),
        );
        tracing_subscriber::registry()
            .with(stderr)
            .with(to_clients)
            .init();
    }
    let cli = Cli::parse();
    let env_prefix = cli.python_env.clone().or_else(default_env_prefix);
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
        token: std::env::var("KERNEL_MCP_TOKEN").ok(),
        allowed_hosts: std::env::var("KERNEL_MCP_ALLOWED_HOSTS")
            .map(|h| h.split(',').map(String::from).collect())
            .unwrap_or_default(),
        tools: std::env::var("KERNEL_MCP_TOOLS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or_default(),
    });
    match command {
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
        Command::Serve {
            transport,
            host,
            port,
            token,
            allowed_hosts,
            tools,
        } => {
            let (http, sse) = match transport.as_str() {
                "stdio" => (false, false),
                "http" | "streamable-http" => (true, false),
                "sse" => (true, true),
                other => {
                    eprintln!("kernel-mcp: unknown transport '{other}'; use stdio, http or sse");
                    return ExitCode::from(2);
                }
            };
            let addr = std::net::SocketAddr::new(host, port);
            let access = if http {
                match kernel_mcp::mcp::http::HttpAccess::new(addr, token, &allowed_hosts) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        eprintln!("kernel-mcp: {e}");
                        return ExitCode::from(2);
                    }
                }
            } else {
                None
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
            let registry = Arc::new(Registry::new(
                search,
                env_prefix,
                Limits::default(),
                runtimes.sessions(),
            ));
            let result = match access {
                Some(access) if sse => runtimes.block_on(kernel_mcp::mcp::serve::serve_sse(
                    registry, addr, access, tools,
                )),
                Some(access) => runtimes.block_on(kernel_mcp::mcp::serve::serve_http(
                    registry, addr, access, tools,
                )),
                None => runtimes.block_on(kernel_mcp::mcp::serve::serve_stdio(registry, tools)),
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

/// $VIRTUAL_ENV, else $CONDA_PREFIX, else `./.venv` when it exists.
fn default_env_prefix() -> Option<PathBuf> {
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(v));
        }
    }
    let local = std::env::current_dir().ok()?.join(".venv");
    local.join("bin").join("python").exists().then_some(local)
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
