//! The kernel's sockets: shell, control and stdin DEALERs (shell and stdin share one identity),
//! an iopub SUB subscribed to everything before it connects, and one reader task per socket
//! that decodes at full speed into an unbounded channel (a slow iopub reader makes kernels drop
//! output). A new kernel incarnation gets all-new sockets.
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/messaging.html#introduction> (channels).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zeromq::{
    DealerSendHalf, DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, SubSocket,
    ZmqMessage,
};

use super::connection::ConnectionInfo;
use super::iopub::Iopub;
use super::types::{Channel, KernelEvent, SendError, SocketError};
use crate::wire::{self, Message, Signer};

/// The iopub socket: ours over TCP, `zeromq`'s for other transports.
enum Either {
    Own(Iopub),
    Zmq(SubSocket),
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
    ) -> Result<Channels, SocketError> {
        let signer = Signer::new(info.key.as_bytes());
        let session = uuid::Uuid::new_v4().to_string();
        let identity = zeromq::util::PeerIdentity::try_from(session.as_bytes().to_vec())?;

        // Our own reader for iopub over TCP (floods, see `iopub`); `zeromq` otherwise.
        let iopub = if info.transport == "tcp" {
            Iopub::connect(&format!("{}:{}", info.ip, info.iopub_port))
                .await
                .map(Either::Own)?
        } else {
            let mut s = SubSocket::new();
            s.subscribe("").await?;
            s.connect(&info.endpoint(info.iopub_port)).await?;
            Either::Zmq(s)
        };

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
        let iopub_reader = match iopub {
            Either::Own(s) => tokio::spawn(read_loop(
                s,
                Channel::Iopub,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
            Either::Zmq(s) => tokio::spawn(read_loop(
                Zmq(s),
                Channel::Iopub,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
        };
        let readers = vec![
            iopub_reader,
            tokio::spawn(read_loop(
                Zmq(shell_rx),
                Channel::Shell,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
            tokio::spawn(read_loop(
                Zmq(stdin_rx),
                Channel::Stdin,
                signer.clone(),
                events.clone(),
                dropped.clone(),
            )),
            tokio::spawn(read_loop(
                Zmq(control_rx),
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

    /// A reply to the kernel's `parent` (e.g. `input_reply`) carrying our session id.
    pub fn reply(&self, parent: &Message, msg_type: &str, content: serde_json::Value) -> Message {
        Message::reply_to(&parent.header, msg_type, content, &self.session)
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

/// The [`KernelIo`](super::seam::KernelIo) methods of a kernel reached through [`Channels`]
/// of its own (a field `channels`): requests and replies in its client session, and sends on
/// its sockets. Used inside an `impl KernelIo`.
macro_rules! channels_io {
    () => {
        fn request(&self, msg_type: &str, content: serde_json::Value) -> $crate::wire::Message {
            self.channels.request(msg_type, content)
        }

        fn reply(
            &self,
            parent: &$crate::wire::Message,
            msg_type: &str,
            content: serde_json::Value,
        ) -> $crate::wire::Message {
            self.channels.reply(parent, msg_type, content)
        }

        fn send<'a>(
            &'a mut self,
            channel: $crate::kernel::types::Channel,
            msg: &'a $crate::wire::Message,
        ) -> futures::future::BoxFuture<'a, Result<(), $crate::kernel::types::SendError>> {
            Box::pin(self.channels.send(channel, msg))
        }
    };
}
pub(super) use channels_io;

impl Drop for Channels {
    fn drop(&mut self) {
        for r in &self.readers {
            r.abort();
        }
    }
}

/// Where a reader takes its multiparts from: a `zeromq` socket, or for iopub our own SUB
/// reader (see [`super::iopub`]).
trait Source: Send {
    /// The next multipart, the large-frame budget it holds (released with its frames), and
    /// whether a frame of it had to be skipped. Errors: the socket failed or closed.
    fn next(
        &mut self,
        signer: &Signer,
    ) -> impl std::future::Future<Output = Result<super::iopub::Received, SocketError>> + Send;
}

/// A `zeromq` socket's receive side.
struct Zmq<S>(S);

impl<S: SocketRecv + Send> Source for Zmq<S> {
    async fn next(&mut self, _: &Signer) -> Result<super::iopub::Received, SocketError> {
        let m = self.0.recv().await?;
        Ok(super::iopub::Received {
            frames: m.into_vec(),
            budget: None,
            streamed: None,
            lost: None,
        })
    }
}

impl Source for Iopub {
    async fn next(&mut self, signer: &Signer) -> Result<super::iopub::Received, SocketError> {
        Ok(self.recv(signer).await?)
    }
}

/// Receive, decode and forward until the socket closes or nobody listens any more.
async fn read_loop(
    mut socket: impl Source,
    channel: Channel,
    signer: Signer,
    events: mpsc::UnboundedSender<KernelEvent>,
    dropped: Arc<AtomicU64>,
) {
    loop {
        let received = match socket.next(&signer).await {
            Ok(r) => r,
            Err(e) => {
                let _ = events.send(KernelEvent::ChannelClosed(channel, e));
                return;
            }
        };
        if let Some(reason) = received.lost {
            dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%channel, "dropped a message: {reason}");
            continue;
        }
        let decoded = match received.streamed {
            Some(content) => wire::decode_streamed(received.frames, *content),
            None => wire::decode(received.frames, &signer),
        };
        match decoded {
            Ok(mut msg) => {
                // A large frame's budget is held while its text waits in the message (until
                // the session stores it); anything else was copied out by decoding.
                if let (Some(raw), Some(budget)) = (msg.raw_text.as_mut(), received.budget) {
                    raw.on_release(move || drop(budget));
                }
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
