//! The `kernel-mcp` command line: `serve` (the default; MCP over stdio, or with `--shared` a
//! relay to the per-user service), `service`, `kernels`, `doctor` and `install` (in [`cli`]),
//! and `env` (named Python environments); and the MCP clients of the service for people:
//! `exec`, `sessions`, `session`, `history`, `console`; all in [`cli`].

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::registry::Registry;

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
    /// A Jupyter Server, Kernel Gateway or Enterprise Gateway whose kernels sessions can use
    /// (`create_session(gateway=NAME)`); NAME defaults to `gateway`. Repeatable. Its token comes
    /// from KERNEL_MCP_GATEWAY_TOKEN or --gateway-token-file.
    #[arg(long, global = true, value_name = "[NAME=]URL")]
    gateway: Vec<String>,
    /// A file holding a gateway's token (NAME= for one gateway; without, for every gateway).
    #[arg(long, global = true, value_name = "[NAME=]PATH")]
    gateway_token_file: Vec<String>,
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
        /// Relay stdio to the per-user service (started when none runs), so sessions outlive
        /// this process and are shared with other clients.
        #[arg(long, env = "KERNEL_MCP_SHARED")]
        shared: bool,
        /// The service's socket (with --shared). Default: $XDG_RUNTIME_DIR/kernel-mcp/service.sock,
        /// else ${TMPDIR:-/tmp}/kernel-mcp-<uid>/service.sock.
        #[arg(long, env = "KERNEL_MCP_SOCKET")]
        socket: Option<PathBuf>,
        /// Memory limit per session (the kernel's whole process tree), MiB; 0 = none.
        #[arg(long, env = "KERNEL_MCP_MAX_MEMORY_MIB", default_value_t = 4096)]
        max_memory_mib: u64,
        /// Keep N started kernels of KERNEL for new sessions (KERNEL=N, repeatable).
        #[arg(long, value_name = "KERNEL=N", value_parser = kernel_mcp::registry::sources::pool::parse_pool_arg)]
        pool: Vec<(String, usize)>,
    },
    /// Run the per-user service: the sessions behind a Unix socket, shared by every client.
    Service {
        /// The socket to listen on (default as for `serve --shared`).
        #[arg(long, env = "KERNEL_MCP_SOCKET")]
        socket: Option<PathBuf>,
        /// Exit after this many seconds with no session and no connection (0 = never).
        #[arg(long, env = "KERNEL_MCP_IDLE_EXIT_S", default_value_t = kernel_mcp::service::DEFAULT_IDLE_EXIT_S)]
        idle_exit_s: u64,
        /// Also serve streamable HTTP at ADDR:PORT (path /mcp) on the same sessions.
        #[arg(long, value_name = "ADDR:PORT")]
        http: Option<std::net::SocketAddr>,
        /// Memory limit per session (the kernel's whole process tree), MiB; 0 = none.
        #[arg(long, env = "KERNEL_MCP_MAX_MEMORY_MIB", default_value_t = 4096)]
        max_memory_mib: u64,
        /// Keep N started kernels of KERNEL for new sessions (KERNEL=N, repeatable; default
        /// python3=1, `--pool python3=0` for none).
        #[arg(long, value_name = "KERNEL=N", value_parser = kernel_mcp::registry::sources::pool::parse_pool_arg)]
        pool: Vec<(String, usize)>,
    },
    /// List the kernelspecs kernel-mcp can launch, and where it looked.
    Kernels,
    /// Named Python environments for `create_session(environment=NAME)`.
    Env {
        #[command(subcommand)]
        command: cli::env::EnvCommand,
    },
    /// Run a kernel under supervision (used by the server for each kernel; not for people).
    #[command(hide = true)]
    Supervise {
        /// Stop the kernel when its process tree's memory exceeds this (MiB); 0 = none.
        #[arg(long, default_value_t = 0)]
        max_memory_mib: u64,
        /// Supervise this child process instead of starting argv (a forked kernel).
        #[arg(long)]
        adopt_child: Option<i32>,
        /// Watch this server process instead of the parent.
        #[arg(long)]
        server_pid: Option<i32>,
        /// The kernel's argv.
        #[arg(last = true, required_unless_present = "adopt_child")]
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
    /// Run code in a session of the service. Exit 0 ok, 1 error, 3 timeout/interrupted/
    /// cancelled/kernel died, 4 tool error (e.g. unknown session), 2 usage.
    Exec(cli::exec::ExecArgs),
    /// List the service's sessions (a table, or --json).
    Sessions(cli::sessions::SessionsArgs),
    /// Get, interrupt, restart, destroy or renew one session of the service.
    Session(cli::sessions::SessionArgs),
    /// Show a session's history, or --export it (transcript, script, notebook).
    History(cli::sessions::HistoryArgs),
    /// An interactive console on a session of the service; shows other clients' cells live.
    Console(cli::console::ConsoleArgs),
}

fn main() -> ExitCode {
    // The supervisor is a tiny sync process between the server and a kernel: no runtime, no
    // logging setup, and it must parse its own arguments before anything else runs.
    let cli = Cli::parse();
    if let Some(Command::Supervise {
        max_memory_mib,
        adopt_child,
        server_pid,
        argv,
    }) = cli.command
    {
        return kernel_mcp::kernel::supervise::run(kernel_mcp::kernel::supervise::SuperviseArgs {
            argv,
            max_memory_mib,
            adopt_child,
            server_pid,
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
    kernel_mcp::memory::configure();
    match &cli.command {
        Some(Command::Service { .. }) => {
            if let Err(e) = kernel_mcp::service::log::init_service() {
                eprintln!("kernel-mcp service: no log file ({e}); logging to stderr only");
            }
        }
        _ => kernel_mcp::service::log::init_stderr(),
    }
    let python_env = kernel_mcp::kernel::env_prefix::select_from_process(cli.python_env.as_deref());
    let env_prefix = python_env.as_ref().map(|c| c.prefix.clone());
    let search = KernelSearch::new(
        &cli.kernelspec_dir,
        env_prefix.as_deref(),
        project_kernelspecs().as_deref(),
    );
    let gateways = match gateways(&cli.gateway, &cli.gateway_token_file) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("kernel-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let gateway_args = gateway_flags(&cli);
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
        shared: std::env::var("KERNEL_MCP_SHARED")
            .is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false" | "no" | "off")),
        socket: std::env::var_os("KERNEL_MCP_SOCKET").map(PathBuf::from),
        max_memory_mib: std::env::var("KERNEL_MCP_MAX_MEMORY_MIB")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(4096),
        token: std::env::var("KERNEL_MCP_TOKEN").ok(),
        allowed_hosts: std::env::var("KERNEL_MCP_ALLOWED_HOSTS")
            .map(|h| h.split(',').map(String::from).collect())
            .unwrap_or_default(),
        tools: std::env::var("KERNEL_MCP_TOOLS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or_default(),
        pool: Vec::new(),
    });
    match command {
        Command::Supervise { .. } => ExitCode::SUCCESS, // handled before logging starts
        Command::Doctor { json } => {
            cli::doctor::run(&search, cli.python_env.as_deref(), &gateways, json)
        }
        Command::Install(args) => cli::install::run(&args, python_env.as_ref()),
        Command::Env { command } => cli::env::run(command),
        Command::Exec(args) => {
            let target = service_target(
                args.socket.clone(),
                &cli.kernelspec_dir,
                cli.python_env.as_deref(),
                &gateway_args,
            );
            cli::exec::run(args, target)
        }
        Command::Sessions(args) => {
            let target = service_target(
                args.socket.clone(),
                &cli.kernelspec_dir,
                cli.python_env.as_deref(),
                &gateway_args,
            );
            cli::sessions::run_sessions(args, target)
        }
        Command::Session(args) => {
            let target = service_target(
                args.socket.clone(),
                &cli.kernelspec_dir,
                cli.python_env.as_deref(),
                &gateway_args,
            );
            cli::sessions::run_session(args, target)
        }
        Command::History(args) => {
            let target = service_target(
                args.socket.clone(),
                &cli.kernelspec_dir,
                cli.python_env.as_deref(),
                &gateway_args,
            );
            cli::sessions::run_history(args, target)
        }
        Command::Console(args) => {
            let target = service_target(
                args.socket.clone(),
                &cli.kernelspec_dir,
                cli.python_env.as_deref(),
                &gateway_args,
            );
            cli::console::run(args, target)
        }
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
            shared: true,
            socket,
            ..
        } => relay(
            socket,
            &cli.kernelspec_dir,
            cli.python_env.as_deref(),
            &gateway_args,
        ),
        Command::Service {
            socket,
            idle_exit_s,
            http,
            max_memory_mib,
            mut pool,
        } => {
            // The default pool only where python3 exists (an explicit --pool must).
            if pool.is_empty() && search.find("python3").is_ok() {
                pool.push(("python3".into(), 1));
            }
            let opts = kernel_mcp::service::listener::ServiceOptions {
                paths: kernel_mcp::service::paths::ServicePaths::new(
                    socket.unwrap_or_else(kernel_mcp::service::paths::default_socket),
                ),
                idle_exit: (idle_exit_s > 0).then(|| std::time::Duration::from_secs(idle_exit_s)),
                http,
            };
            let limits = Limits {
                default_expires_after_s: Some(kernel_mcp::config::SERVICE_EXPIRES_AFTER_S),
                max_memory_mib,
                ..Limits::default()
            };
            serve_registry(search, env_prefix, limits, &pool, gateways, |registry| {
                kernel_mcp::service::listener::run(registry, opts)
            })
        }
        Command::Serve {
            transport,
            host,
            port,
            max_memory_mib,
            token,
            allowed_hosts,
            tools,
            pool,
            ..
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
            let limits = Limits {
                max_memory_mib,
                ..Limits::default()
            };
            serve_registry(
                search,
                env_prefix,
                limits,
                &pool,
                gateways,
                move |registry| async move {
                    match access {
                        Some(access) if sse => {
                            kernel_mcp::mcp::serve::serve_sse(registry, addr, access, tools).await
                        }
                        Some(access) => {
                            kernel_mcp::mcp::serve::serve_http(registry, addr, access, tools).await
                        }
                        None => kernel_mcp::mcp::serve::serve_stdio(registry, tools).await,
                    }
                },
            )
        }
    }
}

/// The configured gateways (`--gateway`, tokens from files or KERNEL_MCP_GATEWAY_TOKEN).
/// Errors: a sentence naming the bad flag (never a token).
fn gateways(
    specs: &[String],
    token_files: &[String],
) -> Result<Vec<kernel_mcp::kernel::remote::Rest>, String> {
    let env_token = std::env::var("KERNEL_MCP_GATEWAY_TOKEN").ok();
    kernel_mcp::kernel::remote::parse_gateways(specs, token_files, env_token.as_deref())?
        .into_iter()
        .map(kernel_mcp::kernel::remote::Rest::new)
        .collect()
}

/// Build the runtimes and the registry, run `serve` on the MCP runtime to its end.
fn serve_registry<F, Fut>(
    search: KernelSearch,
    env_prefix: Option<PathBuf>,
    limits: Limits,
    pool: &[(String, usize)],
    gateways: Vec<kernel_mcp::kernel::remote::Rest>,
    serve: F,
) -> ExitCode
where
    F: FnOnce(Arc<Registry>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
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
    let mut registry = Registry::new(search, env_prefix, limits, runtimes.sessions());
    match std::env::current_exe() {
        Ok(exe) => registry = registry.with_supervisor(exe),
        Err(e) => tracing::warn!("kernels run unsupervised: {e}"),
    }
    let registry = match registry.with_gateways(gateways).with_pool(pool) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("kernel-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let serving = async {
        Registry::spawn_reaper(&registry);
        kernel_mcp::memory::spawn_periodic_release();
        registry.fill_pool();
        serve(registry).await
    };
    match runtimes.block_on(serving) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Where the service of the commands for people is, and how they start it when missing.
fn service_target(
    socket: Option<PathBuf>,
    kernelspec_dirs: &[PathBuf],
    python_env: Option<&std::path::Path>,
    gateway_flags: &[std::ffi::OsString],
) -> cli::client::Target {
    cli::client::Target::new(socket, kernelspec_dirs, python_env, gateway_flags)
}

/// `--gateway` and `--gateway-token-file` as given, for a service this process starts (the
/// token in KERNEL_MCP_GATEWAY_TOKEN reaches it through the environment).
fn gateway_flags(cli: &Cli) -> Vec<std::ffi::OsString> {
    let gateways = cli.gateway.iter().flat_map(|g| ["--gateway", g.as_str()]);
    let files = cli
        .gateway_token_file
        .iter()
        .flat_map(|f| ["--gateway-token-file", f.as_str()]);
    gateways.chain(files).map(Into::into).collect()
}

/// `serve --shared`: relay stdio to the service, starting it when none runs.
fn relay(
    socket: Option<PathBuf>,
    kernelspec_dirs: &[PathBuf],
    python_env: Option<&std::path::Path>,
    gateway_flags: &[std::ffi::OsString],
) -> ExitCode {
    use kernel_mcp::service::{paths, relay};
    let paths = paths::ServicePaths::new(socket.unwrap_or_else(paths::default_socket));
    let args = relay::service_args(&paths, kernelspec_dirs, python_env, gateway_flags);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kernel-mcp: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        let stream = relay::connect_or_start(&paths, &args).await?;
        relay::relay(stream, &paths.socket).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernel-mcp: {e}");
            ExitCode::FAILURE
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
