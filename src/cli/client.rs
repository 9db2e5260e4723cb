//! The MCP client that `exec`, `sessions`, `session`, `history` and `console` share: it
//! connects to the per-user service over its Unix socket (starting the service when nobody
//! listens, with the same code as `serve --shared`, [`relay::connect_or_start`], which sends
//! nothing before the socket's directory and the listener's uid are found to be ours), calls tools
//! and reads resources, and sorts what comes back into a value, a tool error (exit status 4)
//! or a failure to talk to the service at all (exit status 1).
//!
//! A person's command therefore sees exactly what an agent sees: the same tools, the same
//! records, the same error codes (docs/tools.md).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ReadResourceRequestParams};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use kernel_mcp::service::{paths::ServicePaths, relay};

/// Upper bound for one call that is not a wait (list, get, destroy…): turns a hung service
/// into an error instead of a hung command.
pub const CALL_DEADLINE: Duration = Duration::from_secs(120);

/// Where the service is and how to start it when it is not running (built by
/// [`super::dispatch`] from the global options).
#[derive(Debug, Clone)]
pub struct Target {
    pub paths: ServicePaths,
    /// The arguments that start it (`service --socket …`), see [`relay::service_args`].
    pub service_args: Vec<OsString>,
}

/// Why a command failed, and so its exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The tool answered with an error (`SESSION_NOT_FOUND`, `KERNEL_NOT_FOUND`…): status 4.
    #[error("{code}: {message}")]
    Tool { code: String, message: String },
    /// The service could not be reached or started, or the call failed on the way: status 1.
    #[error("{0}")]
    Service(String),
    /// Something on this side (a file that cannot be read or written): status 1.
    #[error("{0}")]
    Local(String),
}

impl CliError {
    /// The command's exit status for this error (docs/cli.md: 4 for a tool error, else 1).
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Tool { .. } => ExitCode::from(4),
            _ => ExitCode::FAILURE,
        }
    }

    /// The error code of a tool error, if it is one.
    pub fn code(&self) -> Option<&str> {
        match self {
            CliError::Tool { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Print `e` on stderr as `kernel-mcp: …` and return its exit status.
pub fn report(e: &CliError) -> ExitCode {
    eprintln!("kernel-mcp: {e}");
    e.exit_code()
}

/// A tool's answer: its `structuredContent` and the short text rendering.
#[derive(Debug, Clone)]
pub struct Answer {
    pub value: Value,
    pub text: String,
}

/// The floors a person's environment asks for, as it would of `kernel-mcp serve`:
/// `KERNEL_MCP_SANDBOX` (and `KERNEL_MCP_SANDBOX_NETWORK`), `KERNEL_MCP_MAX_MEMORY_MIB`. The
/// sessions the command creates get at least these, or the command fails (`service::hello`).
/// Errors: a value that does not parse (nothing is connected).
fn floors_from_env() -> Result<Option<kernel_mcp::registry::floors::Floors>, CliError> {
    use kernel_mcp::kernel::{Sandbox, SandboxPolicy};
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let bad = |k: &str, v: &str, why: String| CliError::Local(format!("{k}={v}: {why}"));
    let policy = match var("KERNEL_MCP_SANDBOX") {
        Some(v) => v
            .parse::<SandboxPolicy>()
            .map_err(|e| bad("KERNEL_MCP_SANDBOX", &v, e.to_string()))?,
        None => SandboxPolicy::None,
    };
    let network = var("KERNEL_MCP_SANDBOX_NETWORK").is_some_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        )
    });
    let memory = match var("KERNEL_MCP_MAX_MEMORY_MIB") {
        Some(v) => Some(
            v.trim()
                .parse::<u64>()
                .map_err(|e| bad("KERNEL_MCP_MAX_MEMORY_MIB", &v, e.to_string()))?,
        ),
        None => None,
    };
    let sandbox = Sandbox { policy, network };
    Ok(
        (sandbox.restricts() || memory.is_some()).then(|| kernel_mcp::registry::floors::Floors {
            sandbox,
            max_memory_mib: memory.unwrap_or(0),
        }),
    )
}

/// One connection to the service.
pub struct Client {
    service: RunningService<RoleClient, rmcp::model::ClientConfig>,
}

impl Client {
    /// Connect to the service of `target`, starting it when none runs.
    /// Errors: [`CliError::Service`] with the relay's reason (it names the service log).
    pub async fn connect(target: &Target) -> Result<Client, CliError> {
        let asked = floors_from_env()?;
        let mut stream = relay::connect_or_start(&target.paths, &target.service_args)
            .await
            .map_err(|e| CliError::Service(e.to_string()))?;
        if let Some(asked) = asked {
            kernel_mcp::service::hello::ask(&mut stream, &asked)
                .await
                .map_err(|e| CliError::Service(e.to_string()))?;
        }
        let (read, write) = stream.into_split();
        // Every tool of the service (the console completes, `session renew` renews), whatever
        // toolset the service gives agents.
        let me = kernel_mcp::mcp::toolset::client_config(kernel_mcp::mcp::Toolset::all());
        let service = tokio::time::timeout(CALL_DEADLINE, me.serve((read, write)))
            .await
            .map_err(|_| {
                CliError::Service("the kernel-mcp service did not answer initialize".into())
            })?
            .map_err(|e| {
                CliError::Service(format!("MCP initialize with the service failed: {e}"))
            })?;
        Ok(Client { service })
    }

    /// Call `tool` with `args` (a JSON object), bounded by [`CALL_DEADLINE`] plus `extra`
    /// (the call's own wait). Errors: [`CliError::Tool`] for an `isError` result carrying an
    /// `error_code`; [`CliError::Service`] for a transport or JSON-RPC error.
    pub async fn call(&self, tool: &str, args: Value, extra: Duration) -> Result<Answer, CliError> {
        let map = match args {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(map);
        let r = tokio::time::timeout(CALL_DEADLINE + extra, self.service.call_tool(params))
            .await
            .map_err(|_| CliError::Service(format!("{tool} did not answer in time")))?
            .map_err(|e| CliError::Service(format!("{tool} failed: {e}")))?;
        answer(r)
    }

    /// The bytes of a resource (a blob decoded from base64, or text as UTF-8).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<u8>, CliError> {
        use base64::Engine as _;
        let r = tokio::time::timeout(
            CALL_DEADLINE,
            self.service
                .read_resource(ReadResourceRequestParams::new(uri.to_string())),
        )
        .await
        .map_err(|_| CliError::Service(format!("reading {uri} did not answer in time")))?
        .map_err(|e| CliError::Service(format!("reading {uri} failed: {e}")))?;
        let Some(first) = r.contents.into_iter().next() else {
            return Err(CliError::Service(format!("{uri} is empty")));
        };
        match first {
            rmcp::model::ResourceContents::BlobResourceContents { blob, .. } => {
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .map_err(|e| CliError::Service(format!("{uri}: bad base64 ({e})")))
            }
            rmcp::model::ResourceContents::TextResourceContents { text, .. } => {
                Ok(text.into_bytes())
            }
            _ => Err(CliError::Service(format!(
                "{uri}: an unknown kind of content"
            ))),
        }
    }

    /// Close the connection (the service keeps every named session).
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.service.cancel()).await;
    }
}

/// Sort a tool result into an [`Answer`] or a tool error.
fn answer(r: CallToolResult) -> Result<Answer, CliError> {
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let value = r.structured_content.unwrap_or(Value::Null);
    let is_error = r.is_error.unwrap_or(false);
    if is_error && let Some(code) = value.get("error_code").and_then(Value::as_str) {
        return Err(CliError::Tool {
            code: code.to_string(),
            message: value["message"].as_str().unwrap_or(&text).to_string(),
        });
    }
    Ok(Answer { value, text })
}

/// Run one command's body to its end on `rt`: `Ok(code)` is the exit status, an error is
/// reported on stderr and mapped to its status.
pub fn run_command<F, Fut>(rt: &tokio::runtime::Runtime, body: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode, CliError>>,
{
    match rt.block_on(body()) {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// Write `text` to stdout and flush; a closed stdout (`| head`) is not an error.
pub fn out(text: &str) {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

/// An absolute form of a path given on our command line (the service has its own cwd).
pub fn absolute(path: &std::path::Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path)
        .map_err(|e| CliError::Local(format!("cannot resolve {}: {e}", path.display())))
}
