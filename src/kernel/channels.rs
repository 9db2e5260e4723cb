//! The kernel's sockets: shell, control and stdin DEALERs (shell and stdin share one identity),
//! an iopub SUB subscribed to everything before it connects, and one reader task per socket
//! that decodes at full speed into an unbounded channel (a slow iopub reader makes kernels drop
//! output). A new kernel incarnation gets all-new sockets.
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/messaging.html#introduction> (channels).

use std::fmt;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zeromq::{
    DealerSendHalf, DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, SubSocket,
    ZmqMessage,
};

use super::connection::ConnectionInfo;
use super::seam::SendError;
use crate::wire::{self, Message, Signer};

/// A Jupyter channel we read from or write to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Shell,
    Control,
    Stdin,
    Iopub,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Channel::Shell => "shell",
            Channel::Control => "control",
            Channel::Stdin => "stdin",
            Channel::Iopub => "iopub",
        })
    }
}

/// What the reader tasks deliver, in arrival order per socket.
// `ChannelClosed` is rare; boxing the common variant would cost an allocation per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum KernelEvent {
    Message(Channel, Message),
    /// A socket's reader stopped (the socket closed or failed).
    ChannelClosed(Channel, String),
    /// The kernel is gone (its process exited, or a remote server says so). Sent once, after
    /// the messages it sent before.
    Exited(super::ExitInfo),
}

/// The send halves of the kernel's sockets; reader tasks are aborted on drop.
pub struct Channels {
    shell: DealerSendHalf,
    control: DealerSendHalf,
    stdin: DealerSendHalf,
    signer: Signer,
    /// Our client session id, written in every header we send.
    pub session: String,
    readers: Vec<JoinHandle<()>>,
    /// Messages the readers dropped (malformed or badly signed).
    pub dropped: Arc<AtomicU64>,
}

impl Channels {
    /// Connect all sockets to the kernel described by `info`; readers send into `events`.
    /// `connect` waits for the kernel to bind its ports (zeromq retries refused connections), so
    /// callers race this against the kernel's exit and a deadline.
    pub async fn connect(
        info: &ConnectionInfo,
        events: mpsc::UnboundedSender<KernelEvent>,
    ) -> Result<Channels, zeromq::ZmqError> {
        let signer = Signer::new(info.key.as_bytes());
        let session = uuid::Uuid::new_v4().to_string();
        let identity = zeromq::util::PeerIdentity::try_from(session.as_bytes().to_vec())?;

        let mut iopub = SubSocket::new();
        iopub.subscribe("").await?;
        iopub.connect(&info.endpoint(info.iopub_port)).await?;

        let mut opts = SocketOptions::default();
        opts.peer_identity(identity.clone());
        let mut shell = DealerSocket::with_options(opts);
        shell.connect(&info.endpoint(info.shell_port)).await?;
        let mut opts = SocketOptions::default();
        opts.peer_identity(identity);
        let mut stdin = DealerSocket::with_options(opts);
        stdin.connect(&info.endpoint(info.stdin_port)).await?;
        let mut control = DealerSocket::new();
        control.connect(&info.endpoint(info.control_port)).await?;

        let (shell_tx, shell_rx) = shell.split();
        let (stdin_tx, stdin_rx) = stdin.split();
        let (control_tx, control_rx) = control.split();
        let dropped = Arc::new(AtomicU64::new(0));
        let readers = vec![
            tokio::spawn(read_loop(
                iopub,
                Channel::Iopub,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
            tokio::spawn(read_loop(
                shell_rx,
                Channel::Shell,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
            tokio::spawn(read_loop(
                stdin_rx,
                Channel::Stdin,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
            tokio::spawn(read_loop(
                control_rx,
                Channel::Control,
                signer.clone(),
                events,
                dropped.clone(),
            )),
        ];
        Ok(Channels {
            shell: shell_tx,
            control: control_tx,
            stdin: stdin_tx,
            signer,
            session,
            readers,
            dropped,
        })
    }

    /// A new request message carrying our session id.
    pub fn request(&self, msg_type: &str, content: serde_json::Value) -> Message {
        Message::new(msg_type, content, &self.session)
    }

    /// Sign and send `msg` on `channel` (not iopub). `Ok` means accepted locally, not delivered.
    /// Errors: [`SendError::ReadOnlyChannel`] for iopub, `Frame`, `Transport`.
    pub async fn send(&mut self, channel: Channel, msg: &Message) -> Result<(), SendError> {
        let frames = wire::encode(msg, &self.signer);
        let zmsg = ZmqMessage::try_from(frames).map_err(|e| SendError::Frame(e.to_string()))?;
        let socket = match channel {
            Channel::Shell => &mut self.shell,
            Channel::Control => &mut self.control,
            Channel::Stdin => &mut self.stdin,
            Channel::Iopub => return Err(SendError::ReadOnlyChannel(channel)),
        };
        socket.send(zmsg).await.map_err(|e| SendError::Transport {
            channel,
            reason: e.to_string(),
        })
    }
}

impl Drop for Channels {
    fn drop(&mut self) {
        for r in &self.readers {
            r.abort();
        }
    }
}

/// Receive, decode and forward until the socket closes or nobody listens any more.
async fn read_loop<S: SocketRecv + Send>(
    mut socket: S,
    channel: Channel,
    signer: Signer,
    events: mpsc::UnboundedSender<KernelEvent>,
    dropped: Arc<AtomicU64>,
) {
    loop {
        let frames = match socket.recv().await {
            Ok(m) => m.into_vec(),
            Err(e) => {
                let _ = events.send(KernelEvent::ChannelClosed(channel, e.to_string()));
                return;
            }
        };
        match wire::decode(frames, &signer) {
            Ok(msg) => {
                if events.send(KernelEvent::Message(channel, msg)).is_err() {
                    return;
                }
            }
            Err(e) => {
                dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%channel, "dropped a message: {e}");
            }
        }
    }
}
