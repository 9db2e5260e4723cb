//! `fake-kernel -f <connection_file>`: a fault-injecting Jupyter kernel for tests.
//!
//! It speaks the real wire protocol (ROUTER shell/control/stdin, PUB iopub, REP heartbeat on
//! the connection file's ports, HMAC-signed with its key) so the server under test cannot tell
//! it from a real kernel, and misbehaves on demand. Tests use it *in addition to* real kernels.
//! Logs go to stderr only.
//!
//! | request (channel)                 | what the fake sends back |
//! |-----------------------------------|--------------------------|
//! | `kernel_info_request` (shell)     | busy, `kernel_info_reply` (implementation `fake-kernel`, language `fake`), idle; on control: the reply only |
//! | `execute_request` (shell)         | busy, `execute_input`, the code's outputs, `execute_reply`, idle; `execution_count` +1 unless `silent` |
//! | `is_complete_request` (shell)     | `$FAKE_KERNEL_IS_COMPLETE` if set, else `incomplete` (indent `"  "`) when the code ends in `\`, else `complete` |
//! | other shell requests              | busy and idle only, no reply |
//! | `interrupt_request` (control)     | `interrupt_reply {status: ok}`; interrupts a running `sleep` or `input` (not `hang`) |
//! | `shutdown_request` (control)      | `shutdown_reply`, then exit 0 |
//! | SIGINT                            | interrupts a running `sleep`/`input`: `error` KeyboardInterrupt + reply status error; ignored when idle or in `hang` |
//!
//! The code of an `execute_request` is a command language, one command per line:
//!
//! | command               | effect |
//! |-----------------------|--------|
//! | `print <text>`        | `stream` stdout `<text>\n` |
//! | `eprint <text>`       | `stream` stderr `<text>\n` |
//! | `result <text>`       | `execute_result` `{text/plain: <text>}` |
//! | `display <text>`      | `display_data` `{text/plain: <text>}` |
//! | `error <ename> <evalue>` | `error` message, reply status error; later lines are skipped |
//! | `sleep <secs>`        | sleeps; SIGINT or `interrupt_request` → KeyboardInterrupt |
//! | `exit <code>`         | the process exits at once with `<code>`, no reply, no idle |
//! | `input <prompt>`      | `input_request` on stdin to the shell peer's identity, waits for `input_reply`, prints `got <value>`; `allow_stdin: false` → StdinNotImplementedError |
//! | `late <ms> <text>`    | `<ms>` after the reply and idle, a stdout `stream` parented to this request |
//! | `flood <bytes>`       | that many bytes of stdout (numbered 64-byte lines) in 64 KiB messages |
//! | `abort`               | only `execute_reply {status: "abort"}`: no busy, no outputs, no idle |
//! | `reply-first`         | the reply (status ok) goes out right after `execute_input`, before the outputs |
//! | `drop-reply`          | no `execute_reply` for this request, only idle (what ipykernel does when a SIGINT lands in its handler outside the user's code) |
//! | `invalid-utf8`        | a stdout `stream` whose JSON text has the bytes `FF FE` (not UTF-8) |
//! | `close-sockets [later]` | the process closes every socket but stays alive (it becomes `sleep`, ignoring SIGINT), at once or 300 ms after this request's reply |
//! | `hang`                | ignores SIGINT and `interrupt_request`, never finishes |
//! | `garbage`             | on iopub: a multipart with no delimiter, then a stdout `FORGED` stream signed with another key |
//! | anything else         | `error` NameError |
//!
//! Misbehaviour selected by environment variables (as jupyter_client's test kernels do):
//!
//! | variable                          | effect |
//! |-----------------------------------|--------|
//! | `FAKE_KERNEL_EXIT_AT_START=<code>` | a line on stderr, then exit `<code>` before binding |
//! | `FAKE_KERNEL_STARTUP_DELAY=<secs>` | sleep before binding |
//! | `FAKE_KERNEL_NO_SHUTDOWN_REPLY=1` | ignore `shutdown_request` |
//! | `FAKE_KERNEL_IGNORE_SIGTERM=1`    | survive SIGTERM (only SIGKILL ends it) |
//! | `FAKE_KERNEL_NULL_PARENTS=1`      | `metadata` is JSON `null`, unparented messages have `parent_header: null` (xeus), and each execute is preceded by an unparented stdout `stream` "unparented noise" |
//! | `FAKE_KERNEL_NO_WELCOME=1`        | accepted; the fake never sends `iopub_welcome` (PUB socket) |
//! | `FAKE_KERNEL_INPUT_WITHOUT_ALLOW=1` | `input` sends `input_request` even when `allow_stdin` is false (IRkernel) |
//! | `FAKE_KERNEL_IS_COMPLETE=<status>` | fixed `is_complete_reply` status |

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use kernel_mcp::kernel::connection::ConnectionInfo;
use kernel_mcp::wire::{self, Message, Signer};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Mutex, mpsc, watch};
use zeromq::{
    PubSocket, RepSocket, RouterRecvHalf, RouterSendHalf, RouterSocket, Socket, SocketRecv,
    SocketSend, ZmqMessage,
};

/// Size of one `flood` message.
const CHUNK: usize = 64 * 1024;

/// Log a line to stderr with the fake's prefix, in one write (stderr is unbuffered).
macro_rules! log {
    ($($arg:tt)*) => {{
        let line = format!("fake-kernel[{}]: {}\n", std::process::id(), format_args!($($arg)*));
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }};
}

// After the macro: textual scoping makes `log!` visible in the module.
mod execute;

/// Misbehaviour switches, read once from the environment.
struct Config {
    no_shutdown_reply: bool,
    null_parents: bool,
    input_without_allow: bool,
    is_complete: Option<String>,
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let file = match args.iter().position(|a| a == "-f" || a == "--f") {
        Some(i) => args.get(i + 1).cloned(),
        None => args
            .iter()
            .find_map(|a| a.strip_prefix("--f=").map(str::to_owned)),
    };
    let Some(file) = file else {
        eprintln!("usage: fake-kernel -f <connection_file>");
        return ExitCode::from(2);
    };
    if let Ok(code) = std::env::var("FAKE_KERNEL_EXIT_AT_START") {
        let code: i32 = code.trim().parse().unwrap_or(1);
        log!("FAKE_KERNEL_EXIT_AT_START: exiting with status {code} before binding");
        std::process::exit(code);
    }
    if let Some(secs) = std::env::var("FAKE_KERNEL_STARTUP_DELAY")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
    {
        log!("FAKE_KERNEL_STARTUP_DELAY: sleeping {secs} s before binding");
        std::thread::sleep(Duration::from_secs_f64(secs));
    }
    let info = match read_connection_file(&file) {
        Ok(i) => i,
        Err(e) => {
            log!("cannot read connection file {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let cfg = Config {
        no_shutdown_reply: flag("FAKE_KERNEL_NO_SHUTDOWN_REPLY"),
        null_parents: flag("FAKE_KERNEL_NULL_PARENTS"),
        input_without_allow: flag("FAKE_KERNEL_INPUT_WITHOUT_ALLOW"),
        is_complete: std::env::var("FAKE_KERNEL_IS_COMPLETE").ok(),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            log!("cannot start tokio: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(info, cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log!("{e}");
            ExitCode::from(1)
        }
    }
}

/// The connection file at `file`, strictly (every field of [`ConnectionInfo`]).
fn read_connection_file(file: &str) -> Result<ConnectionInfo, Box<dyn std::error::Error>> {
    Ok(serde_json::from_slice(&std::fs::read(file)?)?)
}

/// Why the fake stops serving (logged, then exit status 1).
#[derive(Debug, thiserror::Error)]
enum Fatal {
    #[error("binding {name} to {endpoint}: {source}")]
    Bind {
        name: &'static str,
        endpoint: String,
        source: zeromq::ZmqError,
    },
    #[error("{0}")]
    Signals(#[from] std::io::Error),
    #[error("shell socket closed")]
    ShellClosed,
}

/// Shared state and send halves; cloned into every task.
#[derive(Clone)]
struct Kernel {
    cfg: Arc<Config>,
    signer: Signer,
    session: String,
    iopub: Arc<Mutex<PubSocket>>,
    shell: RouterSendHalf,
    control: RouterSendHalf,
    stdin: RouterSendHalf,
    /// Bumped by SIGINT and `interrupt_request`; a `sleep`/`input` watches it.
    interrupts: Arc<watch::Sender<u64>>,
    /// Set by `hang`: interrupts are ignored from then on.
    hanging: Arc<AtomicBool>,
    execution_count: Arc<AtomicI64>,
}

/// Which router socket a reply goes out on.
#[derive(Clone, Copy)]
enum Route {
    Shell,
    Control,
    Stdin,
}

async fn run(info: ConnectionInfo, cfg: Config) -> Result<(), Fatal> {
    let at = |port: u16| info.endpoint(port);
    let mut shell = RouterSocket::new();
    bind(&mut shell, &at(info.shell_port), "shell").await?;
    let mut control = RouterSocket::new();
    bind(&mut control, &at(info.control_port), "control").await?;
    let mut stdin = RouterSocket::new();
    bind(&mut stdin, &at(info.stdin_port), "stdin").await?;
    let mut iopub = PubSocket::new();
    bind(&mut iopub, &at(info.iopub_port), "iopub").await?;
    let mut hb = RepSocket::new();
    bind(&mut hb, &at(info.hb_port), "heartbeat").await?;
    log!("listening on shell port {}", info.shell_port);

    let (shell_tx, shell_rx) = shell.split();
    let (control_tx, control_rx) = control.split();
    let (stdin_tx, stdin_rx) = stdin.split();
    let kernel = Kernel {
        cfg: Arc::new(cfg),
        signer: Signer::new(info.key.as_bytes()),
        session: uuid::Uuid::new_v4().to_string(),
        iopub: Arc::new(Mutex::new(iopub)),
        shell: shell_tx,
        control: control_tx,
        stdin: stdin_tx,
        interrupts: Arc::new(watch::channel(0).0),
        hanging: Arc::new(AtomicBool::new(false)),
        execution_count: Arc::new(AtomicI64::new(0)),
    };

    tokio::spawn(async move {
        while let Ok(m) = hb.recv().await {
            if hb.send(m).await.is_err() {
                break;
            }
        }
    });
    let mut sigint = signal(SignalKind::interrupt())?;
    let k = kernel.clone();
    tokio::spawn(async move {
        while sigint.recv().await.is_some() {
            k.interrupt("SIGINT");
        }
    });
    if flag("FAKE_KERNEL_IGNORE_SIGTERM") {
        let mut sigterm = signal(SignalKind::terminate())?;
        tokio::spawn(async move {
            while sigterm.recv().await.is_some() {
                log!("FAKE_KERNEL_IGNORE_SIGTERM: ignoring SIGTERM");
            }
        });
    }
    let mut input_rx = read_loop(stdin_rx, kernel.signer.clone(), "stdin");
    let mut control_rx = read_loop(control_rx, kernel.signer.clone(), "control");
    let k = kernel.clone();
    tokio::spawn(async move {
        while let Some(req) = control_rx.recv().await {
            k.handle_control(req).await;
        }
    });
    let mut shell_rx = read_loop(shell_rx, kernel.signer.clone(), "shell");
    while let Some(req) = shell_rx.recv().await {
        kernel.handle_shell(req, &mut input_rx).await;
    }
    Err(Fatal::ShellClosed)
}

async fn bind<S: Socket>(socket: &mut S, endpoint: &str, name: &'static str) -> Result<(), Fatal> {
    match socket.bind(endpoint).await {
        Ok(_) => Ok(()),
        Err(source) => Err(Fatal::Bind {
            name,
            endpoint: endpoint.to_string(),
            source,
        }),
    }
}

/// A task that receives and decodes until the socket fails; bad messages are logged and dropped.
fn read_loop(
    mut socket: RouterRecvHalf,
    signer: Signer,
    name: &'static str,
) -> mpsc::UnboundedReceiver<Message> {
    let (out, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let frames = match socket.recv().await {
                Ok(m) => m.into_vec(),
                Err(e) => {
                    log!("{name} socket closed: {e}");
                    return;
                }
            };
            match wire::decode(frames, &signer) {
                Ok(msg) => {
                    if out.send(msg).is_err() {
                        return;
                    }
                }
                Err(e) => log!("{name}: dropped a bad message: {e}"),
            }
        }
    });
    rx
}

impl Kernel {
    fn interrupt(&self, source: &str) {
        if self.hanging.load(Ordering::SeqCst) {
            log!("{source} ignored (hang)");
        } else {
            log!("{source}: interrupting");
            self.interrupts.send_modify(|n| *n += 1);
        }
    }

    /// Encode with the configured quirks; `raw_content` replaces the content frame verbatim.
    fn frames(&self, msg: &Message, raw_content: Option<&[u8]>) -> Vec<Bytes> {
        let mut f = wire::encode(msg, &self.signer);
        let h = msg.identities.len() + 2; // index of the header frame
        let mut patched = false;
        if self.cfg.null_parents {
            if msg.parent_header.is_none() {
                f[h + 1] = Bytes::from_static(b"null");
            }
            f[h + 2] = Bytes::from_static(b"null");
            patched = true;
        }
        if let Some(c) = raw_content {
            f[h + 3] = Bytes::copy_from_slice(c);
            patched = true;
        }
        if patched {
            let sig = self.signer.sign([&f[h], &f[h + 1], &f[h + 2], &f[h + 3]]);
            f[h - 1] = Bytes::from(sig);
        }
        f
    }

    /// Publish on iopub, parented to `parent` (or unparented).
    async fn publish_raw(
        &self,
        parent: Option<&Message>,
        msg_type: &str,
        content: Value,
        raw: Option<&[u8]>,
    ) {
        let mut msg = match parent {
            Some(p) => Message::reply_to(&p.header, msg_type, content, &self.session),
            None => Message::new(msg_type, content, &self.session),
        };
        msg.identities = vec![Bytes::from(format!("kernel.fake.{msg_type}"))];
        let frames = self.frames(&msg, raw);
        if let Ok(z) = ZmqMessage::try_from(frames)
            && let Err(e) = self.iopub.lock().await.send(z).await
        {
            log!("iopub send failed: {e}");
        }
    }

    async fn publish(&self, parent: &Message, msg_type: &str, content: Value) {
        self.publish_raw(Some(parent), msg_type, content, None)
            .await;
    }

    async fn status(&self, parent: &Message, state: &str) {
        self.publish(parent, "status", json!({"execution_state": state}))
            .await;
    }

    async fn stream(&self, parent: &Message, name: &str, text: &str) {
        self.publish(parent, "stream", json!({"name": name, "text": text}))
            .await;
    }

    /// Send `msg_type` answering `req` to the peer that sent it, on `route`.
    async fn reply(&self, route: Route, req: &Message, msg_type: &str, content: Value) {
        let mut msg = Message::reply_to(&req.header, msg_type, content, &self.session);
        msg.identities = req.identities.clone();
        let mut socket = match route {
            Route::Shell => self.shell.clone(),
            Route::Control => self.control.clone(),
            Route::Stdin => self.stdin.clone(),
        };
        if let Ok(z) = ZmqMessage::try_from(self.frames(&msg, None))
            && let Err(e) = socket.send(z).await
        {
            log!("{msg_type} not sent: {e}");
        }
    }

    fn kernel_info(&self) -> Value {
        json!({
            "status": "ok",
            "protocol_version": "5.3",
            "implementation": "fake-kernel",
            "implementation_version": env!("CARGO_PKG_VERSION"),
            "language_info": {"name": "fake", "version": "1.0", "mimetype": "text/plain", "file_extension": ".fake"},
            "banner": "fake-kernel: a fault-injecting test kernel",
            "help_links": [],
        })
    }

    async fn handle_control(&self, req: Message) {
        match req.msg_type() {
            "kernel_info_request" => {
                self.reply(
                    Route::Control,
                    &req,
                    "kernel_info_reply",
                    self.kernel_info(),
                )
                .await
            }
            "interrupt_request" => {
                self.reply(
                    Route::Control,
                    &req,
                    "interrupt_reply",
                    json!({"status": "ok"}),
                )
                .await;
                self.interrupt("interrupt_request");
            }
            "shutdown_request" if self.cfg.no_shutdown_reply => {
                log!("FAKE_KERNEL_NO_SHUTDOWN_REPLY: ignoring shutdown_request")
            }
            "shutdown_request" => {
                let restart = req.content["restart"].as_bool().unwrap_or(false);
                self.reply(
                    Route::Control,
                    &req,
                    "shutdown_reply",
                    json!({"status": "ok", "restart": restart}),
                )
                .await;
                log!("shutdown_request: exiting");
                tokio::time::sleep(Duration::from_millis(100)).await;
                std::process::exit(0);
            }
            other => log!("control: ignoring {other}"),
        }
    }

    async fn handle_shell(&self, req: Message, input: &mut mpsc::UnboundedReceiver<Message>) {
        if req.msg_type() == "execute_request" {
            return self.execute(req, input).await;
        }
        let code = req.content["code"].as_str().unwrap_or("");
        let reply = match req.msg_type() {
            "kernel_info_request" => Some(("kernel_info_reply", self.kernel_info())),
            "is_complete_request" => {
                let status = match &self.cfg.is_complete {
                    Some(s) => s.clone(),
                    None if code.trim_end().ends_with('\\') => "incomplete".into(),
                    None => "complete".into(),
                };
                let mut c = json!({"status": status});
                if status == "incomplete" {
                    c["indent"] = json!("  ");
                }
                Some(("is_complete_reply", c))
            }
            other => {
                log!("shell: no reply for {other}");
                None
            }
        };
        self.status(&req, "busy").await;
        if let Some((msg_type, content)) = reply {
            self.reply(Route::Shell, &req, msg_type, content).await;
        }
        self.status(&req, "idle").await;
    }
}
