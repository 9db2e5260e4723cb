//! One downstream MCP server of a project: its rmcp client (stdio child process or streamable
//! HTTP), started lazily on the first call that needs it, shared by every session of the
//! project, replaced by a new one when it broke (the call that saw it break is not sent again:
//! a write is never retried), and stopped with the project's last session.
//!
//! A stdio server runs in a process group of its own with a parent-death signal, its stderr
//! drained into a bounded tail (shown, redacted, when it fails to start) and the debug log;
//! [`NO_BROKER_ENV`] in its environment keeps a kernel-mcp started there from brokering again.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde::Serialize;
use tokio::io::AsyncReadExt;

use super::config::Transport;
use super::lock;
use super::redact::Redactor;

/// Longest wait for a server to start and answer `initialize` (npx may download first).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for a server's `tools/list` (all pages).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// Tools kept per server; more are cut, with a note in `help`.
pub const MAX_TOOLS: usize = 1000;
/// Bytes of a stdio server's stderr kept for error messages.
const STDERR_TAIL_BYTES: usize = 4096;
/// Grace for a server to stop when its project ends (then its process group is killed).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Set to `1` in every stdio server's environment: a kernel-mcp started with it does not
/// broker again (the recursion guard; see [`super::BrokerSettings::from_args`]).
pub const NO_BROKER_ENV: &str = "KERNEL_MCP_NO_BROKER";

/// The broker's variables that never reach a downstream server (nor do kernel-mcp's secrets,
/// [`crate::secrets::is_secret`]), unless its entry sets them itself.
const WITHHELD_ENV: &[&str] = &[super::ENDPOINT_ENV, super::OFF_ENV];

type Client = RunningService<RoleClient, ClientConfig>;

/// A server's connection state, as `help` and `explain` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// Never started: nothing needed it yet.
    NotStarted,
    Connecting,
    Connected {
        since: String,
        /// The stdio server's process id.
        pid: Option<u32>,
        /// `serverInfo` name and version.
        server: Option<String>,
    },
    /// It failed to start, or its connection ended; the next call starts a new one.
    Broken {
        since: String,
        reason: String,
    },
    /// Its project ended.
    Stopped,
}

/// Why a downstream server could not be reached.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DownstreamError {
    #[error("server \"{server}\" could not be started: {reason}")]
    Start { server: String, reason: String },
    #[error("server \"{server}\" did not answer `initialize` within {secs} s{tail}")]
    StartTimeout {
        server: String,
        secs: u64,
        tail: String,
    },
    #[error("server \"{server}\": {reason}")]
    Request { server: String, reason: String },
    #[error("server \"{server}\" is stopped: the last session of its project ended")]
    Stopped { server: String },
    /// The broker cannot get the server's OAuth token (docs/broker.md "OAuth").
    #[error("{0}")]
    OAuth(super::oauth::source::OAuthError),
}

struct Conn {
    client: Client,
    tools: Option<Arc<Vec<Tool>>>,
}

/// One configured server of a project.
pub struct Downstream {
    pub name: String,
    transport: Transport,
    redactor: Redactor,
    /// The live connection; held only to connect, list tools or take it down.
    conn: tokio::sync::Mutex<Option<Conn>>,
    state: Mutex<State>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// An OAuth server's tokens.
    oauth: super::oauth::Sources,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Downstream {
    pub fn new(name: String, transport: Transport, redactor: Redactor) -> Downstream {
        Downstream {
            name,
            transport,
            redactor,
            conn: tokio::sync::Mutex::new(None),
            state: Mutex::new(State::NotStarted),
            stderr: Default::default(),
            oauth: Default::default(),
        }
    }

    /// The connection state now (never connects).
    pub fn state(&self) -> State {
        lock(&self.state).clone()
    }

    fn set_state(&self, s: State) {
        *lock(&self.state) = s;
    }

    /// A peer to send requests to: the live connection, or a new one (started here, bounded
    /// by [`CONNECT_TIMEOUT`]). Errors: the server could not be started or initialized.
    pub async fn peer(&self) -> Result<Peer<RoleClient>, DownstreamError> {
        let mut conn = self.conn.lock().await;
        self.live_peer(&mut conn).await
    }

    async fn live_peer(
        &self,
        conn: &mut Option<Conn>,
    ) -> Result<Peer<RoleClient>, DownstreamError> {
        if matches!(self.state(), State::Stopped) {
            return Err(DownstreamError::Stopped {
                server: self.name.clone(),
            });
        }
        // An OAuth server: a token is at hand before any request (refreshed when due).
        self.oauth_source().await?;
        if let Some(c) = conn.as_ref() {
            if !c.client.is_closed() && !c.client.peer().is_transport_closed() {
                return Ok(c.client.peer().clone());
            }
            let reason = format!("its connection ended{}", self.stderr_tail());
            tracing::info!(server = %self.name, "downstream server connection ended; starting a new one");
            self.set_state(State::Broken {
                since: now(),
                reason,
            });
            *conn = None;
        }
        self.set_state(State::Connecting);
        let started = match tokio::time::timeout(CONNECT_TIMEOUT, self.connect()).await {
            Ok(r) => r,
            Err(_) => Err(DownstreamError::StartTimeout {
                server: self.name.clone(),
                secs: CONNECT_TIMEOUT.as_secs(),
                tail: self.stderr_tail(),
            }),
        };
        match started {
            Ok((client, pid)) => {
                let server = client.peer().peer_info().and_then(|i| {
                    i.server_info
                        .as_ref()
                        .map(|s| format!("{} {}", s.name, s.version))
                });
                tracing::info!(server = %self.name, ?pid, info = ?server, "downstream server connected");
                self.set_state(State::Connected {
                    since: now(),
                    pid,
                    server,
                });
                let peer = client.peer().clone();
                *conn = Some(Conn {
                    client,
                    tools: None,
                });
                Ok(peer)
            }
            Err(e) => {
                let e = self.redacted(e);
                tracing::warn!(server = %self.name, "downstream server not started: {e}");
                self.set_state(State::Broken {
                    since: now(),
                    reason: e.to_string(),
                });
                Err(e)
            }
        }
    }

    /// An OAuth server's token source, holding a current token; `None` for other servers.
    async fn oauth_source(
        &self,
    ) -> Result<Option<Arc<super::oauth::source::TokenSource>>, DownstreamError> {
        let Transport::Http {
            url,
            oauth: Some(grant),
            ..
        } = &self.transport
        else {
            return Ok(None);
        };
        match self.oauth.ready(&self.name, url, grant).await {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                let e = self.redacted(DownstreamError::OAuth(e));
                tracing::info!(server = %self.name, "no OAuth token for the server: {e}");
                Err(e)
            }
        }
    }

    fn redacted(&self, e: DownstreamError) -> DownstreamError {
        match e {
            DownstreamError::Start { server, reason } => DownstreamError::Start {
                server,
                reason: self.redactor.redact(&reason),
            },
            DownstreamError::Request { server, reason } => DownstreamError::Request {
                server,
                reason: self.redactor.redact(&reason),
            },
            other => other,
        }
    }

    /// The server's tools (all pages, at most [`MAX_TOOLS`]), listed once per connection.
    pub async fn tools(&self) -> Result<Arc<Vec<Tool>>, DownstreamError> {
        let mut conn = self.conn.lock().await;
        let peer = self.live_peer(&mut conn).await?;
        if let Some(tools) = conn.as_ref().and_then(|c| c.tools.clone()) {
            return Ok(tools);
        }
        let listed = tokio::time::timeout(LIST_TIMEOUT, peer.list_all_tools()).await;
        let mut tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                return Err(self.redacted(DownstreamError::Request {
                    server: self.name.clone(),
                    reason: format!("tools/list failed: {e}"),
                }));
            }
            Err(_) => {
                return Err(DownstreamError::Request {
                    server: self.name.clone(),
                    reason: format!(
                        "tools/list did not answer within {} s",
                        LIST_TIMEOUT.as_secs()
                    ),
                });
            }
        };
        tools.truncate(MAX_TOOLS);
        let tools = Arc::new(tools);
        if let Some(c) = conn.as_mut() {
            c.tools = Some(tools.clone());
        }
        Ok(tools)
    }

    /// A request on the connection failed at the transport: take the connection down so the
    /// next call starts a new one. The failed request itself is not sent again.
    pub async fn broken(&self, reason: &str) {
        let old = self.conn.lock().await.take();
        if !matches!(self.state(), State::Stopped) {
            self.set_state(State::Broken {
                since: now(),
                reason: self.redactor.redact(reason),
            });
        }
        if let Some(c) = old {
            let _ = tokio::time::timeout(STOP_GRACE, c.client.cancel()).await;
        }
    }

    /// Stop the server for good (its project ended): close the connection, which ends a
    /// stdio server (stdin closed, then SIGTERM, then its group is killed).
    pub async fn stop(&self) {
        self.set_state(State::Stopped);
        let old = self.conn.lock().await.take();
        if let Some(c) = old {
            let _ = tokio::time::timeout(STOP_GRACE, c.client.cancel()).await;
            tracing::info!(server = %self.name, "downstream server stopped");
        }
    }

    /// Redact `text` with this server's registry secrets.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    fn stderr_tail(&self) -> String {
        let tail = lock(&self.stderr);
        if tail.is_empty() {
            return String::new();
        }
        let (a, b) = tail.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).trim().to_string();
        format!("; its stderr ended with:\n{}", self.redactor.redact(&text))
    }

    fn client_info() -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("kernel-mcp-broker", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn connect(&self) -> Result<(Client, Option<u32>), DownstreamError> {
        let start_err = |reason: String| DownstreamError::Start {
            server: self.name.clone(),
            reason,
        };
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .current_dir(cwd)
                    .envs(env)
                    .env(NO_BROKER_ENV, "1");
                let inherited = std::env::vars_os().map(|(k, _)| k);
                let secrets = crate::secrets::SECRET_VARS.iter().map(Into::into);
                for k in WITHHELD_ENV
                    .iter()
                    .map(Into::into)
                    .chain(secrets)
                    .chain(inherited)
                {
                    let withheld =
                        WITHHELD_ENV.iter().any(|w| k == *w) || crate::secrets::is_secret(&k);
                    if withheld && !k.to_str().is_some_and(|k| env.contains_key(k)) {
                        cmd.env_remove(&k);
                    }
                }
                let parent = nix::unistd::getpid();
                // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
                unsafe {
                    cmd.pre_exec(move || {
                        #[cfg(target_os = "linux")]
                        {
                            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                                .map_err(std::io::Error::from)?;
                            if nix::unistd::getppid() != parent {
                                nix::libc::_exit(1);
                            }
                        }
                        Ok(())
                    });
                }
                let mut wrap = process_wrap::tokio::CommandWrap::from(cmd);
                wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
                let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(wrap)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| start_err(format!("{command}: {e} (cwd {})", cwd.display())))?;
                let pid = transport.id();
                if let Some(stderr) = stderr {
                    lock(&self.stderr).clear();
                    tokio::spawn(drain_stderr(
                        stderr,
                        self.name.clone(),
                        self.stderr.clone(),
                        self.redactor.clone(),
                    ));
                }
                let client = Self::client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| start_err(format!("{e}{}", self.stderr_tail())))?;
                Ok((client, pid))
            }
            Transport::Http { url, headers, .. } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers.iter().cloned().collect())
                    // A session that expired is reported, not silently re-made and retried.
                    .reinit_on_expired_session(false);
                crate::tls::install_provider();
                let served = match self.oauth_source().await? {
                    None => {
                        let transport = StreamableHttpClientTransport::from_config(config);
                        Self::client_info().serve(transport).await
                    }
                    Some(source) => {
                        let http =
                            super::oauth::client::Authorized::new(reqwest::Client::new(), source);
                        let transport = StreamableHttpClientTransport::with_client(http, config);
                        Self::client_info().serve(transport).await
                    }
                };
                let client = served.map_err(|e| start_err(format!("{e} (url {url})")))?;
                Ok((client, None))
            }
        }
    }
}

/// Keep the last [`STDERR_TAIL_BYTES`] of a stdio server's stderr, and log what it writes
/// (read in bounded chunks: a line without an end never grows a buffer).
async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    server: String,
    tail: Arc<Mutex<VecDeque<u8>>>,
    redactor: Redactor,
) {
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&chunk[..n]);
        tracing::debug!(server = %server, "downstream stderr: {}", redactor.redact(text.trim_end()));
        let mut t = lock(&tail);
        t.extend(&chunk[..n]);
        while t.len() > STDERR_TAIL_BYTES {
            t.pop_front();
        }
    }
}
