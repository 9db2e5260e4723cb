//! Kernels on a Jupyter Server, Kernel Gateway or Enterprise Gateway, behind the kernel seam.
//!
//! A [`Gateway`] is one configured server (`--gateway [NAME=]URL`, its token from the
//! environment or a file). [`RemoteLauncher`] starts a kernel there over REST
//! (`POST /api/kernels`) or adopts a running one by id; [`RemoteKernel`] is the live
//! connection: REST for interrupt, restart and delete ([`rest`]), the channels websocket for
//! messages ([`channels`]). There is no heartbeat over a websocket: liveness is the socket
//! plus the REST kernel status, and a kernel the server no longer has is one
//! [`KernelEvent::Exited`].
//!
//! The token is held as a [`Token`], which never prints; texts that could hold it pass
//! through [`redact`].
//!
//! Spec: <https://jupyter-server.readthedocs.io/en/latest/developers/websocket-protocols.html>

pub mod channels;
pub mod config;
pub mod rest;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;

use super::seam::{KernelIo, KernelLauncher};
use super::types::ExitInfo;
use super::types::{Channel, KernelEvent};
use super::types::{InterruptError, SendError};
use super::types::{ShutdownRung, StartError};
use crate::wire::Message;
pub use channels::LinkError;
pub use config::{ConfigError, Gateway, Token, parse_gateways};
pub use rest::{GatewayError, KernelModel, Rest};

/// `text` with every occurrence of `gateway`'s token replaced by `<token>`.
pub fn redact(gateway: &Gateway, text: &str) -> String {
    match gateway.token.as_ref().map(|t| t.expose()) {
        Some(t) if !t.is_empty() && text.contains(t) => text.replace(t, "<token>"),
        _ => text.to_string(),
    }
}

/// The first `n` characters of a server's answer, with `…` when there was more (for an error
/// that quotes it).
pub fn first_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Why a remote kernel could not be connected. The texts never hold the token.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("kernel {id} on gateway '{gateway}' did not answer kernel_info within {timeout_s} s")]
    NotReady {
        id: String,
        gateway: String,
        timeout_s: f64,
    },
    #[error(transparent)]
    Send(#[from] SendError),
    #[error("the kernel is gone ({0})")]
    Exited(ExitInfo),
    #[error("the websocket closed")]
    Closed,
}

/// Starts (or adopts) the kernels of one session on one gateway.
#[derive(Clone)]
pub struct RemoteLauncher {
    pub rest: Rest,
    /// The kernelspec name to start (ignored when adopting).
    pub kernel: String,
    /// Extra environment variables sent with the start request.
    pub env: BTreeMap<String, String>,
    /// Adopt this running kernel instead of starting one.
    pub adopt_id: Option<String>,
    pub startup_timeout: Duration,
}

impl RemoteLauncher {
    fn start_error(&self, e: impl std::fmt::Display) -> StartError {
        StartError::Launch {
            kernel: self.kernel.clone(),
            detail: redact(self.rest.gateway(), &e.to_string()),
        }
    }
}

impl KernelLauncher for RemoteLauncher {
    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let this = self.clone();
        Box::pin(async move {
            let (id, owned) = match &this.adopt_id {
                Some(id) => (id.clone(), false),
                None => {
                    let model = this
                        .rest
                        .start(&this.kernel, &this.env, this.startup_timeout)
                        .await
                        .map_err(|e| this.start_error(e))?;
                    (model.id, true)
                }
            };
            match RemoteKernel::connect(this.rest.clone(), id.clone(), owned, this.startup_timeout)
                .await
            {
                Ok(k) => Ok(Box::new(k) as Box<dyn KernelIo>),
                Err(e) => {
                    if owned {
                        let _ = this.rest.delete(&id, Duration::from_secs(10)).await;
                    }
                    Err(this.start_error(e))
                }
            }
        })
    }

    fn adopts(&self) -> bool {
        self.adopt_id.is_some()
    }

    fn location(&self) -> &str {
        &self.rest.gateway().name
    }

    /// Restart over REST (the kernel keeps its id), then connect anew. An adopted kernel is
    /// never restarted (nor reconnected as ours, which `destroy_session` would delete):
    /// [`KernelLauncher::replace`] refuses it before this.
    fn replace_own(
        &self,
        old: Box<dyn KernelIo>,
        grace: Duration,
    ) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let this = self.clone();
        let id = old.kernel_id().map(String::from);
        Box::pin(async move {
            let Some(id) = id else {
                old.shutdown(grace).await;
                return this.start().await;
            };
            drop(old);
            match this.rest.restart(&id, this.startup_timeout).await {
                Ok(()) => {}
                // The kernel is gone: start a new one instead.
                Err(GatewayError::NotFound { .. }) => return this.start().await,
                Err(e) => return Err(this.start_error(e)),
            }
            let k = RemoteKernel::connect(this.rest.clone(), id, true, this.startup_timeout)
                .await
                .map_err(|e| this.start_error(e))?;
            Ok(Box::new(k) as Box<dyn KernelIo>)
        })
    }
}

/// A live connection to a kernel on a gateway.
pub struct RemoteKernel {
    rest: Rest,
    id: String,
    /// True when we started it (shutdown deletes it); false when adopted (shutdown detaches).
    owned: bool,
    info: Value,
    session: String,
    link: channels::Link,
    events: mpsc::UnboundedReceiver<KernelEvent>,
    exit_reported: bool,
}

impl RemoteKernel {
    /// Open the channels websocket of kernel `id` and wait (up to `timeout`) for its
    /// `kernel_info_reply`. Errors: [`ConnectError`] (token-free) saying what failed.
    pub async fn connect(
        rest: Rest,
        id: String,
        owned: bool,
        timeout: Duration,
    ) -> Result<RemoteKernel, ConnectError> {
        let session = uuid::Uuid::new_v4().to_string();
        let (tx, mut events) = mpsc::unbounded_channel();
        let link = channels::Link::open(
            rest.clone(),
            id.clone(),
            session.clone(),
            tx,
            timeout,
            owned,
        )
        .await?;
        let info = tokio::time::timeout(timeout, wait_ready(&link, &session, &mut events))
            .await
            .map_err(|_| ConnectError::NotReady {
                id: id.clone(),
                gateway: rest.gateway().name.clone(),
                timeout_s: timeout.as_secs_f64(),
            })??;
        tracing::info!(gateway = %rest.gateway().name, kernel_id = %id, framing = link.framing(), "remote kernel connected");
        Ok(RemoteKernel {
            rest,
            id,
            owned,
            info,
            session,
            link,
            events,
            exit_reported: false,
        })
    }
}

/// How often `kernel_info_request` is sent until one of ours is answered (a request sent
/// before the kernel's shell socket is up is lost).
const READY_RETRY: Duration = Duration::from_millis(250);

/// Ask for `kernel_info` every [`READY_RETRY`] until one of our requests is answered (a late
/// answer to an earlier one counts: the caller bounds the whole wait).
async fn wait_ready(
    link: &channels::Link,
    session: &str,
    events: &mut mpsc::UnboundedReceiver<KernelEvent>,
) -> Result<Value, ConnectError> {
    let mut sent: Vec<String> = Vec::new();
    loop {
        let req = Message::new("kernel_info_request", serde_json::json!({}), session);
        link.send(Channel::Shell, req.clone())?;
        sent.push(req.msg_id().to_string());
        let retry = tokio::time::sleep(READY_RETRY);
        tokio::pin!(retry);
        loop {
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(KernelEvent::Message(Channel::Shell, m))
                        if m.msg_type() == "kernel_info_reply"
                            && m.parent_msg_id().is_some_and(|p| sent.iter().any(|s| s == p)) =>
                    {
                        return Ok(m.content);
                    }
                    Some(KernelEvent::Exited(e)) => return Err(ConnectError::Exited(e)),
                    Some(_) => {}
                    None => return Err(ConnectError::Closed),
                },
                _ = &mut retry => break,
            }
        }
    }
}

impl KernelIo for RemoteKernel {
    fn info(&self) -> &Value {
        &self.info
    }

    fn pid(&self) -> Option<u32> {
        None
    }

    fn kernel_id(&self) -> Option<&str> {
        Some(&self.id)
    }

    fn request(&self, msg_type: &str, content: Value) -> Message {
        Message::new(msg_type, content, &self.session)
    }

    fn reply(&self, parent: &Message, msg_type: &str, content: Value) -> Message {
        Message::reply_to(&parent.header, msg_type, content, &self.session)
    }

    fn send<'a>(
        &'a mut self,
        channel: Channel,
        msg: &'a Message,
    ) -> BoxFuture<'a, Result<(), SendError>> {
        let r = self.link.send(channel, msg.clone());
        Box::pin(async move { r })
    }

    fn next_event(&mut self) -> BoxFuture<'_, KernelEvent> {
        Box::pin(crate::kernel::seam::next_until_exit(
            &mut self.events,
            &mut self.exit_reported,
        ))
    }

    fn try_next_event(&mut self) -> Option<KernelEvent> {
        if self.exit_reported {
            return None;
        }
        let ev = self.events.try_recv().ok()?;
        if matches!(ev, KernelEvent::Exited(_)) {
            self.exit_reported = true;
        }
        Some(ev)
    }

    /// `POST /api/kernels/{id}/interrupt`: the server interrupts the way the kernelspec says.
    fn interrupt(&mut self) -> BoxFuture<'_, Result<(), InterruptError>> {
        Box::pin(async move {
            self.rest
                .interrupt(&self.id)
                .await
                .map_err(|e| InterruptError::Gateway(redact(self.rest.gateway(), &e.to_string())))
        })
    }

    /// Delete a kernel we started; detach from an adopted one.
    fn shutdown(self: Box<Self>, grace: Duration) -> BoxFuture<'static, ShutdownRung> {
        let RemoteKernel {
            rest,
            id,
            owned,
            link,
            ..
        } = *self;
        drop(link);
        Box::pin(async move {
            if !owned {
                tracing::info!(gateway = %rest.gateway().name, kernel_id = %id, "detached from remote kernel");
                return ShutdownRung::Detached;
            }
            let wait = (grace * 4).max(Duration::from_secs(5));
            match rest.delete(&id, wait).await {
                Ok(()) => ShutdownRung::Graceful,
                Err(e) => {
                    tracing::warn!(gateway = %rest.gateway().name, kernel_id = %id, "deleting the remote kernel failed: {}", redact(rest.gateway(), &e.to_string()));
                    ShutdownRung::Killed
                }
            }
        })
    }

    fn responsive(&self) -> bool {
        self.link.connected()
    }

    fn dropped_messages(&self) -> u64 {
        self.link.dropped()
    }
}

/// The kernel is gone on the server (deleted, dead, or restarted by the server after it died).
pub(crate) fn gone() -> KernelEvent {
    KernelEvent::Exited(ExitInfo::unknown())
}

/// Shared handle type for the configured gateways.
pub type Gateways = Arc<Vec<Rest>>;
