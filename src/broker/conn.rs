//! One connection of a session's endpoint, whether it came from the endpoint's socket
//! ([`super::endpoint`]) or from a sandboxed kernel's dialer ([`super::dialer`]): admitted
//! while one of the session's slots is free, then one request line (and the bytes an
//! `artifact_put` line announces, [`super::artifacts::frame`]) read and answered.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::artifacts::{self, Framed};
use super::ops;
use super::shared::Shared;

/// Connections served at once per session (each is one call or query).
pub const MAX_CONNECTIONS: usize = 32;

/// Serve `stream`, a new connection of the session (from its socket or a kernel's dialer),
/// in a task of its own while one of the session's `slots` is free; else answer `busy`.
pub async fn accept(
    mut stream: UnixStream,
    shared: &Arc<Shared>,
    slots: &Arc<Semaphore>,
    stop: &CancellationToken,
) {
    let Ok(permit) = slots.clone().try_acquire_owned() else {
        let reply = ops::failure(
            ops::FailureKind::Busy,
            format!(
                "{MAX_CONNECTIONS} broker calls of this session are already in flight; wait for one to end"
            ),
        );
        let _ = stream.write_all(format!("{reply}\n").as_bytes()).await;
        return;
    };
    let (shared, stop) = (shared.clone(), stop.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = serve(stream, &shared) => {}
            _ = stop.cancelled() => {}
        }
        drop(permit);
    });
}

/// Serve one connection: read the request line, answer it, close.
async fn serve(stream: UnixStream, shared: &Shared) {
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let mut line = Vec::new();
    let limit = ops::MAX_REQUEST_BYTES as u64 + 1;
    let read = (&mut rd).take(limit).read_until(b'\n', &mut line).await;
    let reply = match read {
        Ok(0) | Err(_) => return,
        Ok(n) if n as u64 >= limit && !line.ends_with(b"\n") => ops::failure(
            ops::FailureKind::Limit,
            format!(
                "the request is larger than {} bytes: a call's arguments may be at most {} bytes of JSON",
                ops::MAX_REQUEST_BYTES,
                ops::MAX_ARGUMENT_BYTES
            ),
        ),
        Ok(_) => {
            let framed = match artifacts::frame(shared, &line, &mut rd).await {
                Ok(f) => f,
                Err(_) => return,
            };
            // The peer closing its side (KeyboardInterrupt, the kernel gone) abandons the call.
            let gone = Box::pin(peer_gone(rd));
            let answer = match framed {
                Framed::Refused(reply) => Some(reply),
                Framed::Broker => ops::handle(shared, &line, gone).await,
                Framed::Artifact(body) => artifacts::handle(shared, &line, body, gone).await,
            };
            match answer {
                Some(reply) => reply,
                None => return,
            }
        }
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    let _ = wr.write_all(&bytes).await;
    let _ = wr.shutdown().await;
}

/// Resolves when the peer closed its side of the connection (or wrote past its request).
async fn peer_gone(mut rd: BufReader<tokio::net::unix::OwnedReadHalf>) {
    let mut buf = [0u8; 256];
    loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            // Nothing is expected after the request; whatever comes is read and dropped.
            Ok(_) => continue,
        }
    }
}
