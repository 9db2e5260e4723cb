//! Transports. stdio: JSON-RPC on stdin/stdout, nothing else ever written to stdout. Streamable
//! HTTP: rmcp's service on axum at `/mcp`, loopback by default, with rmcp's Host checks (DNS
//! rebinding protection). Sessions belong to the process registry, so they outlive HTTP
//! sessions. When the client closes stdin, or the server gets SIGTERM/SIGINT, every session's
//! kernel is shut down.

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
            match server.serve(rmcp::transport::stdio_pipes()).await {
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
        eprintln!(
            "kernel-mcp: shutdown took longer than {} s; exiting",
            SHUTDOWN_DEADLINE.as_secs()
        );
        std::process::exit(1);
    });
    registry.shutdown_all().await;
    outcome
}

/// Serve MCP over streamable HTTP on `addr` (path `/mcp`) until a termination signal, then
/// shut every kernel down.
pub async fn serve_http(registry: Arc<Registry>, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let ct = tokio_util::sync::CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct.child_token())
        // Browsers send Origin: only pages served from this machine may call us.
        .with_allowed_origins([
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
            "https://[::1]:*",
        ]);
    if !addr.ip().is_loopback() {
        // Listening beyond loopback was asked for explicitly: accept that address as Host too.
        config = config.with_allowed_hosts([
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
            addr.ip().to_string(),
        ]);
        tracing::warn!(%addr, "listening beyond loopback: anyone who can reach this address can run code");
    }
    let factory_registry = registry.clone();
    let service = StreamableHttpService::new(
        move || Ok(KernelMcp::new(factory_registry.clone())),
        LocalSessionManager::default().into(),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(
        "serving MCP over streamable HTTP at http://{}/mcp",
        listener.local_addr()?
    );
    let shutdown = ct.clone();
    let outcome = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let s = termination().await;
            tracing::info!("received {s}; shutting down");
            shutdown.cancel();
        })
        .await
        .map_err(anyhow::Error::from);
    std::thread::spawn(|| {
        std::thread::sleep(SHUTDOWN_DEADLINE);
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
