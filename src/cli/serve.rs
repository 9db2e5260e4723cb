//! The serving commands: `serve` (stdio, streamable HTTP or legacy SSE, on a registry of
//! its own), `serve --shared` (the stdio relay to the per-user service) and `service`. Each
//! turns its parsed options into the library's types (an [`HttpAccess`], [`ServiceOptions`],
//! [`Limits`]), builds the registry once on the serving [`Runtimes`], and runs to its end.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use kernel_mcp::auth::{HttpAccess, Token};
use kernel_mcp::config::Limits;
use kernel_mcp::mcp::serve::Runtimes;
use kernel_mcp::registry::Registry;
use kernel_mcp::service::http::{HttpOptions, TokenChoice};
use kernel_mcp::service::listener::ServiceOptions;
use kernel_mcp::service::paths::{ServicePaths, default_socket};

use super::args::{ServeArgs, ServiceArgs, SessionArgs, TokenArgs, Transport};
use super::context::{Context, Failure};

/// `kernel-mcp serve` (not `--shared`): MCP on a registry of this process.
pub fn serve(ctx: Context, args: ServeArgs) -> Result<(), Failure> {
    let addr = std::net::SocketAddr::new(args.host, args.port);
    // OAuth concerns the HTTP faces only: stdio ignores its settings (they may be in the
    // environment of every kernel-mcp a user starts).
    let access = match args.transport {
        Transport::Sse if args.oauth.oauth_issuer.is_some() => {
            return Err(Failure::usage(anyhow::anyhow!(
                "OAuth (--oauth-issuer) is served on `serve --transport http` and `service --http`, not on the legacy SSE transport; use --transport http, or the static token"
            )));
        }
        Transport::Stdio => None,
        Transport::Http | Transport::Sse => {
            let oauth = super::oauth::configured(&args.oauth).map_err(Failure::usage)?;
            let token = given_token(&args.token).map_err(Failure::usage)?;
            Some(HttpAccess::new(addr, token, oauth, &args.allowed_hosts).map_err(Failure::usage)?)
        }
    };
    let limits = Limits {
        max_memory_mib: args.sessions.max_memory_mib,
        image_max_px: args.sessions.image_max_px,
        ..Limits::default()
    };
    let (transport, tools) = (args.transport, args.tools);
    serve_registry(ctx, limits, &args.sessions, move |registry| async move {
        use kernel_mcp::mcp::serve::{serve_http, serve_sse, serve_stdio};
        match (transport, access) {
            (Transport::Sse, Some(access)) => serve_sse(registry, addr, access, tools).await?,
            (Transport::Http, Some(access)) => serve_http(registry, addr, access, tools).await?,
            _ => serve_stdio(registry, tools).await?,
        }
        Ok(())
    })
}

/// `kernel-mcp service`: the sessions behind the per-user socket (and `--http`).
pub fn service(ctx: Context, args: ServiceArgs) -> Result<(), Failure> {
    let mut sessions = args.sessions.clone();
    // The default pool only where python3 exists (an explicit --pool must).
    if sessions.pool.is_empty() && ctx.search.find("python3").is_ok() {
        sessions.pool.push(("python3".into(), 1));
    }
    let http = match args.http {
        Some(addr) => Some(HttpOptions {
            addr,
            token: token_choice(&args.token).map_err(Failure::usage)?,
            oauth: super::oauth::configured(&args.oauth).map_err(Failure::usage)?,
        }),
        None => None,
    };
    let opts = ServiceOptions {
        paths: ServicePaths::new(args.socket.clone().unwrap_or_else(default_socket)),
        idle_exit: (args.idle_exit_s > 0).then(|| std::time::Duration::from_secs(args.idle_exit_s)),
        http,
        http_keep_alive: std::time::Duration::from_secs(args.http_keep_alive_s.max(1)),
        allow_uids: args.allow_uids.clone(),
    };
    let limits = Limits {
        default_expires_after_s: Some(kernel_mcp::config::SERVICE_EXPIRES_AFTER_S),
        max_memory_mib: sessions.max_memory_mib,
        image_max_px: sessions.image_max_px,
        ..Limits::default()
    };
    serve_registry(ctx, limits, &sessions, |registry| async move {
        kernel_mcp::service::listener::run(registry, opts).await?;
        Ok(())
    })
}

/// `kernel-mcp serve --shared`: relay stdio to the service, starting it when none runs.
/// A service it starts gets `sessions`' sandbox.
pub fn relay(
    ctx: &Context,
    socket: Option<PathBuf>,
    sessions: &SessionArgs,
    tools: kernel_mcp::mcp::Toolset,
    rt: &tokio::runtime::Runtime,
) -> ExitCode {
    use kernel_mcp::service::relay;
    let paths = ServicePaths::new(socket.unwrap_or_else(default_socket));
    let mut args = ctx.service_args(&paths);
    args.extend(sessions.service_flags());
    let outcome = rt.block_on(async {
        let mut stream = relay::connect_or_start(&paths, &args).await?;
        // A service started by another client may confine less than asked here.
        if let Some(asked) = sessions.asked_floors() {
            kernel_mcp::service::hello::ask(&mut stream, &asked)
                .await
                .map_err(relay::RelayError::from)?;
        }
        let ask_tools = (tools != kernel_mcp::mcp::Toolset::default()).then(|| tools.to_string());
        relay::relay(stream, &paths.socket, ask_tools).await
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernel-mcp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The token `serve --transport http|sse` requires, if any: `--token-file`, else `--token` /
/// KERNEL_MCP_TOKEN (warning when it is on the command line). Errors: unreadable or empty.
fn given_token(args: &TokenArgs) -> anyhow::Result<Option<Token>> {
    Ok(match token_choice(args)? {
        TokenChoice::File(path) => Some(Token::read_file(&path)?),
        TokenChoice::Given {
            token,
            on_command_line,
        } => {
            if on_command_line {
                tracing::warn!(
                    "the token was given with --token: other local users can read it in the process list (ps); use --token-file PATH or KERNEL_MCP_TOKEN instead"
                );
            }
            Some(token)
        }
        TokenChoice::Generate => None,
    })
}

/// Where the token comes from, per the options (the service generates one for `Generate`).
fn token_choice(args: &TokenArgs) -> anyhow::Result<TokenChoice> {
    if let Some(path) = &args.token_file {
        if args.token_on_command_line {
            anyhow::bail!("give the token with --token or --token-file, not both");
        }
        return Ok(TokenChoice::File(path.clone()));
    }
    Ok(match &args.token {
        Some(t) => {
            let origin = if args.token_on_command_line {
                "--token"
            } else {
                "KERNEL_MCP_TOKEN"
            };
            TokenChoice::Given {
                token: Token::new(t, origin)?,
                on_command_line: args.token_on_command_line,
            }
        }
        None => TokenChoice::Generate,
    })
}

/// Build the runtimes and the registry, run `serve` on the MCP runtime to its end.
fn serve_registry<F, Fut>(
    ctx: Context,
    limits: Limits,
    sessions: &SessionArgs,
    serve: F,
) -> Result<(), Failure>
where
    F: FnOnce(Arc<Registry>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let runtimes = Runtimes::new()
        .map_err(|e| Failure::run(anyhow::anyhow!("cannot start the async runtime: {e}")))?;
    if let Ok(dir) = kernel_mcp::session::history::Journal::dir() {
        let pruned = kernel_mcp::session::history::prune_journals(
            &dir,
            kernel_mcp::session::history::JOURNAL_RETENTION,
        );
        if pruned > 0 {
            tracing::info!("removed {pruned} history journals older than 30 days");
        }
    }
    let Context {
        search,
        env_prefix,
        gateways,
        ..
    } = ctx;
    let mut registry = Registry::new(search, env_prefix, limits, runtimes.sessions())
        .with_sandbox(sessions.sandbox())
        .with_broker(kernel_mcp::broker::BrokerSettings::from_args(
            &sessions.broker,
        ));
    match std::env::current_exe() {
        Ok(exe) => registry = registry.with_supervisor(exe),
        Err(e) => tracing::warn!("kernels run unsupervised: {e}"),
    }
    let registry = Arc::new(
        registry
            .with_gateways(gateways)
            .with_pool(&sessions.pool)
            .map_err(|e| Failure::usage(anyhow::anyhow!("{e}")))?,
    );
    runtimes
        .block_on(async {
            Registry::spawn_reaper(&registry);
            kernel_mcp::memory::spawn_periodic_release();
            registry.fill_pool();
            serve(registry).await
        })
        .map_err(Failure::run)
}
