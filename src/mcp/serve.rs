//! Transports. stdio: JSON-RPC on stdin/stdout, nothing else ever written to stdout. When the
//! client closes stdin (or the server gets SIGTERM/SIGINT), every session's kernel is shut down.

use std::sync::Arc;

use std::time::Duration;

use rmcp::ServiceExt;

/// Longest the server takes to exit once the client has gone or a signal arrived.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);

use super::KernelMcp;
use crate::session::Registry;

/// Serve MCP over stdio until the client disconnects or a termination signal arrives, then
/// shut every kernel down.
pub async fn serve_stdio(registry: Arc<Registry>) -> anyhow::Result<()> {
    let server = KernelMcp::new(registry.clone());
    let outcome = tokio::select! {
        r = async {
            match server.serve(rmcp::transport::stdio()).await {
                Ok(service) => service.waiting().await.map(|reason| tracing::info!(?reason, "MCP connection ended")).map_err(anyhow::Error::from),
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                    tracing::info!("client closed the connection before initializing");
                    Ok(())
                }
                Err(e) => Err(anyhow::Error::from(e)),
            }
        } => r,
        s = termination() => {
            tracing::info!("received {s}; shutting down");
            Ok(())
        }
    };
    // Whatever happens during shutdown, the process ends: a wedged task must not keep it alive.
    std::thread::spawn(|| {
        std::thread::sleep(SHUTDOWN_DEADLINE);
        eprintln!("kernel-mcp: shutdown took longer than {} s; exiting", SHUTDOWN_DEADLINE.as_secs());
        std::process::exit(1);
    });
    registry.shutdown_all().await;
    outcome
}

/// Resolves on SIGTERM, SIGINT or SIGHUP, naming it.
async fn termination() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}
