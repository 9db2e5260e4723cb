//! Logging. The service logs to `<state dir>/service.log` (kept below [`MAX_LOG_BYTES`] by
//! moving a full log to `service.log.old` at start) and to stderr, which is the terminal when
//! it runs in the foreground and /dev/null when a relay started it. Every other command logs
//! to stderr only (stdout is the MCP stream). A serving process also gets the OpenTelemetry
//! layer when the environment turns export on (see [`crate::telemetry::init`]); the
//! [`crate::telemetry::Guard`] these return keeps its exporters alive.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use tracing_subscriber::Layer as _;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::paths::FileError;

/// A log larger than this at start is moved aside.
pub const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

fn filter() -> EnvFilter {
    EnvFilter::try_from_env("KERNEL_MCP_LOG").unwrap_or_else(|_| EnvFilter::new("kernel_mcp=info"))
}

/// Log to stderr only; with `serving`, export telemetry as the environment says.
pub fn init_stderr(serving: bool) -> crate::telemetry::Guard {
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(filter());
    let (otel, guard) = crate::telemetry::init(serving);
    tracing_subscriber::registry()
        .with(otel)
        .with(stderr)
        .with(to_clients())
        .init();
    guard
}

/// Log messages to MCP clients that called `logging/setLevel` (they pick their level).
fn to_clients<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    crate::mcp::logging::McpLogLayer.with_filter(
        tracing_subscriber::filter::Targets::new().with_target("kernel_mcp", tracing::Level::DEBUG),
    )
}

/// Why the service logs to stderr only.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("neither XDG_STATE_HOME nor HOME is set")]
    NoStateDir,
    #[error(transparent)]
    File(#[from] FileError),
}

/// Log to the service log file and stderr, and export telemetry as the environment says.
/// Returns the file's path, or why there is none (then only stderr is used), and the
/// telemetry's guard.
pub fn init_service() -> (Result<PathBuf, LogError>, crate::telemetry::Guard) {
    let file = open_log();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let (layer, outcome) = match file {
        Ok((path, f)) => (
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(Arc::new(f))
                    .with_ansi(false),
            ),
            Ok(path),
        ),
        Err(e) => (None, Err(e)),
    };
    let (otel, guard) = crate::telemetry::init(true);
    tracing_subscriber::registry()
        .with(otel)
        .with(stderr.with_filter(filter()))
        .with(layer.map(|l| l.with_filter(filter())))
        .with(to_clients())
        .init();
    (outcome, guard)
}

fn open_log() -> Result<(PathBuf, std::fs::File), LogError> {
    let path = super::paths::log_file().ok_or(LogError::NoStateDir)?;
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(FileError::of("create", dir))?;
    }
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
        let _ = std::fs::rename(&path, path.with_extension("log.old"));
    }
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(FileError::of("open", &path))?;
    Ok((path, f))
}
