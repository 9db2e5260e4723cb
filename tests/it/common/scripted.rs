//! A scripted kernel for the session actor tests (`tests/it/session_actor/`): it implements
//! the kernel seam (`KernelIo`), hands the test every message the actor sends ([`Script`]),
//! and lets the test decide what the kernel answers and when.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::{
    Channel, KernelEvent, KernelIo, KernelLauncher, KernelSpec, ShutdownRung, StartError,
};
use kernel_mcp::session::cmd;
use kernel_mcp::session::{
    ExecuteRequest, RunId, RunStatus, SessionDesc, SessionHandle, wait_settled,
};
use kernel_mcp::wire::Message;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

/// The test's end of one fake kernel.
pub struct Script {
    /// What the actor sent, in order.
    pub sent: mpsc::UnboundedReceiver<(Channel, Message)>,
    /// What the kernel "sends" to the actor.
    pub events: mpsc::UnboundedSender<KernelEvent>,
    pub interrupts: Arc<AtomicUsize>,
    pub shutdowns: Arc<AtomicUsize>,
}

impl Script {
    /// The next message the actor sent, skipping none. Panics after a (virtual) minute.
    pub async fn next_sent(&mut self) -> (Channel, Message) {
        tokio::time::timeout(Duration::from_secs(60), self.sent.recv())
            .await
            .expect("the actor sent nothing")
            .expect("the fake kernel was dropped")
    }

    /// The next message of `msg_type` the actor sent on `channel` (others are skipped).
    pub async fn next_of(&mut self, channel: Channel, msg_type: &str) -> Message {
        loop {
            let (ch, msg) = self.next_sent().await;
            if ch == channel && msg.msg_type() == msg_type {
                return msg;
            }
        }
    }

    /// The next `execute_request` the actor sent.
    pub async fn next_execute(&mut self) -> Message {
        loop {
            let (ch, msg) = self.next_sent().await;
            if ch == Channel::Shell && msg.msg_type() == "execute_request" {
                return msg;
            }
        }
    }

    pub fn emit(&self, channel: Channel, parent: &Message, msg_type: &str, content: Value) {
        let msg = Message::reply_to(&parent.header, msg_type, content, "kernel");
        let _ = self.events.send(KernelEvent::Message(channel, msg));
    }

    pub fn reply(&self, req: &Message, status: &str) {
        self.emit(
            Channel::Shell,
            req,
            "execute_reply",
            json!({"status": status, "execution_count": 1}),
        );
    }

    pub fn idle(&self, req: &Message) {
        self.emit(
            Channel::Iopub,
            req,
            "status",
            json!({"execution_state": "idle"}),
        );
    }

    pub fn stdout(&self, req: &Message, text: &str) {
        self.emit(
            Channel::Iopub,
            req,
            "stream",
            json!({"name": "stdout", "text": text}),
        );
    }

    pub fn interrupted(&self) -> usize {
        self.interrupts.load(Ordering::SeqCst)
    }
}

/// The actor's end of one fake kernel.
pub struct FakeKernel {
    info: Value,
    sent: mpsc::UnboundedSender<(Channel, Message)>,
    events: mpsc::UnboundedReceiver<KernelEvent>,
    interrupts: Arc<AtomicUsize>,
    shutdowns: Arc<AtomicUsize>,
    /// Sends never complete (a stopped kernel whose transport is full).
    wedged: bool,
}

impl KernelIo for FakeKernel {
    fn info(&self) -> &Value {
        &self.info
    }
    fn pid(&self) -> Option<u32> {
        None
    }
    fn request(&self, msg_type: &str, content: Value) -> Message {
        Message::new(msg_type, content, "client")
    }
    fn reply(&self, parent: &Message, msg_type: &str, content: Value) -> Message {
        Message::reply_to(&parent.header, msg_type, content, "client")
    }
    fn send<'a>(
        &'a mut self,
        channel: Channel,
        msg: &'a Message,
    ) -> BoxFuture<'a, Result<(), kernel_mcp::kernel::SendError>> {
        let wedged = self.wedged;
        let _ = self.sent.send((channel, msg.clone()));
        Box::pin(async move {
            if wedged {
                std::future::pending::<()>().await;
            }
            Ok(())
        })
    }
    fn next_event(&mut self) -> BoxFuture<'_, KernelEvent> {
        Box::pin(async move {
            match self.events.recv().await {
                Some(ev) => ev,
                None => std::future::pending().await,
            }
        })
    }
    fn try_next_event(&mut self) -> Option<KernelEvent> {
        self.events.try_recv().ok()
    }
    fn interrupt(&mut self) -> BoxFuture<'_, Result<(), kernel_mcp::kernel::InterruptError>> {
        self.interrupts.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
    fn shutdown(self: Box<Self>, _grace: Duration) -> BoxFuture<'static, ShutdownRung> {
        self.shutdowns.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { ShutdownRung::Graceful })
    }
}

/// Starts fake kernels and hands the test a [`Script`] for each.
pub struct FakeLauncher {
    scripts: mpsc::UnboundedSender<Script>,
    wedged: bool,
    /// The `kernel_info_reply` content each kernel answers with.
    info: Value,
    /// The kernels are someone else's (an adopted kernel): never to be replaced.
    adopts: bool,
}

impl KernelLauncher for FakeLauncher {
    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let (sent_tx, sent_rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let interrupts = Arc::new(AtomicUsize::new(0));
        let shutdowns = Arc::new(AtomicUsize::new(0));
        let _ = self.scripts.send(Script {
            sent: sent_rx,
            events: events_tx,
            interrupts: interrupts.clone(),
            shutdowns: shutdowns.clone(),
        });
        let kernel = FakeKernel {
            info: self.info.clone(),
            sent: sent_tx,
            events: events_rx,
            interrupts,
            shutdowns,
            wedged: self.wedged,
        };
        Box::pin(async move { Ok(Box::new(kernel) as Box<dyn KernelIo>) })
    }

    fn adopts(&self) -> bool {
        self.adopts
    }
}

/// A session on fake kernels: its handle and the receiver of each new kernel's script.
pub async fn session(wedged: bool) -> (SessionHandle, mpsc::UnboundedReceiver<Script>, Script) {
    session_of(wedged, false, default_info()).await
}

/// The `kernel_info_reply` content of [`session`]'s kernels.
fn default_info() -> Value {
    json!({"implementation": "scripted", "language_info": {"name": "python"}})
}

/// [`session`] on kernels that answer `kernel_info_request` with `info`.
pub async fn session_with(
    wedged: bool,
    info: Value,
) -> (SessionHandle, mpsc::UnboundedReceiver<Script>, Script) {
    session_of(wedged, false, info).await
}

/// A session on a fake kernel someone else started (adopted).
pub async fn adopted_session() -> (SessionHandle, mpsc::UnboundedReceiver<Script>, Script) {
    session_of(false, true, default_info()).await
}

async fn session_of(
    wedged: bool,
    adopts: bool,
    info: Value,
) -> (SessionHandle, mpsc::UnboundedReceiver<Script>, Script) {
    let (tx, mut scripts) = mpsc::unbounded_channel();
    let spec = KernelSpec {
        name: "scripted".into(),
        resource_dir: std::env::temp_dir(),
        argv: vec!["fake".into()],
        display_name: "Scripted".into(),
        language: "python".into(),
        interrupt_mode: Default::default(),
        env: Default::default(),
        metadata: Value::Null,
    };
    let desc = SessionDesc {
        id: "s".into(),
        spec,
        cwd: std::env::temp_dir(),
        launcher: Arc::new(FakeLauncher {
            scripts: tx,
            wedged,
            info,
            adopts,
        }),
        journal_dir: None,
        kernel_id: "scripted-kernel".into(),
        journal_private: false,
        span: tracing::Span::none(),
        observer: None,
    };
    let (handle, created) = SessionHandle::spawn(
        &tokio::runtime::Handle::current(),
        desc,
        Arc::new(Limits::default()),
    );
    let first = scripts.recv().await.expect("a first kernel");
    let started = created.await.expect("created").expect("started");
    assert_eq!(started.info.generation, 1);
    (handle, scripts, first)
}

pub async fn submit(
    handle: &SessionHandle,
    req: ExecuteRequest,
) -> (RunId, watch::Receiver<RunStatus>) {
    handle.call(cmd::Submit::new(req)).await.expect("queued")
}

/// Restart the session (history kept) while the test is the kernel launcher: answers with
/// the new kernel's script once the restart is done.
pub async fn restart(
    handle: &SessionHandle,
    kernels: &mut mpsc::UnboundedReceiver<Script>,
) -> Script {
    let h = handle.clone();
    let restarting = tokio::spawn(async move {
        h.call(cmd::Restart {
            clear_history: false,
        })
        .await
    });
    let next = kernels.recv().await.expect("a new kernel");
    restarting.await.expect("joined").expect("restarted");
    next
}

/// Wait (virtual time) for the run to settle; its status.
pub async fn settle(rx: &mut watch::Receiver<RunStatus>, within: Duration) -> RunStatus {
    assert!(
        wait_settled(rx, within).await,
        "the run did not settle within {within:?}"
    );
    *rx.borrow()
}
