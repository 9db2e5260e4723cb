//! `kernel-mcp token [--json]`: the token of the service's HTTP face (`service --http`), for a
//! person to paste into an HTTP client's config, and where it is.
//!
//! stdout gets the token alone (so `$(kernel-mcp token)` works); stderr says which face it
//! opens and which file holds it. The files are read only after the socket's directory passes
//! [`kernel_mcp::trust::check_dir`], as every client of the service does.
//!
//! Exit status: 0 a token was printed; 1 there is none to print (with why and what to do).

use std::path::PathBuf;
use std::process::ExitCode;

use kernel_mcp::auth::Token;
use kernel_mcp::service::http::{self, HttpRecord};
use kernel_mcp::service::paths::ServicePaths;
use serde_json::json;

/// `kernel-mcp token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// Print `{token, token_file, url, source}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// What `token` found.
struct Found {
    token: Token,
    file: PathBuf,
    /// The face that is up, if any.
    record: Option<HttpRecord>,
}

/// Run `kernel-mcp token`.
pub fn run(args: TokenArgs) -> ExitCode {
    let paths = ServicePaths::new(
        args.socket
            .unwrap_or_else(kernel_mcp::service::paths::default_socket),
    );
    match find(&paths) {
        Ok(found) => {
            let url = found.record.as_ref().map(|r| r.url.clone());
            if args.json {
                let source = found
                    .record
                    .as_ref()
                    .map_or("generated", |r| r.token_source.as_str());
                let v = json!({"token": found.token.expose(), "token_file": found.file,
                    "url": url, "source": source});
                super::client::out(&format!("{v}\n"));
            } else {
                super::client::out(&format!("{}\n", found.token.expose()));
                match url {
                    Some(url) => eprintln!(
                        "kernel-mcp: the token of {url} (send `Authorization: Bearer <token>`) and of its Jupyter API at {} (`Authorization: token <token>`, or JUPYTER_GATEWAY_AUTH_TOKEN for `jupyter lab --gateway-url`), from {}",
                        url.trim_end_matches("/mcp"),
                        found.file.display()
                    ),
                    None => eprintln!(
                        "kernel-mcp: the token in {} (no HTTP face is up now; `kernel-mcp service --http 127.0.0.1:PORT` uses it)",
                        found.file.display()
                    ),
                }
            }
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("kernel-mcp: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The token of the face that is up (from its record), else the one generated before.
/// Errors: a sentence saying why there is none to print, and what to do.
fn find(paths: &ServicePaths) -> Result<Found, String> {
    match paths.check_dir() {
        Ok(true) => {}
        Ok(false) => return Err(no_token(paths)),
        Err(e) => return Err(format!("refusing to read the service's files: {e}")),
    }
    let record = http::read_record(paths);
    let file = match &record {
        Some(r) => match &r.token_file {
            Some(f) => f.clone(),
            None => {
                return Err(format!(
                    "the HTTP face at {} was given its token {} (not stored in a file): use that one",
                    r.url,
                    if r.token_source == "command line" {
                        "with --token"
                    } else {
                        "in KERNEL_MCP_TOKEN"
                    }
                ));
            }
        },
        None if paths.token_file.exists() => paths.token_file.clone(),
        None => return Err(no_token(paths)),
    };
    let token = Token::read_file(&file).map_err(|e| e.to_string())?;
    Ok(Found {
        token,
        file,
        record,
    })
}

fn no_token(paths: &ServicePaths) -> String {
    format!(
        "no token yet: `kernel-mcp service --http 127.0.0.1:PORT` generates one in {} (or give it --token-file PATH)",
        paths.token_file.display()
    )
}
