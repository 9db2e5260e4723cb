//! The iopub channel's own reader: a ZMTP 3.0 SUB client over one TCP connection (NULL
//! mechanism, subscribed to everything), written for floods.
//!
//! Why not the `zeromq` crate here (it serves every other channel): a kernel flooding iopub
//! sends messages of several MB (ipykernel batches stdout: 50 MB arrive as a few frames of
//! 6–25 MB), and that crate reads each into a buffer that stays with the connection, sized
//! by the largest frame so far — sixteen flooding kernels then hold sixteen such buffers.
//! Here the content frame of a large `stream` message is read in pieces through a transit
//! file (see `transit`), any other frame into a buffer of exactly its size that goes when the
//! message is stored, and such a frame over [`LARGE_FRAME`] is read only once the
//! process-wide budget of [`LARGE_FRAMES_BUDGET`] bytes has room for it (one larger than the
//! budget waits for all of it). While a frame waits, its bytes stay in the kernel: in the socket buffers and
//! in the kernel's own queue, which counts messages, not bytes, so a few large messages
//! there drop nothing. The budget is released when the message is dropped, i.e. once the
//! session has stored its text (see `wire::RawText::on_release`).
//!
//! Protocol: ZMTP 3.0 (<https://rfc.zeromq.org/spec/23/>): a 64-byte greeting, a READY
//! command each way (`Socket-Type: SUB`), then the subscription as a message (`0x01` and
//! the empty topic) and frames: a flags byte (MORE, LONG, COMMAND), a 1- or 8-byte size, the
//! body. Commands after the handshake are ignored. Nothing a peer sends can make this
//! allocate more than [`MAX_FRAME`] at once: a larger frame is skipped and its message
//! dropped (counted, like a badly signed one).

use std::sync::LazyLock;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::transit::{self, Transited};
use crate::wire::{DELIMITER, Signer};

/// A frame at least this large counts against [`LARGE_FRAMES_BUDGET`].
pub const LARGE_FRAME: usize = 1024 * 1024;
/// Bytes of large frames being read or waiting to be stored, across all kernels.
pub const LARGE_FRAMES_BUDGET: usize = 32 * 1024 * 1024;
/// The largest frame read; a larger one is skipped (its message is dropped).
pub const MAX_FRAME: u64 = 512 * 1024 * 1024;

/// How often a refused connection is retried while the kernel binds its ports.
const CONNECT_RETRY: Duration = Duration::from_millis(20);

/// The budget in KiB permits (a semaphore counts in u32).
static BUDGET: LazyLock<std::sync::Arc<Semaphore>> =
    LazyLock::new(|| std::sync::Arc::new(Semaphore::new(LARGE_FRAMES_BUDGET / 1024)));

/// One message read: its frames, the budget its large frames hold (released when dropped),
/// a content frame read in pieces (see `transit`; `frames` then holds an empty frame in its
/// place), and why the message is lost when it is (a frame had to be skipped).
pub struct Received {
    pub frames: Vec<Bytes>,
    pub budget: Option<OwnedSemaphorePermit>,
    pub streamed: Option<Box<crate::wire::StreamedContent>>,
    pub lost: Option<String>,
}

/// Why the connection could not be set up or went away.
#[derive(Debug, thiserror::Error)]
pub enum IopubError {
    #[error("iopub connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("iopub handshake: {0}")]
    Handshake(&'static str),
}

/// A connected, subscribed iopub SUB socket.
pub struct Iopub {
    read: BufReader<OwnedReadHalf>,
    /// Kept open: closing our side would end the subscription.
    _write: OwnedWriteHalf,
}

impl Iopub {
    /// Connect to `addr` (retrying while it refuses: the kernel may not have bound yet; the
    /// caller bounds this with a deadline), greet, handshake and subscribe to everything.
    pub async fn connect(addr: &str) -> Result<Iopub, IopubError> {
        let stream = loop {
            match TcpStream::connect(addr).await {
                Ok(s) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tokio::time::sleep(CONNECT_RETRY).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        stream.set_nodelay(true)?;
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::with_capacity(64 * 1024, read);
        write.write_all(&greeting()).await?;
        let mut peer = [0u8; 64];
        read.read_exact(&mut peer).await?;
        if peer[0] != 0xff || peer[9] != 0x7f {
            return Err(IopubError::Handshake("the peer's greeting is not ZMTP"));
        }
        if peer[10] < 3 {
            return Err(IopubError::Handshake("the peer speaks ZMTP before 3.0"));
        }
        if &peer[12..16] != b"NULL" {
            return Err(IopubError::Handshake(
                "the peer wants a security mechanism other than NULL",
            ));
        }
        write.write_all(&ready_command()).await?;
        // The peer's READY (its Socket-Type is not checked: any publisher will do).
        let (flags, size) = frame_header(&mut read).await?;
        if flags & COMMAND == 0 || size > 64 * 1024 {
            return Err(IopubError::Handshake("the peer did not send READY"));
        }
        let mut body = vec![0u8; size as usize];
        read.read_exact(&mut body).await?;
        if body.get(..6) != Some(b"\x05READY") {
            return Err(IopubError::Handshake("the peer did not send READY"));
        }
        match property(&body[6..], b"Socket-Type") {
            Some(b"PUB" | b"XPUB") => {}
            // Our own READY: a TCP self-connect to a port nobody listened on yet.
            Some(b"SUB") => return Err(IopubError::Handshake("connected to itself")),
            _ => return Err(IopubError::Handshake("the peer is not a publisher")),
        }
        // Subscribe to every topic: a one-frame message, 0x01 and the empty prefix.
        write.write_all(&[0x00, 0x01, 0x01]).await?;
        Ok(Iopub {
            read,
            _write: write,
        })
    }

    /// The next message; a large `stream` content frame goes through a transit file, and
    /// `signer` checks it as it comes. Errors: the connection failed or closed.
    pub async fn recv(&mut self, signer: &Signer) -> Result<Received, IopubError> {
        let mut frames: Vec<Bytes> = Vec::new();
        let mut budget: Option<OwnedSemaphorePermit> = None;
        let mut streamed = None;
        let mut lost = None;
        let mut delimiter: Option<usize> = None;
        loop {
            let (flags, size) = frame_header(&mut self.read).await?;
            if size > MAX_FRAME {
                skip(&mut self.read, size).await?;
                lost = Some(format!("a frame over {MAX_FRAME} bytes"));
            } else if flags & COMMAND != 0 {
                skip(&mut self.read, size).await?; // PING and the like: nothing to do
                continue;
            } else {
                let size = size as usize;
                // The content frame of a large `stream` message: in pieces, through a file.
                let signed = delimiter
                    .filter(|d| frames.len() == d + 5 && size >= transit::TRANSIT_FRAME)
                    .filter(|d| budget.is_none() && transit::is_stream(&frames[d + 2]))
                    .map(|d| [&frames[d + 2][..], &frames[d + 3][..], &frames[d + 4][..]]);
                let transited = match signed {
                    Some(signed) => transit::read(&mut self.read, size, signer, signed).await?,
                    None => None,
                };
                match transited {
                    Some(Transited::Streamed(content, permit)) => {
                        streamed = Some(content);
                        budget = permit;
                        frames.push(Bytes::new());
                    }
                    Some(Transited::Whole(whole)) => {
                        // In memory after all: it counts like any large frame.
                        take_budget(size, &mut budget).await;
                        frames.push(whole);
                    }
                    Some(Transited::Lost(reason)) => lost = Some(reason),
                    None => {
                        let body = self.frame_body(size, &mut budget).await?;
                        if delimiter.is_none() && body.as_ref() == DELIMITER {
                            delimiter = Some(frames.len());
                        }
                        frames.push(body);
                    }
                }
            }
            if flags & MORE == 0 {
                return Ok(Received {
                    frames,
                    budget,
                    streamed,
                    lost,
                });
            }
        }
    }

    /// A frame's body of `size` bytes, read whole into a buffer of exactly its size.
    async fn frame_body(
        &mut self,
        size: usize,
        budget: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<Bytes, IopubError> {
        take_budget(size, budget).await;
        let mut body = Vec::with_capacity(size);
        while body.len() < size {
            let left = (size - body.len()) as u64;
            // Into the buffer's spare capacity: no zero-filling, no reallocation.
            if (&mut self.read).take(left).read_buf(&mut body).await? == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
        }
        Ok(Bytes::from(body))
    }
}

/// The first large frame of a message takes its share of the in-memory budget (later ones
/// ride on it: a reader never waits while holding budget, so none waits for ever).
async fn take_budget(size: usize, budget: &mut Option<OwnedSemaphorePermit>) {
    if size >= LARGE_FRAME && budget.is_none() {
        let kib = (size / 1024).clamp(1, LARGE_FRAMES_BUDGET / 1024) as u32;
        *budget = BUDGET.clone().acquire_many_owned(kib).await.ok();
    }
}

const MORE: u8 = 0x01;
const LONG: u8 = 0x02;
const COMMAND: u8 = 0x04;

/// Our greeting: ZMTP 3.0, mechanism NULL, as client.
fn greeting() -> [u8; 64] {
    let mut g = [0u8; 64];
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 0;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// `READY` with `Socket-Type: SUB`, as a short command frame.
fn ready_command() -> Vec<u8> {
    let mut body = vec![5];
    body.extend_from_slice(b"READY");
    body.push(11);
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&3u32.to_be_bytes());
    body.extend_from_slice(b"SUB");
    let mut frame = vec![COMMAND, body.len() as u8];
    frame.extend_from_slice(&body);
    frame
}

/// The value of property `name` in a READY command's properties (name length, name, value
/// length (u32 BE), value; repeated).
fn property<'a>(mut props: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    while !props.is_empty() {
        let n = usize::from(*props.first()?);
        let key = props.get(1..1 + n)?;
        let len_at = 1 + n;
        let len = u32::from_be_bytes(props.get(len_at..len_at + 4)?.try_into().ok()?) as usize;
        let value = props.get(len_at + 4..len_at + 4 + len)?;
        if key.eq_ignore_ascii_case(name) {
            return Some(value);
        }
        props = &props[len_at + 4 + len..];
    }
    None
}

/// A frame's flags and body size.
async fn frame_header<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<(u8, u64)> {
    let flags = r.read_u8().await?;
    let size = if flags & LONG != 0 {
        r.read_u64().await?
    } else {
        u64::from(r.read_u8().await?)
    };
    Ok((flags, size))
}

/// Read and drop `n` bytes.
async fn skip<R: AsyncRead + Unpin>(r: &mut R, n: u64) -> std::io::Result<()> {
    let copied = tokio::io::copy(&mut r.take(n), &mut tokio::io::sink()).await?;
    if copied < n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeromq::{Socket, SocketSend, ZmqMessage};

    /// A `zeromq` PUB on a free port and its address.
    async fn publisher() -> (zeromq::PubSocket, String) {
        let mut p = zeromq::PubSocket::new();
        let ep = p.bind("tcp://127.0.0.1:0").await.expect("bind");
        let addr = ep.to_string().trim_start_matches("tcp://").to_string();
        (p, addr)
    }

    #[tokio::test]
    async fn messages_small_and_large_arrive_whole_and_in_order() {
        let (mut publisher, addr) = publisher().await;
        let mut sub = Iopub::connect(&addr).await.expect("connect");
        // The subscription reaches the publisher a moment after the handshake.
        let big = Bytes::from(vec![b'x'; 3 * LARGE_FRAME]);
        let mut got = None;
        for _ in 0..200 {
            let m: ZmqMessage = vec![Bytes::from_static(b"topic"), Bytes::from_static(b"hello")]
                .try_into()
                .unwrap();
            publisher.send(m).await.expect("send");
            if let Ok(r) =
                tokio::time::timeout(Duration::from_millis(20), sub.recv(&Signer::new(b""))).await
            {
                got = Some(r.expect("recv"));
                break;
            }
        }
        let first = got.expect("a message once subscribed");
        assert_eq!(
            first.frames,
            vec![Bytes::from_static(b"topic"), Bytes::from_static(b"hello")]
        );
        assert!(first.budget.is_none());
        let m: ZmqMessage = vec![Bytes::from_static(b"t"), big.clone()]
            .try_into()
            .unwrap();
        publisher.send(m).await.expect("send");
        // Skip the hellos still in flight.
        let r = loop {
            let r = sub.recv(&Signer::new(b"")).await.expect("recv");
            if r.frames.len() == 2 && r.frames[1].len() > 5 {
                break r;
            }
        };
        assert_eq!(r.frames[1], big);
        let held = r.budget.as_ref().map(|p| p.num_permits());
        assert_eq!(
            held,
            Some(3 * 1024),
            "the large frame holds its KiB of the budget"
        );
        let before = BUDGET.available_permits();
        drop(r);
        assert_eq!(BUDGET.available_permits(), before + 3 * 1024);
    }

    #[tokio::test]
    async fn a_refused_connection_is_retried_until_the_kernel_binds() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap().to_string();
        drop(free);
        let connect = tokio::spawn({
            let addr = addr.clone();
            async move { Iopub::connect(&addr).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut p = zeromq::PubSocket::new();
        p.bind(&format!("tcp://{addr}")).await.expect("bind late");
        let r = tokio::time::timeout(Duration::from_secs(5), connect).await;
        assert!(matches!(r, Ok(Ok(Ok(())))), "{r:?}");
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_skipped_not_allocated() {
        // A fake peer: greeting, READY, then a frame claiming an absurd size.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let peer = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut g = greeting();
            g[32] = 1;
            s.write_all(&g).await.unwrap();
            let ready = ready_command();
            let mut pub_ready = ready[..ready.len() - 3].to_vec();
            pub_ready.extend_from_slice(b"PUB");
            s.write_all(&pub_ready).await.unwrap();
            // Our greeting, READY and subscription.
            let mut buf = vec![0u8; 64 + ready_command().len() + 3];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&[LONG]).await.unwrap();
            s.write_all(&(MAX_FRAME + 1).to_be_bytes()).await.unwrap();
            s.write_all(b"short").await.unwrap();
            // Then close: the skip ends early, as an error, without a huge allocation.
        });
        let mut sub = Iopub::connect(&addr).await.expect("connect");
        let r = tokio::time::timeout(Duration::from_secs(5), sub.recv(&Signer::new(b""))).await;
        assert!(matches!(r, Ok(Err(_))), "the connection ended mid-frame");
        peer.await.unwrap();
    }

    #[tokio::test]
    async fn a_self_connect_is_refused() {
        // A peer that answers like ourselves (what a TCP self-connect looks like).
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(&greeting()).await.unwrap();
            s.write_all(&ready_command()).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        });
        let r = Iopub::connect(&addr).await;
        assert!(
            matches!(r, Err(IopubError::Handshake("connected to itself"))),
            "{:?}",
            r.err()
        );
    }
}
