//! What a kernel's start waits on: readiness (a `kernel_info_reply` and proof that our iopub
//! subscription is live, as jupyter_client's `wait_for_ready`), the process's exit, and the
//! connection file that goes unless the start succeeds.
//!
//! Source: [Jupyter messaging, kernel info](https://jupyter-client.readthedocs.io/en/latest/messaging.html#kernel-info).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::channels::Channels;
use super::types::ExitInfo;
use super::types::{Channel, KernelEvent};

/// Loop `kernel_info_request` until a reply and proof of our iopub subscription arrive.
/// Returns the reply content. Unbounded: the caller races it with exit and a deadline.
pub(crate) async fn wait_ready(
    channels: &mut Channels,
    events: &mut mpsc::UnboundedReceiver<KernelEvent>,
) -> Value {
    let mut sent: HashSet<String> = HashSet::new();
    let mut reply: Option<Value> = None;
    let mut iopub_ok = false;
    loop {
        if reply.is_none() {
            let msg = channels.request("kernel_info_request", json!({}));
            sent.insert(msg.msg_id().to_string());
            if let Err(e) = channels.send(Channel::Shell, &msg).await {
                tracing::debug!("kernel_info_request not sent: {e}");
            }
        }
        let round = Instant::now() + Duration::from_secs(1);
        loop {
            let ev = tokio::select! {
                ev = events.recv() => ev,
                _ = tokio::time::sleep_until(round) => break,
            };
            let Some(KernelEvent::Message(channel, msg)) = ev else {
                if ev.is_none() {
                    // All readers gone: only the exit or the deadline can end this.
                    std::future::pending::<()>().await;
                }
                continue;
            };
            let ours = msg.parent_msg_id().is_some_and(|p| sent.contains(p));
            match channel {
                Channel::Shell if ours && msg.msg_type() == "kernel_info_reply" => {
                    reply.get_or_insert(msg.content);
                }
                Channel::Iopub if ours || msg.msg_type() == "iopub_welcome" => iopub_ok = true,
                _ => {}
            }
            if let (Some(r), true) = (&reply, iopub_ok) {
                return r.clone();
            }
        }
        // A reply without iopub proof: ask again so a fresh busy/idle pair is published.
        if reply.is_some() && !iopub_ok {
            reply = None;
        }
    }
}

/// The exit, once the process has exited; pends for ever if the watch is gone.
pub(super) async fn exit_of(rx: &mut tokio::sync::watch::Receiver<Option<ExitInfo>>) -> ExitInfo {
    // The watch guard must not live across an await (it is not Send).
    let exit = rx.wait_for(|e| e.is_some()).await.map(|v| *v);
    match exit {
        Ok(v) => v.unwrap_or(ExitInfo::unknown()),
        Err(_) => std::future::pending().await,
    }
}

/// Resolves when the process has exited (the watch guard is not held across awaits).
pub(super) async fn until_exit(rx: &mut tokio::sync::watch::Receiver<Option<ExitInfo>>) {
    let _ = rx.wait_for(|e| e.is_some()).await.map(|_| ());
}

/// Removes the connection file (and its own directory) unless [`FileGuard::keep`] hands
/// it on.
pub(super) struct FileGuard {
    pub(super) file: Option<PathBuf>,
    pub(super) dir: Option<PathBuf>,
}

impl FileGuard {
    pub(super) fn keep(mut self) -> PathBuf {
        self.dir = None;
        self.file.take().unwrap_or_default()
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        if let Some(p) = &self.file {
            let _ = std::fs::remove_file(p);
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
