//! `kernel-mcp broker login | logout SERVER`: a person's sign-in for an `authorization_code`
//! server of the broker's registry (docs/cli.md, docs/broker.md "Signing in"). The registry
//! is the one the broker would use here: `--mcp-config PATH`, else `./.mcp.json`.
//!
//! Exit status: 0 signed in (or signed out); 1 the sign-in failed or timed out, with why on
//! stderr; 2 usage (no such server, or it has no `authorization_code` block).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kernel_mcp::broker::config::{McpRegistry, Transport};
use kernel_mcp::broker::oauth::OAuthGrant;
use kernel_mcp::broker::oauth::login::{LoginArgs, login};

/// `kernel-mcp broker …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BrokerCommand {
    /// Sign in to an OAuth server of the registry (`"oauth": {"grantType":
    /// "authorization_code"}`): prints a URL to open, waits for the redirect, stores the
    /// credential. Exit 0 signed in, 1 failed or timed out, 2 usage.
    Login {
        /// The server's name in the registry.
        server: String,
        /// How long to wait for the sign-in to come back (seconds).
        #[arg(long, default_value_t = 300)]
        timeout_s: u64,
        #[command(flatten)]
        registry: Registry,
    },
    /// Remove a server's stored credential. Exit 0 done, 2 usage.
    Logout {
        server: String,
        #[command(flatten)]
        registry: Registry,
    },
}

/// Which registry the command reads.
#[derive(Debug, Clone, clap::Args)]
pub struct Registry {
    /// The broker's registry (default: ./.mcp.json).
    #[arg(long, env = "KERNEL_MCP_MCP_CONFIG", value_name = "PATH")]
    pub mcp_config: Option<PathBuf>,
}

/// Run `command` on `rt`.
pub fn run(command: BrokerCommand, rt: &tokio::runtime::Runtime) -> ExitCode {
    let (server, registry) = match &command {
        BrokerCommand::Login {
            server, registry, ..
        }
        | BrokerCommand::Logout { server, registry } => (server, registry),
    };
    let (url, grant) = match entry(server, registry) {
        Ok(e) => e,
        Err(why) => {
            eprintln!("kernel-mcp broker: {why}");
            return ExitCode::from(2);
        }
    };
    let OAuthGrant::AuthorizationCode {
        credential_file,
        redirect_port,
        client_id,
        scopes,
    } = grant
    else {
        eprintln!(
            "kernel-mcp broker: server \"{server}\" uses the client_credentials grant: the broker gets its tokens itself, no sign-in needed"
        );
        return ExitCode::from(2);
    };
    let timeout_s = match command {
        BrokerCommand::Logout { .. } => {
            let store = kernel_mcp::broker::oauth::store::FileStore::new(credential_file, &url);
            return match store.remove() {
                Ok(()) => {
                    println!("signed out of \"{server}\" ({})", store.path().display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("kernel-mcp broker logout: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        BrokerCommand::Login { timeout_s, .. } => timeout_s,
    };
    let args = LoginArgs {
        server: server.clone(),
        url,
        credential_file,
        redirect_port,
        client_id,
        scopes,
        timeout: Duration::from_secs(timeout_s.max(1)),
    };
    let mut show = |url: &str| {
        println!(
            "Open this URL in a browser to sign in to \"{}\":\n\n  {url}\n",
            args.server
        );
        println!("Waiting up to {timeout_s} s for the sign-in to come back…");
        let _ = std::io::stdout().flush();
    };
    match rt.block_on(login(&args, &mut show)) {
        Ok(file) => {
            println!(
                "Signed in to \"{server}\"; the credential is in {}",
                file.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kernel-mcp broker login: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The URL and resolved `oauth` block of `server` in the registry, or why not.
fn entry(server: &str, registry: &Registry) -> Result<(String, OAuthGrant), String> {
    let path = match &registry.mcp_config {
        Some(p) => std::path::absolute(p).unwrap_or_else(|_| p.clone()),
        None => std::env::current_dir()
            .map_err(|e| format!("no current directory: {e}"))?
            .join(".mcp.json"),
    };
    let lookup = |k: &str| std::env::var(k).ok();
    let reg = McpRegistry::load(&path, true, &lookup);
    let Some(entry) = reg.entries.get(server) else {
        let known: Vec<&str> = reg.entries.keys().map(String::as_str).collect();
        let errors: Vec<String> = reg.errors.iter().map(|e| e.to_string()).collect();
        return Err(format!(
            "no server \"{server}\" in {} (configured: {}){}",
            path.display(),
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
            if errors.is_empty() {
                String::new()
            } else {
                format!("; {}", errors.join("; "))
            }
        ));
    };
    if !entry.errors.is_empty() {
        let errors: Vec<String> = entry.errors.iter().map(|e| e.to_string()).collect();
        return Err(errors.join("; "));
    }
    match &entry.transport {
        Some(Transport::Http {
            url,
            oauth: Some(grant),
            ..
        }) => Ok((url.clone(), grant.clone())),
        _ => Err(format!(
            "server \"{server}\" in {} has no \"oauth\" block; add {{\"grantType\": \"authorization_code\"}} to its entry",
            path.display()
        )),
    }
}
