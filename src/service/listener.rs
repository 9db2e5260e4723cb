//! The service's listener: it proves it is the only service on its socket (an exclusive
//! flock held for its whole life), replaces a stale socket file, binds 0600, and serves each
//! connection from a peer with our uid as one MCP session over the same handler as stdio
//! (newline-delimited JSON-RPC; rmcp serves any `AsyncRead + AsyncWrite`), each message
//! stamped with the peer's identity ([`crate::auth::peer`], [`crate::auth::stamp`]). A peer
//! with another uid is told why in one JSON-RPC error line and disconnected.
//!
//! With `--http` it also serves streamable HTTP on the same sessions, behind a token and,
//! when configured, OAuth ([`super::http`], [`crate::auth`]).
//!
//! A connection's first line may instead be a control line (`kernel-mcp service status |
//! stop`, [`super::control`]), answered for the service's own user only.
//!
//! It ends on SIGTERM/SIGINT/SIGHUP, on a `stop` control line, after `idle_exit` with no session and no connection, or
//! once its socket file is removed or replaced and no connection is left (nobody can reach it);
//! every exit path tells the connected MCP clients and shuts every kernel down (a SIGKILLed service leaves none either: the
//! kernels' parent-death signal takes them).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use rmcp::ServiceExt;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

use super::control::Facts;
use super::http::{self, HttpOptions, HttpRecord};
use super::paths::{DirError, FileError, ServicePaths};
use crate::auth::peer::authenticate_peer;
use crate::auth::stamp::stamped;
use crate::auth::{AccessError, HttpAccess, TokenError};
use crate::mcp::KernelMcp;
use crate::mcp::serve::{
    ServeError, bind, in_order_runtime, serve_http_on, shut_down_within_deadline, termination,
};
use crate::registry::Registry;

/// Most connections served at once; one more is refused with a JSON-RPC error line.
const MAX_CONNECTIONS: usize = 256;
/// How often the idle clock is checked.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// The socket and its lock files.
    pub paths: ServicePaths,
    /// Exit after this long with no session and no connection; `None`: never.
    pub idle_exit: Option<Duration>,
    /// Also serve streamable HTTP (each HTTP session a connection of its own).
    pub http: Option<HttpOptions>,
    /// How long an idle HTTP session that holds no `default` session is kept
    /// (see `mcp::http_sessions`).
    pub http_keep_alive: Duration,
    /// Other users admitted on the socket (`--allow-uid`), each a principal of its own.
    pub allow_uids: Vec<u32>,
}

/// Why the service could not start, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error(
        "a kernel-mcp service (pid {pid}) already serves {socket}; connect to it (`kernel-mcp serve --shared`) or stop it first"
    )]
    AlreadyRunning { pid: String, socket: PathBuf },
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("the HTTP face: {0}")]
    Token(#[from] TokenError),
    #[error(transparent)]
    Access(#[from] AccessError),
}

/// The lock that says "a service runs on this socket", held until the process exits.
pub struct AliveLock {
    _lock: Flock<File>,
}

/// Take the alive lock of `paths` and record our pid in it.
/// Errors: [`ServiceError::AlreadyRunning`] (naming its pid), or the file cannot be opened.
pub fn take_alive_lock(paths: &ServicePaths) -> Result<AliveLock, ServiceError> {
    let path = &paths.alive_lock;
    let file = super::paths::open_lock_file(path).map_err(FileError::of("open", path))?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            return Err(ServiceError::AlreadyRunning {
                pid: pid.trim().to_string(),
                socket: paths.socket.clone(),
            });
        }
    };
    let mut record = || -> std::io::Result<()> {
        lock.set_len(0)?;
        lock.rewind()?;
        writeln!(lock, "{}", std::process::id())
    };
    record().map_err(FileError::of("write our pid into", path))?;
    Ok(AliveLock { _lock: lock })
}

/// Run the service until a signal or the idle timeout, then shut every kernel down.
///
/// # Errors
/// [`ServiceError`]: the socket's directory is not ours ([`DirError`]), another service holds
/// the socket, the socket or the HTTP face cannot be set up; or the HTTP face failed.
pub async fn run(registry: Arc<Registry>, opts: ServiceOptions) -> Result<(), ServiceError> {
    in_order_runtime()?;
    let paths = &opts.paths;
    paths.prepare_dir()?;
    let _alive = take_alive_lock(paths)?;
    let (listener, inode) = listen(paths, &opts.allow_uids)?;
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut http = match &opts.http {
        Some(face) => {
            let served = start_http(paths, face, opts.http_keep_alive, registry.clone(), async {
                let _ = http_stopped.await;
            });
            match served.await {
                Ok(h) => Some(h),
                Err(e) => {
                    drop(listener);
                    let _ = std::fs::remove_file(&paths.socket);
                    return Err(e);
                }
            }
        }
        None => None,
    };
    tracing::info!(
        socket = %paths.socket.display(),
        pid = std::process::id(),
        idle_exit_s = opts.idle_exit.map(|d| d.as_secs()),
        "kernel-mcp service listening"
    );
    super::hello::write_record(paths, &registry.server_floors());
    let shared = Arc::new(Shared {
        registry: registry.clone(),
        connections: Arc::new(AtomicUsize::new(0)),
        facts: Facts::now(&paths.socket),
        stop: tokio::sync::Notify::new(),
        ours: nix::unistd::getuid().as_raw(),
        allowed: opts.allow_uids.clone(),
    });
    let ending = serve(&listener, inode, &shared, &opts, &mut http).await;
    shared.facts.tell_clients(&ending.reason).await;
    let _ = stop_http.send(());
    if let Some(h) = http {
        let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
    }
    drop(listener);
    wind_down(&registry, &opts, ending).await;
    Ok(())
}

/// Why the service stops, and whether a `kernel-mcp service stop` asked it to.
struct Ending {
    reason: String,
    asked_to_stop: bool,
}

/// Replace a stale socket file (we hold the alive lock, so its service is gone), bind the
/// socket and open it to whom it serves; the listener and the socket file's inode (to notice
/// the file removed or replaced).
fn listen(paths: &ServicePaths, allow_uids: &[u32]) -> Result<(UnixListener, u64), ServiceError> {
    match std::fs::remove_file(&paths.socket) {
        Ok(()) => tracing::info!(socket = %paths.socket.display(), "replaced a stale socket"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FileError::of("remove", &paths.socket)(e).into()),
    }
    let listener =
        UnixListener::bind(&paths.socket).map_err(FileError::of("listen on", &paths.socket))?;
    open_to(paths, allow_uids)?;
    let inode = std::fs::symlink_metadata(&paths.socket)
        .map_err(FileError::of("inspect", &paths.socket))?
        .ino();
    Ok((listener, inode))
}

/// Accept connections until something ends the service: a signal, a `stop` control line,
/// the idle clock, the socket file gone with no connection left, or the HTTP face ending
/// (then `http` is taken).
async fn serve(
    listener: &UnixListener,
    inode: u64,
    shared: &Arc<Shared>,
    opts: &ServiceOptions,
    http: &mut Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
) -> Ending {
    let paths = &opts.paths;
    let connections = &shared.connections;
    let mut idle_since: Option<Instant> = None;
    let mut tick = tokio::time::interval(IDLE_TICK);
    let reason = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    idle_since = None;
                    admit(stream, shared).await;
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = tick.tick() => {
                let unconnected = connections.load(Ordering::SeqCst) == 0;
                let reachable = std::fs::symlink_metadata(&paths.socket).is_ok_and(|m| m.ino() == inode);
                if unconnected && !reachable {
                    break format!("its socket {} was removed or replaced, so no client can reach it", paths.socket.display());
                }
                let idle = unconnected && shared.registry.is_empty();
                match (idle, idle_since, opts.idle_exit) {
                    (false, _, _) => idle_since = None,
                    (true, None, _) => idle_since = Some(Instant::now()),
                    (true, Some(t), Some(limit)) if t.elapsed() >= limit => {
                        break format!("idle for {} s with no session and no connection", limit.as_secs());
                    }
                    _ => {}
                }
            }
            s = termination() => break format!("received {s}"),
            _ = shared.stop.notified() => {
                return Ending { reason: "asked by `kernel-mcp service stop`".to_string(), asked_to_stop: true };
            }
            r = async { http.as_mut().expect("guarded").await }, if http.is_some() => {
                *http = None;
                let why = match r {
                    Ok(Ok(())) => "stopped".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                break format!("the HTTP listener ended: {why}");
            }
        }
    };
    Ending {
        reason,
        asked_to_stop: false,
    }
}

/// Remove the service's files (the token too when asked to stop: a restarted service
/// generates a new one) and shut every kernel down, exiting the process if that takes too
/// long.
async fn wind_down(registry: &Registry, opts: &ServiceOptions, ending: Ending) {
    let paths = &opts.paths;
    if opts.http.is_some() {
        http::remove_record(paths);
    }
    tracing::info!("service stopping: {}", ending.reason);
    let _ = std::fs::remove_file(&paths.socket);
    let _ = std::fs::remove_file(&paths.floors_record);
    if ending.asked_to_stop {
        let _ = std::fs::remove_file(&paths.token_file);
    }
    shut_down_within_deadline(registry).await;
    tracing::info!("service stopped");
}

/// Resolve the HTTP face's token, bind its listener, write its record and serve it in a task
/// until `stop`. Errors: the token, the bind or the record.
async fn start_http(
    paths: &ServicePaths,
    face: &HttpOptions,
    keep_alive: Duration,
    registry: Arc<Registry>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<(), ServeError>>, ServiceError> {
    let (token, token_file, token_source) = http::resolve_token(paths, &face.token)?;
    let access = HttpAccess::new(face.addr, Some(token), face.oauth.clone(), &[])?;
    let listener = bind(face.addr).await?;
    let bound = listener.local_addr().unwrap_or(face.addr);
    let record = HttpRecord {
        url: format!("http://{bound}/mcp"),
        pid: std::process::id(),
        token_file,
        token_source: token_source.into(),
        oauth_issuer: face.oauth.as_ref().map(|o| o.issuer().to_string()),
        oauth_audience: face.oauth.as_ref().map(|o| o.audience().to_string()),
    };
    http::write_record(paths, &record).map_err(FileError::of("write", &paths.http_record))?;
    tracing::info!(
        url = %record.url,
        token_file = ?record.token_file,
        token_source,
        "the HTTP face requires `Authorization: Bearer <token>`"
    );
    let jupyter =
        crate::jupyter::router(crate::jupyter::Face::new(registry.clone()), access.clone());
    tracing::info!(
        "serving the Jupyter kernels API at http://{bound}/api (the same token, as `Authorization: token …` or `?token=`)"
    );
    Ok(tokio::spawn(serve_http_on(
        listener,
        move || KernelMcp::for_connection(registry.clone(), Default::default()),
        access,
        keep_alive,
        Some(jupyter),
        stop,
    )))
}

/// Serve `stream` if its peer is us and there is room, else tell it why and hang up.
/// The socket 0600 in its 0700 directory; with other users to admit (`--allow-uid`), the
/// socket 0666 and its directory 0711 (they may reach the socket, not list or change the
/// directory): who is admitted is decided by each peer's uid (`SO_PEERCRED`), not the mode.
fn open_to(paths: &ServicePaths, allowed: &[u32]) -> Result<(), ServiceError> {
    let (socket_mode, dir_mode) = match allowed.is_empty() {
        true => (0o600, None),
        false => (0o666, Some(0o711)),
    };
    std::fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(socket_mode))
        .map_err(FileError::of("set the mode of", &paths.socket))?;
    if let Some(mode) = dir_mode {
        let dir = paths.dir();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(FileError::of("set the mode of", dir))?;
        tracing::warn!(uids = ?allowed, "other users may connect to this service (--allow-uid): each runs code as this service's user, in sessions of its own");
    }
    Ok(())
}

/// What every connection's task shares with the accept loop.
struct Shared {
    registry: Arc<Registry>,
    connections: Arc<AtomicUsize>,
    /// The service's own facts, for `kernel-mcp service status`, and its clients to tell.
    facts: Facts,
    /// Notified by a `kernel-mcp service stop`.
    stop: tokio::sync::Notify,
    /// Our uid.
    ours: u32,
    /// `--allow-uid`.
    allowed: Vec<u32>,
}

/// Serve `stream` if its peer is us (or admitted) and there is room, else tell it why and
/// hang up. Its first line may be a hello ([`super::hello`]) or a control line
/// ([`super::control`]).
async fn admit(stream: UnixStream, shared: &Arc<Shared>) {
    let connections = &shared.connections;
    let full = connections.load(Ordering::SeqCst) >= MAX_CONNECTIONS;
    let who = match authenticate_peer(stream.peer_cred(), shared.ours, &shared.allowed) {
        Ok(_) if full => Err(format!(
            "refused: the service already serves {MAX_CONNECTIONS} connections"
        )),
        Ok(who) => Ok(who),
        Err(e) => Err(e.to_string()),
    };
    let who = match who {
        Ok(who) => who,
        Err(why) => {
            refuse(stream, why);
            return;
        }
    };
    let counted = Counted::new(connections);
    let server = KernelMcp::for_connection(shared.registry.clone(), Default::default());
    let registry = shared.registry.clone();
    let shared = shared.clone();
    tokio::spawn(async move {
        let (read, mut write) = stream.into_split();
        let mut read = tokio::io::BufReader::new(read);
        // A client's hello asks for its floors before any MCP (see `super::hello`).
        let pending = match super::hello::first_line(&mut read).await {
            Ok((Some(asked), _)) => {
                let in_force = match server.connection_id() {
                    Some(conn) => registry.set_client_floors(conn, asked),
                    None => registry.server_floors(),
                };
                tracing::info!(floors = %in_force.describe(), "the client asked for floors");
                if write
                    .write_all(&super::hello::answer(&in_force))
                    .await
                    .is_err()
                {
                    server.close().await;
                    return;
                }
                Vec::new()
            }
            Ok((None, first)) => match super::control::parse(&first) {
                Some(op) => {
                    drop(counted);
                    control(op, &who, write, &shared).await;
                    server.close().await;
                    return;
                }
                None => first,
            },
            Err(_) => Vec::new(),
        };
        let read = tokio::io::AsyncReadExt::chain(std::io::Cursor::new(pending), read);
        match server.clone().serve(stamped((read, write), who)).await {
            Ok(service) => {
                let told = shared.facts.remember(service.peer().clone());
                let reason = service.waiting().await;
                shared.facts.forget(told);
                tracing::info!(?reason, "client disconnected");
            }
            Err(e) => tracing::info!("connection ended before MCP initialized: {e}"),
        }
        server.close().await;
        drop(counted);
    });
}

/// Answer the control line `op` of the peer `who` on `write` (see [`super::control`]); a
/// `stop` then ends the service. Only the service's own user may: an admitted other user
/// (`--allow-uid`) is refused.
async fn control(
    op: super::control::Op,
    who: &crate::principal::Authenticated,
    mut write: tokio::net::unix::OwnedWriteHalf,
    shared: &Shared,
) {
    use super::control::{Op, answer, refusal};
    let line = if !who.allows(crate::principal::Access::Admin) {
        tracing::warn!(principal = %who.principal, ?op, "refused a control line from another user");
        refusal(&format!(
            "refused: only the service's own user (uid {}) may see its status or stop it",
            shared.ours
        ))
    } else {
        match op {
            Op::Status => {
                let open = shared.connections.load(Ordering::SeqCst);
                answer(&shared.facts.status(&shared.registry, open).await)
            }
            Op::Stop => answer(&shared.facts.stopping()),
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = write.write_all(&line).await;
        let _ = write.shutdown().await;
    })
    .await;
    if op == Op::Stop && who.allows(crate::principal::Access::Admin) {
        shared.stop.notify_one();
    }
}

/// Tell the peer of `stream` `why` it is refused, in one JSON-RPC error line, and hang up.
fn refuse(mut stream: UnixStream, why: String) {
    tracing::warn!("{why}");
    let line = serde_json::json!({
        "jsonrpc": "2.0", "id": null,
        "error": {"code": -32001, "message": format!("kernel-mcp service: {why}")},
    });
    // In a task of its own: a peer that does not read must not hold up the accept loop.
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let _ = stream.write_all(format!("{line}\n").as_bytes()).await;
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

/// One open connection in the count; leaves it when dropped (however its task ends).
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(connections: &Arc<AtomicUsize>) -> Counted {
        let now = connections.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!(connections = now, "client connected");
        Counted(connections.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let left = self.0.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
        tracing::info!(connections = left, "connection closed");
    }
}
