//! The command line's shape (clap): every command and option, with its environment variable
//! and default written once, here (docs/cli.md is the reference).
//!
//! `kernel-mcp` with no command is `kernel-mcp serve`, and every option of `serve` works
//! without the word (`kernel-mcp --tools minimal`, `kernel-mcp --pool python3=2`), because
//! MCP client configs put flags right after the command: [`ServeArgs`] is flattened into the
//! top level as well as being `serve`'s. [`parse`] then refuses a `serve` option written before
//! another command (it would do nothing there) and notes where a token came from (a token on
//! the command line shows in `ps`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use kernel_mcp::mcp::Toolset;

/// MCP server giving AI agents named, persistent sessions on real Jupyter kernels.
///
/// Without a command it serves MCP on stdio (`serve`); `serve`'s options work here too.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub global: GlobalArgs,
    /// `serve`'s options, for `kernel-mcp` without a command.
    #[command(flatten, next_help_heading = "Serve options (also after `serve`)")]
    pub serve: ServeArgs,
}

/// Options of every command: where kernels and remote servers are.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Extra directory of kernelspecs (`<dir>/<name>/kernel.json`), searched first. Repeatable.
    #[arg(long, global = true)]
    pub kernelspec_dir: Vec<PathBuf>,
    /// Python environment (venv or prefix) used to find kernelspecs and resolve `python` in them.
    /// Default: $VIRTUAL_ENV, else the environment this binary is installed in, else
    /// $CONDA_PREFIX, else ./.venv if present.
    #[arg(long, global = true, env = "KERNEL_MCP_PYTHON_ENV")]
    pub python_env: Option<PathBuf>,
    /// A Jupyter Server, Kernel Gateway or Enterprise Gateway whose kernels sessions can use
    /// (`create_session(gateway=NAME)`); NAME defaults to `gateway`. Repeatable. Its token comes
    /// from KERNEL_MCP_GATEWAY_TOKEN or --gateway-token-file.
    #[arg(long, global = true, value_name = "[NAME=]URL")]
    pub gateway: Vec<String>,
    /// A file holding a gateway's token (NAME= for one gateway; without, for every gateway).
    #[arg(long, global = true, value_name = "[NAME=]PATH")]
    pub gateway_token_file: Vec<String>,
}

/// How `serve` speaks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP at `/mcp`.
    #[value(alias = "streamable-http")]
    Http,
    /// The legacy 2024-11-05 HTTP+SSE transport (`GET /sse`, `POST /messages`).
    Sse,
}

/// `kernel-mcp serve` (and `kernel-mcp` alone).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// `stdio`, `http` (= `streamable-http`), or `sse` (the legacy 2024-11-05 HTTP+SSE).
    #[arg(long, env = "MCP_TRANSPORT", value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,
    /// Address to listen on in HTTP mode.
    #[arg(long, env = "MCP_HOST", default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on in HTTP mode (0: one the OS picks; the log says which).
    #[arg(long, env = "MCP_PORT", default_value_t = 8000)]
    pub port: u16,
    #[command(flatten)]
    pub token: TokenArgs,
    #[command(flatten)]
    pub oauth: OAuthArgs,
    /// Host name clients use to reach this server over HTTP (allowed as Host/Origin besides
    /// loopback and the bind address). Repeatable.
    #[arg(
        long = "allowed-host",
        env = "KERNEL_MCP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// `default` (the everyday tools), `all`, `minimal` or `code`, plus named sets
    /// (`environments`, `checkpoints`, `service`, `fresh`, `completion`, `history`),
    /// comma-separated: `--tools default,environments`. See docs/tools.md.
    #[arg(long, env = "KERNEL_MCP_TOOLS", default_value = "default")]
    pub tools: Toolset,
    /// Relay stdio to the per-user service (started when none runs), so sessions outlive
    /// this process and are shared with other clients.
    #[arg(long, env = "KERNEL_MCP_SHARED", value_parser = clap::builder::FalseyValueParser::new())]
    pub shared: bool,
    /// The service's socket (with --shared). Default: $XDG_RUNTIME_DIR/kernel-mcp/service.sock,
    /// else ${TMPDIR:-/tmp}/kernel-mcp-<uid>/service.sock.
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
    #[command(flatten)]
    pub sessions: SessionArgs,
}

/// The token of an HTTP face. The server's own secret: it never reaches a kernel.
#[derive(Debug, Clone, Default, Args)]
pub struct TokenArgs {
    /// Token HTTP clients must send (`Authorization: Bearer <token>`). Given here, other
    /// local users can read it in the process list: prefer --token-file or KERNEL_MCP_TOKEN.
    #[arg(long, env = "KERNEL_MCP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file whose first line is the token (wins over KERNEL_MCP_TOKEN).
    #[arg(long, env = "KERNEL_MCP_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Set by [`parse`]: the token was written on the command line (`--token`).
    #[arg(skip)]
    pub token_on_command_line: bool,
}

/// OAuth 2.1 access tokens on an HTTP face, beside the static token (docs/auth.md).
#[derive(Debug, Clone, Args)]
pub struct OAuthArgs {
    /// Accept OAuth access tokens (JWTs) from this authorization server: its issuer
    /// identifier, exactly as its tokens' `iss` (https://…; http:// only on loopback).
    #[arg(long, env = "KERNEL_MCP_OAUTH_ISSUER", value_name = "URL")]
    pub oauth_issuer: Option<String>,
    /// This server's canonical URL as clients reach it (e.g. https://kernels.example.com/mcp):
    /// tokens must name it in `aud` (RFC 8707). Required with --oauth-issuer.
    #[arg(long, env = "KERNEL_MCP_OAUTH_AUDIENCE", value_name = "URI")]
    pub oauth_audience: Option<String>,
    /// The scope that lets a token list and read.
    #[arg(long, env = "KERNEL_MCP_OAUTH_READ_SCOPE", value_name = "SCOPE",
          default_value = kernel_mcp::auth::oauth::DEFAULT_READ_SCOPE)]
    pub oauth_read_scope: String,
    /// The scope that lets a token run code and create or destroy sessions (and read).
    #[arg(long, env = "KERNEL_MCP_OAUTH_EXECUTE_SCOPE", value_name = "SCOPE",
          default_value = kernel_mcp::auth::oauth::DEFAULT_EXECUTE_SCOPE)]
    pub oauth_execute_scope: String,
    /// The scope that lets a token act on every user's sessions.
    #[arg(long, env = "KERNEL_MCP_OAUTH_ADMIN_SCOPE", value_name = "SCOPE",
          default_value = kernel_mcp::auth::oauth::DEFAULT_ADMIN_SCOPE)]
    pub oauth_admin_scope: String,
}

/// What the sessions of a server get, in `serve` and `service` alike.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Memory limit per session (the kernel's whole process tree), MiB; 0 = none.
    #[arg(long, env = "KERNEL_MCP_MAX_MEMORY_MIB", default_value_t = 4096)]
    pub max_memory_mib: u64,
    /// Keep N started kernels of KERNEL for new sessions (KERNEL=N, repeatable). `service`
    /// keeps python3=1 unless told (`--pool python3=0` for none).
    #[arg(long, value_name = "KERNEL=N", value_parser = kernel_mcp::registry::sources::pool::parse_pool_arg)]
    pub pool: Vec<(String, usize)>,
    /// The OS sandbox of every session (none, workspace, read-only); a session may ask for a
    /// stricter one, never a weaker (docs/sandbox.md).
    #[arg(long, env = "KERNEL_MCP_SANDBOX", default_value = "none")]
    pub sandbox: kernel_mcp::kernel::SandboxPolicy,
    /// Let sandboxed sessions reach the network (and let a session ask for it).
    #[arg(long, env = "KERNEL_MCP_SANDBOX_NETWORK")]
    pub sandbox_network: bool,
    /// Longest side, in pixels, of an image the agent gets: larger ones are scaled down (the
    /// original stays the run's resource).
    #[arg(long, env = "KERNEL_MCP_IMAGE_MAX_PX", default_value_t = kernel_mcp::config::DEFAULT_IMAGE_MAX_PX,
          value_parser = clap::value_parser!(u32).range(16..=65535))]
    pub image_max_px: u32,
    /// `--mcp-config`, `--mcp-scope`: the broker (kernel code calling MCP tools).
    #[command(flatten)]
    pub broker: kernel_mcp::broker::BrokerArgs,
    /// Set by [`parse`]: `--max-memory-mib` (or its variable) was given, not defaulted.
    #[arg(skip)]
    pub max_memory_given: bool,
}

impl SessionArgs {
    /// The sandbox every session gets unless it asks for a stricter one.
    pub fn sandbox(&self) -> kernel_mcp::kernel::Sandbox {
        kernel_mcp::kernel::Sandbox {
            policy: self.sandbox,
            network: self.sandbox_network,
        }
    }

    /// The floors a client of the service asks for (its hello, `service::hello`): the
    /// sandbox when it restricts, the memory ceiling when given; `None` when neither.
    pub fn asked_floors(&self) -> Option<kernel_mcp::registry::floors::Floors> {
        let sandbox = self.sandbox();
        let memory = self.max_memory_given.then_some(self.max_memory_mib);
        (sandbox.restricts() || memory.is_some()).then(|| kernel_mcp::registry::floors::Floors {
            sandbox,
            max_memory_mib: memory.unwrap_or(0),
        })
    }

    /// `--sandbox`, `--sandbox-network`, a given `--max-memory-mib` and the broker's flags
    /// for a service this process starts, so it sandboxes and brokers as asked here.
    pub fn service_flags(&self) -> Vec<std::ffi::OsString> {
        let mut flags: Vec<std::ffi::OsString> =
            vec!["--sandbox".into(), self.sandbox.as_str().into()];
        if self.sandbox_network {
            flags.push("--sandbox-network".into());
        }
        if self.max_memory_given {
            flags.extend([
                "--max-memory-mib".into(),
                self.max_memory_mib.to_string().into(),
            ]);
        }
        if self.image_max_px != kernel_mcp::config::DEFAULT_IMAGE_MAX_PX {
            flags.extend([
                "--image-max-px".into(),
                self.image_max_px.to_string().into(),
            ]);
        }
        flags.extend(self.broker.service_flags());
        flags
    }
}

/// `kernel-mcp service` (without a command: run it).
#[derive(Debug, Clone, Args)]
pub struct ServiceArgs {
    /// `status`, `stop` or `restart` the running service instead of running one.
    #[command(subcommand)]
    pub action: Option<super::service_ctl::ServiceCommand>,
    /// The socket to listen on (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Exit after this many seconds with no session and no connection (0 = never).
    #[arg(long, env = "KERNEL_MCP_IDLE_EXIT_S", default_value_t = kernel_mcp::service::DEFAULT_IDLE_EXIT_S)]
    pub idle_exit_s: u64,
    /// Also serve streamable HTTP at ADDR:PORT (path /mcp) on the same sessions, always
    /// behind a token: --token-file, KERNEL_MCP_TOKEN, else one generated next to the socket
    /// (`kernel-mcp token` prints it).
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// Close an HTTP MCP session idle this many seconds when it holds no default session
    /// (one that does lives until the client deletes it or the default expires).
    #[arg(long, env = "KERNEL_MCP_HTTP_KEEP_ALIVE_S", default_value_t = 300)]
    pub http_keep_alive_s: u64,
    /// Also admit this other user on the socket (repeatable; comma-separated in the env):
    /// each is a principal of its own, and its code runs as this service's user.
    #[arg(
        long = "allow-uid",
        value_name = "UID",
        env = "KERNEL_MCP_ALLOW_UIDS",
        value_delimiter = ','
    )]
    pub allow_uids: Vec<u32>,
    #[command(flatten)]
    pub token: TokenArgs,
    #[command(flatten)]
    pub oauth: OAuthArgs,
    #[command(flatten)]
    pub sessions: SessionArgs,
}

/// `kernel-mcp supervise` (the server runs each kernel under it; not for people).
#[derive(Debug, Clone, Args)]
pub struct SuperviseArgs {
    /// Stop the kernel when its process tree's memory exceeds this (MiB); 0 = none.
    #[arg(long, default_value_t = 0)]
    pub max_memory_mib: u64,
    /// The sandbox policy: none, workspace, read-only.
    #[arg(long, default_value = "none")]
    pub sandbox: kernel_mcp::kernel::SandboxPolicy,
    /// Let the sandboxed kernel open outbound connections.
    #[arg(long)]
    pub sandbox_network: bool,
    /// The kernel's connection file (its directory is readable in a sandbox; removed with its
    /// siblings if the server dies first).
    #[arg(long)]
    pub connection_file: Option<PathBuf>,
    /// Write the supervisor's report (JSON lines) to this file descriptor.
    #[arg(long)]
    pub report_fd: Option<i32>,
    /// A file whose number (MiB) replaces the limit when SIGUSR1 arrives.
    #[arg(long)]
    pub limit_file: Option<PathBuf>,
    /// Supervise this child process instead of starting argv (a forked kernel).
    #[arg(long)]
    pub adopt_child: Option<i32>,
    /// Watch this server process instead of the parent.
    #[arg(long)]
    pub server_pid: Option<i32>,
    /// What no sandbox grant may reach (JSON, from the server).
    #[arg(long)]
    pub protected: Option<String>,
    /// A descriptor the kernel inherits at the same number.
    #[arg(long)]
    pub inherit_fd: Option<i32>,
    /// The kernel's argv.
    #[arg(last = true, required_unless_present = "adopt_child")]
    pub argv: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP (default: over stdio). The same as no command.
    Serve(ServeArgs),
    /// Run the per-user service: the sessions behind a Unix socket, shared by every client
    /// (`service status | stop | restart`: the running one's).
    Service(ServiceArgs),
    /// List the kernelspecs kernel-mcp can launch, and where it looked.
    Kernels,
    /// Named Python environments for `create_session(environment=NAME)`.
    Env {
        #[command(subcommand)]
        command: super::env::EnvCommand,
    },
    /// Run a kernel under supervision (used by the server for each kernel; not for people).
    #[command(hide = true)]
    Supervise(SuperviseArgs),
    /// Check the setup: kernelspecs, Python environments, the service. Exit 0 when the
    /// default kernel can start; otherwise 1, with the fix.
    Doctor {
        /// Print the report as JSON (for scripts).
        #[arg(long)]
        json: bool,
        /// The OAuth settings to check (else the running service's HTTP face's).
        #[command(flatten)]
        oauth: OAuthArgs,
    },
    /// Write kernel-mcp's entry into an MCP client's config (shown first; the rest of the file
    /// is kept).
    Install(super::install::InstallArgs),
    /// The broker's OAuth sign-in: `broker login SERVER` (exit 0 signed in, 1 failed or timed
    /// out, 2 usage), `broker logout SERVER`.
    Broker {
        #[command(subcommand)]
        command: super::broker::BrokerCommand,
    },
    /// Print the token of the service's HTTP face (`service --http`), and where it is.
    Token(super::token::TokenArgs),
    /// The service log, or its audit trail (`--audit`: one line per tool call).
    Log(super::log::LogArgs),
    /// Run code in a session of the service. Exit 0 ok, 1 error, 3 timeout/interrupted/
    /// cancelled/kernel died, 4 tool error (e.g. unknown session), 2 usage.
    Exec(super::exec::ExecArgs),
    /// List the service's sessions (a table, or --json).
    Sessions(super::sessions::SessionsArgs),
    /// Get, interrupt, restart, destroy or renew one session of the service.
    Session(super::sessions::SessionArgs),
    /// Show a session's history, or --export it (transcript, script, notebook).
    History(super::sessions::HistoryArgs),
    /// An interactive console on a session of the service; shows other clients' cells live.
    Console(super::console::ConsoleArgs),
}

impl Cli {
    /// The command to run: `serve` with the top-level options when none was named.
    pub fn into_command(self) -> (GlobalArgs, Command) {
        let command = self.command.unwrap_or(Command::Serve(self.serve));
        (self.global, command)
    }
}

/// Parse the process's arguments (and environment) into a [`Cli`].
///
/// # Errors
/// clap's usage error (exit status 2), also for a `serve` option written before another
/// command (`kernel-mcp --tools minimal exec …`), which would do nothing there.
pub fn parse() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// [`parse`] of `args` (the first is the program name).
pub fn parse_from(
    args: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
) -> Result<Cli, clap::Error> {
    let matches = Cli::command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Some((name, _)) = matches.subcommand()
        && let Some(option) = serve_option_on_command_line(&matches)
    {
        let fix = if name == "serve" {
            format!(
                "write it after `serve` (`kernel-mcp serve {option} …`), or drop the word `serve`"
            )
        } else {
            format!(
                "{option} is an option of `serve` (also `kernel-mcp {option} …` with no command); it does nothing for `{name}`"
            )
        };
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{option} was given before the command `{name}`: {fix}"),
        ));
    }
    cli.serve.token.token_on_command_line = on_command_line(&matches, "token");
    cli.serve.sessions.max_memory_given = given(&matches, "max_memory_mib");
    match (&mut cli.command, matches.subcommand()) {
        (Some(Command::Serve(a)), Some((_, m))) => {
            a.token.token_on_command_line = on_command_line(m, "token");
            a.sessions.max_memory_given = given(m, "max_memory_mib");
        }
        (Some(Command::Service(a)), Some((_, m))) => {
            a.token.token_on_command_line = on_command_line(m, "token");
            a.sessions.max_memory_given = given(m, "max_memory_mib");
        }
        _ => {}
    }
    Ok(cli)
}

/// The first `serve` option written on the top level's command line (as `--name`).
fn serve_option_on_command_line(matches: &ArgMatches) -> Option<String> {
    let serve = ServeArgs::augment_args(clap::Command::new("serve"));
    serve
        .get_arguments()
        .find(|a| on_command_line(matches, a.get_id().as_str()))
        .map(|a| match a.get_long() {
            Some(long) => format!("--{long}"),
            None => a.get_id().to_string(),
        })
}

/// Whether the argument `id` of `matches` was given (on the command line or by its
/// variable), not left to its default.
fn given(matches: &ArgMatches, id: &str) -> bool {
    matches!(
        matches.value_source(id),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

/// Whether the argument `id` of `matches` was written on the command line.
fn on_command_line(matches: &ArgMatches, id: &str) -> bool {
    matches.try_get_raw(id).is_ok_and(|v| v.is_some())
        && matches.value_source(id) == Some(ValueSource::CommandLine)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        parse_from(std::iter::once("kernel-mcp").chain(args.iter().copied()))
    }

    fn serve_of(cli: Cli) -> ServeArgs {
        match cli.into_command().1 {
            Command::Serve(a) => a,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_options_work_with_and_without_the_word_serve() {
        for args in [
            &["--tools", "minimal", "--pool", "python3=2"][..],
            &["serve", "--tools", "minimal", "--pool", "python3=2"][..],
        ] {
            let s = serve_of(parse(args).expect("parses"));
            assert_eq!(s.tools, Toolset::minimal(), "{args:?}");
            assert_eq!(
                s.sessions.pool,
                vec![("python3".to_string(), 2)],
                "{args:?}"
            );
            assert_eq!(s.transport, Transport::Stdio);
            assert_eq!(s.port, 8000);
        }
        let s = serve_of(parse(&["--transport", "streamable-http", "--port", "0"]).unwrap());
        assert_eq!((s.transport, s.port), (Transport::Http, 0));
        let s = serve_of(parse(&["--kernelspec-dir", "/k", "--shared"]).unwrap());
        assert!(s.shared);
    }

    #[test]
    fn a_serve_option_before_another_command_is_a_usage_error_that_says_why() {
        let e = parse(&["--tools", "minimal", "exec", "-s", "x", "-c", "1"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("--tools is an option of `serve`"),
            "{e}"
        );
        let e = parse(&["--tools", "minimal", "serve"]).unwrap_err();
        assert!(e.to_string().contains("after `serve`"), "{e}");
        // Global options still go anywhere.
        parse(&["--kernelspec-dir", "/k", "exec", "-s", "x", "-c", "1"]).expect("global");
    }

    #[test]
    fn a_token_on_the_command_line_is_marked_and_one_from_elsewhere_is_not() {
        let s = serve_of(parse(&["--transport", "http", "--token", "t"]).unwrap());
        assert!(s.token.token_on_command_line);
        let s = serve_of(parse(&["serve", "--token", "t"]).unwrap());
        assert!(s.token.token_on_command_line);
        let s = serve_of(parse(&["--token-file", "/f"]).unwrap());
        assert!(!s.token.token_on_command_line);
        let Command::Service(a) = parse(&["service", "--http", "127.0.0.1:0", "--token", "t"])
            .unwrap()
            .into_command()
            .1
        else {
            panic!("not service");
        };
        assert!(a.token.token_on_command_line);
        assert_eq!(a.sessions.max_memory_mib, 4096);
    }
}
