//! The relay's own connection to a session's kernel: one per person's websocket, a client of
//! the kernel beside the session's (as `jupyter console --existing` is), so the
//! person's requests carry their own msg_ids and the session actor, which follows only its
//! own, never takes their output into a run of an agent.
//!
//! - A local or adopted kernel: ZeroMQ sockets of our own from the session's connection file
//!   (shell and stdin share one identity, iopub subscribed to everything), through
//!   [`Channels`]. The connection file is the kernel's current one, so after a restart the
//!   relay opens a new link.
//! - A kernel on a gateway: a channels websocket of our own to it (a new `session_id`),
//!   through the remote [`Link`], which already keeps only the replies to what we sent and
//!   drops the server's `kernel_info` nudges.
//!
//! Messages are re-signed with the kernel's key on the way in; what the kernel sends back is
//! delivered unsigned (the face's websocket carries no signatures).

use std::time::Duration;

use tokio::sync::mpsc;

use super::adapter::Sessions;
use crate::kernel::adopted::read_connection_file;
use crate::kernel::remote::channels::Link;
use crate::kernel::{Channel, Channels, KernelEvent, SendError};
use crate::session::SessionInfo;
use crate::wire::Message;

/// How long opening a link may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// The transport of a [`KernelLink`].
enum Transport {
    Zmq(Channels),
    Gateway(Link),
}

/// One client connection to a kernel, with the events it receives.
pub struct KernelLink {
    transport: Transport,
    pub events: mpsc::UnboundedReceiver<KernelEvent>,
    /// The generation of the session's kernel it was opened on.
    pub generation: u64,
}

/// Why a link could not be opened (sentences for the person; no secrets).
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("session '{session}' has no kernel to connect to right now (status {status})")]
    NoKernel { session: String, status: String },
    #[error("cannot connect to the kernel of session '{session}': {detail}")]
    Connect { session: String, detail: String },
}

impl KernelLink {
    /// Open a link to the kernel `info` describes.
    /// Errors: [`LinkError`].
    pub async fn open(sessions: &Sessions, info: &SessionInfo) -> Result<KernelLink, LinkError> {
        let connect = |detail: String| LinkError::Connect {
            session: info.session_id.clone(),
            detail,
        };
        let (tx, events) = mpsc::unbounded_channel();
        let transport = if info.location == "local" {
            let Some(file) = &info.connection_file else {
                return Err(LinkError::NoKernel {
                    session: info.session_id.clone(),
                    status: info.status.as_str().to_string(),
                });
            };
            let conn = read_connection_file(std::path::Path::new(file))
                .map_err(|e| connect(e.to_string()))?;
            let channels = tokio::time::timeout(OPEN_TIMEOUT, Channels::connect(&conn, tx))
                .await
                .map_err(|_| connect("the kernel's ports did not answer".into()))?
                .map_err(|e| connect(e.to_string()))?;
            Transport::Zmq(channels)
        } else {
            let rest = sessions
                .gateway(&info.location)
                .ok_or_else(|| connect(format!("no gateway named '{}'", info.location)))?;
            let Some(id) = info.kernel_id.clone() else {
                return Err(LinkError::NoKernel {
                    session: info.session_id.clone(),
                    status: info.status.as_str().to_string(),
                });
            };
            let session = uuid::Uuid::new_v4().to_string();
            let link = Link::open(rest, id, session, tx, OPEN_TIMEOUT, false)
                .await
                .map_err(|e| connect(e.to_string()))?;
            Transport::Gateway(link)
        };
        Ok(KernelLink {
            transport,
            events,
            generation: info.generation,
        })
    }

    /// Send `msg` (a person's request or reply) on `channel`.
    /// Errors: [`SendError`].
    pub async fn send(&mut self, channel: Channel, msg: &Message) -> Result<(), SendError> {
        match &mut self.transport {
            Transport::Zmq(c) => c.send(channel, msg).await,
            Transport::Gateway(l) => l.send(channel, msg.clone()),
        }
    }
}
