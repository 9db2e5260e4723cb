//! Transports. stdio: JSON-RPC on stdin/stdout, nothing else ever written to stdout. Streamable
//! HTTP: rmcp's service on axum at `/mcp`, loopback by default, with rmcp's Host checks (DNS
//! rebinding protection). Sessions belong to the process registry, so they outlive HTTP
//! sessions. When the client closes stdin, or the server gets SIGTERM/SIGINT, every session's
//! kernel is shut down.
//!
//! Ordering: [`Runtimes`] builds the runtime MCP is served on, and the serve functions refuse
//! any other kind (see [`in_order_runtime`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use super::http::{Fixups, fixups};
use super::http_sessions::{HttpSessions, track};
use super::{KernelMcp, Toolset};
use crate::auth::stamp::stamped;
use crate::auth::{HttpAccess, gate};
use crate::principal::Authenticated;
use crate::registry::Registry;

/// Longest the server takes to exit once the client has gone or a signal arrived.
pub(crate) const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);

/// Why serving MCP stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "MCP must be served on a current-thread runtime (got {flavor}): requests would reach sessions out of order"
    )]
    WrongRuntime { flavor: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving HTTP on {addr} failed: {source}")]
    Http {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the MCP connection could not be set up: {0}")]
    Initialize(Box<rmcp::service::ServerInitializeError>),
    #[error("the MCP connection's task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The two runtimes of a server process.
///
/// - **MCP** (current-thread): rmcp handles each request in a task of its own. A
///   current-thread scheduler polls spawned tasks first-in first-out, so each request's first
///   poll (the one that parses it and sends its command to the session actor, with no await
///   before that for a named session) happens in the order the requests arrived. That is what
///   makes pipelined calls on one session run in the order the client wrote them
///   (`tests/it/ordering.rs`). Nothing on it blocks: file reads and writes go to
///   `spawn_blocking`, kernels live on the other runtime.
/// - **Sessions** (multi-thread): session actors, kernel sockets and decoding, so a flooding
///   kernel never delays the MCP side.
pub struct Runtimes {
    mcp: Runtime,
    sessions: Runtime,
}

impl Runtimes {
    /// Build both. Errors: the OS refused threads or an event loop.
    pub fn new() -> std::io::Result<Runtimes> {
        Ok(Runtimes {
            mcp: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            sessions: Runtime::new()?,
        })
    }

    /// Where session actors run (pass it to the registry).
    pub fn sessions(&self) -> Handle {
        self.sessions.handle().clone()
    }

    /// Run `serve` on the MCP runtime to its end, then stop both runtimes (reader threads
    /// blocked on stdin must not keep the process alive).
    pub fn block_on<T>(self, serve: impl Future<Output = T>) -> T {
        let out = self.mcp.block_on(serve);
        self.mcp.shutdown_timeout(Duration::from_secs(1));
        self.sessions.shutdown_timeout(Duration::from_secs(1));
        out
    }
}

impl From<rmcp::service::ServerInitializeError> for ServeError {
    fn from(e: rmcp::service::ServerInitializeError) -> ServeError {
        ServeError::Initialize(Box::new(e))
    }
}

/// Errors unless the caller runs on a current-thread runtime, the one kind that keeps
/// pipelined requests in order (see [`Runtimes`]). Errors: [`ServeError::WrongRuntime`].
pub fn in_order_runtime() -> Result<(), ServeError> {
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::CurrentThread) => Ok(()),
        other => Err(ServeError::WrongRuntime {
            flavor: format!("{other:?}"),
        }),
    }
}

/// Serve MCP over stdio until the client disconnects or a termination signal arrives, then
/// shut every kernel down.
pub async fn serve_stdio(registry: Arc<Registry>, toolset: Toolset) -> Result<(), ServeError> {
    in_order_runtime()?;
    let server = KernelMcp::with_toolset(registry.clone(), toolset);
    let outcome = tokio::select! {
        r = async {
            match server
                .serve(stamped(rmcp::transport::stdio_pipes(), Authenticated::owner()))
                .await
            {
                Ok(service) => {
                    let reason = service.waiting().await?;
                    tracing::info!(?reason, "MCP connection ended");
                    Ok(())
                }
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                    tracing::info!("client closed the connection before initializing");
                    Ok(())
                }
                Err(e) => Err(ServeError::from(e)),
            }
        } => r,
        s = termination() => {
            tracing::info!("received {s}; shutting down");
            Ok(())
        }
    };
    shut_down_within_deadline(&registry).await;
    outcome
}

/// Shut every kernel down. Whatever happens meanwhile, the process ends: a wedged task must not
/// keep it alive, so past [`SHUTDOWN_DEADLINE`] it says so and exits with status 1.
pub(crate) async fn shut_down_within_deadline(registry: &Registry) {
    std::thread::spawn(|| {
        std::thread::sleep(SHUTDOWN_DEADLINE);
        tracing::error!(
            "shutdown took longer than {} s; exiting",
            SHUTDOWN_DEADLINE.as_secs()
        );
        std::process::exit(1);
    });
    registry.shutdown_all().await;
}

/// Serve MCP over streamable HTTP on `addr` (path `/mcp`) until a termination signal, then
/// shut every kernel down. `access` comes from [`HttpAccess::new`] (token, allowed hosts).
pub async fn serve_http(
    registry: Arc<Registry>,
    addr: SocketAddr,
    access: HttpAccess,
    toolset: Toolset,
) -> Result<(), ServeError> {
    let factory_registry = registry.clone();
    serve_bound(&registry, addr, |listener| {
        serve_http_on(
            listener,
            move || KernelMcp::with_toolset(factory_registry.clone(), toolset),
            access,
            super::http_sessions::DEFAULT_KEEP_ALIVE,
            None,
            terminated(),
        )
    })
    .await
}

/// On the in-order runtime ([`in_order_runtime`]), bind `addr` and `serve` on it (until a
/// termination signal, see [`terminated`]), then shut every kernel down.
/// Errors: [`ServeError::WrongRuntime`], [`ServeError::Bind`], and those of `serve`.
async fn serve_bound<Fut>(
    registry: &Registry,
    addr: SocketAddr,
    serve: impl FnOnce(tokio::net::TcpListener) -> Fut,
) -> Result<(), ServeError>
where
    Fut: Future<Output = Result<(), ServeError>>,
{
    in_order_runtime()?;
    let outcome = match bind(addr).await {
        Ok(listener) => serve(listener).await,
        Err(e) => Err(e),
    };
    shut_down_within_deadline(registry).await;
    outcome
}

/// Resolves on a termination signal, saying so in the log (when an HTTP face stops).
async fn terminated() {
    let s = termination().await;
    tracing::info!("received {s}; shutting down");
}

/// Bind the TCP listener of an HTTP face (port 0: one the OS picks; `local_addr` says which).
/// Errors: [`ServeError::Bind`].
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Streamable HTTP on `listener` (path `/mcp`) with a handler from `handler` per MCP
/// session, until `stop` resolves. An idle MCP session that holds no `default` session is
/// closed after `keep_alive` (see [`super::http_sessions`]). `beside` adds routes of another
/// face (the service's Jupyter API), which guard themselves. The caller owns the sessions'
/// shutdown (the service serves HTTP beside its socket on one registry).
/// Errors: [`ServeError::Http`].
pub async fn serve_http_on(
    listener: tokio::net::TcpListener,
    handler: impl Fn() -> KernelMcp + Send + Sync + 'static,
    access: HttpAccess,
    keep_alive: Duration,
    beside: Option<axum::Router>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let addr = local_addr(&listener);
    let ct = tokio_util::sync::CancellationToken::new();
    // Browsers send Origin: only pages served from the allowed hosts may call us.
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct.child_token())
        .with_allowed_origins(access.allowed_origins.clone())
        .with_allowed_hosts(access.allowed_hosts.clone());
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, hosts = ?access.allowed_hosts, "listening beyond loopback; requests need the bearer token");
    }
    // rmcp's own idle timer would end a session whose client still holds its id, and the
    // connection's `default` with it: `HttpSessions` decides instead.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let sessions = Arc::new(manager);
    let lifetimes = HttpSessions::new(sessions.clone(), keep_alive);
    lifetimes.spawn_reaper(ct.child_token());
    let tracked = lifetimes.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler().over_http(tracked.clone())),
        sessions.clone(),
        config,
    );
    let oauth = access.oauth().cloned();
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(lifetimes, track))
        .layer(axum::middleware::from_fn_with_state(
            Fixups { sessions },
            fixups,
        ))
        .layer(axum::middleware::from_fn_with_state(
            super::http::gate(access),
            gate,
        ));
    if let Some(oauth) = oauth {
        tracing::info!(
            issuer = oauth.issuer(),
            audience = oauth.audience(),
            metadata = oauth.metadata_url(),
            "MCP requires OAuth access tokens (or the static token)"
        );
        router = router.merge(crate::auth::oauth::router(oauth.clone()));
        // Fetch the issuer's keys now, so the first token does not wait (and the log says
        // at once whether they can be had); a failure is retried when a token arrives.
        tokio::spawn(async move {
            let _ = oauth.probe().await;
        });
    }
    if let Some(other) = beside {
        router = router.merge(other);
    }
    tracing::info!("serving MCP over streamable HTTP at http://{addr}/mcp");
    let shutdown = ct.clone();
    // No Nagle delay: a websocket's small frames (a kernel's status and reply) go out at once,
    // instead of waiting up to 40 ms for the peer's delayed ACK.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            stop.await;
            shutdown.cancel();
        })
        .await
        .map_err(|source| ServeError::Http { addr, source })
}

/// The address a listener is bound to (`0.0.0.0:0` if the OS will not say, which it always
/// does for a bound TCP socket).
fn local_addr(listener: &tokio::net::TcpListener) -> SocketAddr {
    listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// Serve the legacy HTTP+SSE transport (MCP 2024-11-05: `GET /sse`, `POST /messages`) on
/// `addr` until a termination signal, then shut every kernel down.
pub async fn serve_sse(
    registry: Arc<Registry>,
    addr: SocketAddr,
    access: HttpAccess,
    toolset: Toolset,
) -> Result<(), ServeError> {
    let fixes = Fixups {
        sessions: Arc::new(
            rmcp::transport::streamable_http_server::session::local::LocalSessionManager::default(),
        ),
    };
    let router = super::sse::router(registry.clone(), toolset, access.clone())
        .layer(axum::middleware::from_fn_with_state(fixes, fixups))
        .layer(axum::middleware::from_fn_with_state(
            super::http::gate(access),
            gate,
        ));
    serve_bound(&registry, addr, |listener| async move {
        let bound = local_addr(&listener);
        tracing::info!("serving MCP over legacy HTTP+SSE at http://{bound}/sse");
        axum::serve(listener, router)
            .with_graceful_shutdown(terminated())
            .await
            .map_err(|source| ServeError::Http {
                addr: bound,
                source,
            })
    })
    .await
}

/// Resolves on SIGTERM, SIGINT or SIGHUP, naming it.
pub(crate) async fn termination() -> &'static str {
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
