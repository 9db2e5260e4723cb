//! The raw reference client: the same kernelspec driven with `zeromq` and the crate's `wire/`
//! only (no session, registry or MCP layer). `bench --raw-reference …` runs this in a child
//! process (so its peak RSS is its own) and prints one JSON object on stdout with the same
//! fields as bench/jupyter_client_ref.py.
//!
//! Launch: the kernelspec is found like the server finds it and started directly (no
//! supervisor); readiness is `kernel_info_reply` plus an iopub message parented to a
//! `kernel_info_request` (or `iopub_welcome`), retrying the request every second. "Done" for
//! an execute is `execute_reply` plus iopub `status: idle` parented to it, as on the other sides.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kernel_mcp::kernel::ConnectionInfo;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::wire::{self, Message, Signer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use zeromq::{
    DealerSendHalf, DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, SubSocket,
};

use crate::stats::{cpu_ms_self, summary};
use crate::{FLOOD_CODE, Res};

/// One kernel process and its shell + iopub sockets.
pub struct RawKernel {
    child: tokio::process::Child,
    shell: DealerSendHalf,
    shell_rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
    iopub_rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
    signer: Signer,
    session: String,
    file: PathBuf,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

/// The options kernel-mcp adds to the kernelspec's command line for `kernel` (for the
/// jupyter_client reference's `extra_arguments`, so every side runs the same kernel).
pub fn kernel_mcp_extra_args(kernel: &str) -> Res<Vec<String>> {
    let spec = find_spec(kernel)?;
    let mut argv = spec.argv.clone();
    let before = argv.len();
    kernel_mcp::kernel::keep_ipython_history_in_memory(&mut argv);
    Ok(argv.split_off(before))
}

pub(crate) fn find_spec(kernel: &str) -> Res<kernel_mcp::kernel::KernelSpec> {
    let venv = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from);
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernelspecs");
    let search = KernelSearch::new(&[], venv.as_deref(), Some(&project));
    Ok(search.find(kernel).map_err(|e| e.to_string())?)
}

/// Forward every multipart from `socket` (undecoded) until it closes.
async fn drain<S: SocketRecv + Send + 'static>(
    mut socket: S,
    tx: mpsc::UnboundedSender<Vec<Bytes>>,
) {
    while let Ok(m) = socket.recv().await {
        if tx.send(m.into_vec()).is_err() {
            return;
        }
    }
}

impl RawKernel {
    /// Spawn the kernel, connect, and wait until it is ready.
    pub async fn start(kernel: &str) -> Res<RawKernel> {
        let spec = find_spec(kernel)?;
        let info = ConnectionInfo::allocate(kernel)?;
        let file = std::env::temp_dir().join(format!("raw-bench-{}.json", uuid::Uuid::new_v4()));
        info.write(&file)?;
        let venv = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from);
        let mut argv = kernel_mcp::kernel::build_argv(&spec, &file, venv.as_deref())?;
        // The kernel command kernel-mcp runs, so the rows compare clients, not kernel options.
        kernel_mcp::kernel::keep_ipython_history_in_memory(&mut argv);
        let lookup = |k: &str| std::env::var(k).ok();
        let env = kernel_mcp::kernel::expand_env(&spec, &lookup);
        let child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;

        let signer = Signer::new(info.key.as_bytes());
        let session = uuid::Uuid::new_v4().to_string();
        let mut iopub = SubSocket::new();
        iopub.subscribe("").await?;
        iopub.connect(&info.endpoint(info.iopub_port)).await?;
        let mut opts = SocketOptions::default();
        opts.peer_identity(zeromq::util::PeerIdentity::try_from(
            session.as_bytes().to_vec(),
        )?);
        let mut shell = DealerSocket::with_options(opts);
        shell.connect(&info.endpoint(info.shell_port)).await?;
        let (shell_tx, shell_rx_sock) = shell.split();
        let (stx, shell_rx) = mpsc::unbounded_channel();
        let (itx, iopub_rx) = mpsc::unbounded_channel();
        let readers = vec![
            tokio::spawn(drain(shell_rx_sock, stx)),
            tokio::spawn(drain(iopub, itx)),
        ];
        let mut k = RawKernel {
            child,
            shell: shell_tx,
            shell_rx,
            iopub_rx,
            signer,
            session,
            file,
            readers,
        };
        tokio::time::timeout(Duration::from_secs(60), k.wait_ready())
            .await
            .map_err(|_| "raw kernel not ready in 60 s")??;
        Ok(k)
    }

    async fn send_shell(&mut self, msg_type: &str, content: Value) -> Res<String> {
        let msg = Message::new(msg_type, content, &self.session);
        let frames = wire::encode(&msg, &self.signer);
        let zmsg = zeromq::ZmqMessage::try_from(frames).map_err(|_| "empty message")?;
        self.shell.send(zmsg).await?;
        Ok(msg.header.msg_id)
    }

    async fn wait_ready(&mut self) -> Res<()> {
        let mut sent = std::collections::HashSet::new();
        let (mut reply, mut iopub_ok) = (false, false);
        loop {
            if !reply {
                sent.insert(self.send_shell("kernel_info_request", json!({})).await?);
            }
            let round = tokio::time::Instant::now() + Duration::from_secs(1);
            loop {
                let (frames, from_shell) = tokio::select! {
                    f = self.shell_rx.recv() => (f.ok_or("shell closed")?, true),
                    f = self.iopub_rx.recv() => (f.ok_or("iopub closed")?, false),
                    _ = tokio::time::sleep_until(round) => break,
                };
                let Ok(msg) = wire::decode(frames, &self.signer) else {
                    continue;
                };
                let ours = msg.parent_msg_id().is_some_and(|p| sent.contains(p));
                if from_shell && ours && msg.msg_type() == "kernel_info_reply" {
                    reply = true;
                } else if !from_shell && (ours || msg.msg_type() == "iopub_welcome") {
                    iopub_ok = true;
                }
                if reply && iopub_ok {
                    return Ok(());
                }
            }
            if reply && !iopub_ok {
                reply = false;
            }
        }
    }

    /// Execute `code`; returns the execute_reply status, the stream texts kept in `keep`.
    pub async fn execute(&mut self, code: &str, keep: &mut Vec<String>) -> Res<String> {
        self.execute_with(code, &mut |s| keep.push(s)).await
    }

    /// Execute `code`, handing each stream text to `on_text`; returns the reply's status.
    async fn execute_with(
        &mut self,
        code: &str,
        on_text: &mut (dyn FnMut(String) + Send),
    ) -> Res<String> {
        let id = self
            .send_shell(
                "execute_request",
                json!({"code": code, "silent": false, "store_history": true,
                       "user_expressions": {}, "allow_stdin": false, "stop_on_error": true}),
            )
            .await?;
        let (mut status, mut idle) = (None::<String>, false);
        while status.is_none() || !idle {
            let (frames, from_shell) = tokio::select! {
                f = self.shell_rx.recv() => (f.ok_or("shell closed")?, true),
                f = self.iopub_rx.recv() => (f.ok_or("iopub closed")?, false),
            };
            let mut msg = wire::decode(frames, &self.signer)?;
            if msg.parent_msg_id() != Some(id.as_str()) {
                continue;
            }
            if from_shell && msg.msg_type() == "execute_reply" {
                status = Some(msg.content["status"].as_str().unwrap_or("?").to_owned());
            } else if !from_shell {
                match msg.msg_type() {
                    "status" if msg.content["execution_state"] == "idle" => idle = true,
                    "stream" => {
                        // The message's own text, not a copy, where it was parsed (a large
                        // one is left in its frame and comes in pieces).
                        if msg.raw_text.is_some() {
                            msg.stream_text(|t| on_text(t.to_string()));
                        } else if let Some(Value::String(s)) =
                            msg.content.get_mut("text").map(Value::take)
                        {
                            on_text(s);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(status.unwrap_or_default())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `shutdown_request` is a control message; a raw client just kills (it is not measured).
    pub async fn stop(mut self) {
        for r in &self.readers {
            r.abort();
        }
        let _ = self.child.kill().await;
        let _ = std::fs::remove_file(&self.file);
    }
}

/// `bench --raw-reference`: start/execute/flood/concurrent figures as JSON on stdout.
pub async fn main(o: &crate::Opts) -> Res<()> {
    let mut start_ms = Vec::new();
    let mut kernel = None;
    for _ in 0..o.starts {
        let t0 = Instant::now();
        let k = RawKernel::start(&o.kernel).await?;
        start_ms.push(crate::stats::ms(t0));
        if let Some(old) = kernel.replace(k) {
            old.stop().await;
        }
    }
    let mut k = kernel.ok_or("no kernel")?;
    let mut sink = Vec::new();
    for _ in 0..o.warmup {
        k.execute("1+1", &mut sink).await?;
    }
    let mut exec_ms = Vec::with_capacity(o.n);
    for _ in 0..o.n {
        let t0 = Instant::now();
        let st = k.execute("1+1", &mut sink).await?;
        if st != "ok" {
            return Err(format!("raw execute 1+1: status {st}").into());
        }
        exec_ms.push(crate::stats::ms(t0));
    }
    let kernel_rss = k.pid().and_then(crate::stats::vmrss_kib);
    let client_rss = crate::stats::proc_status_kib(std::process::id(), "VmRSS:");
    let t0 = Instant::now();
    let mut chunks = Vec::new();
    k.execute(FLOOD_CODE, &mut chunks).await?;
    let flood_ms = crate::stats::ms(t0);
    let received: usize = chunks.iter().map(String::len).sum();
    let peak = crate::stats::proc_status_kib(std::process::id(), "VmHWM:");
    drop(chunks);
    k.stop().await;

    let concurrent = if o.sessions > 0 {
        Some(concurrent(o).await?)
    } else {
        None
    };
    let out = json!({
        "tool": "raw",
        "start_ms": summary(&start_ms),
        "execute_ms": summary(&exec_ms),
        "client_rss_kib": client_rss,
        "kernel_rss_kib": kernel_rss,
        "flood": {"ms": flood_ms, "bytes_received": received, "client_peak_rss_kib": peak},
        "concurrent": concurrent,
    });
    println!("{out}");
    Ok(())
}

/// `sessions` kernels, each driven by its own task doing `per` executes, all at once.
async fn concurrent(o: &crate::Opts) -> Res<Value> {
    let mut kernels = Vec::new();
    for _ in 0..o.sessions {
        kernels.push(RawKernel::start(&o.kernel).await?);
    }
    let per = o.per;
    let cpu0 = cpu_ms_self();
    let t0 = Instant::now();
    let tasks: Vec<_> = kernels
        .into_iter()
        .map(|mut k| {
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per);
                let mut sink = Vec::new();
                for _ in 0..per {
                    let t = Instant::now();
                    let r = k.execute("1+1", &mut sink).await;
                    if r.is_err() {
                        break;
                    }
                    lat.push(crate::stats::ms(t));
                }
                (k, lat)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut ks = Vec::new();
    for t in tasks {
        let (k, lat) = t.await?;
        all.extend(lat);
        ks.push(k);
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_ms_self() - cpu0;
    let mut summary = crate::stats::concurrent_summary(&all, wall, cpu, o.sessions * per);
    if !o.no_floods {
        summary["floods"] = floods(&mut ks).await?;
    }
    for k in ks {
        k.stop().await;
    }
    Ok(summary)
}

/// Every kernel of `ks` prints 50 MB at once; the text is counted and dropped as it comes.
/// The peak RSS of this process over that (reset first), the time, the bytes received.
async fn floods(ks: &mut Vec<RawKernel>) -> Res<Value> {
    crate::stats::reset_peak_rss(std::process::id());
    let t0 = Instant::now();
    let tasks: Vec<_> = std::mem::take(ks)
        .into_iter()
        .map(|mut k| {
            tokio::spawn(async move {
                let mut bytes = 0usize;
                let r = k.execute_with(FLOOD_CODE, &mut |s| bytes += s.len()).await;
                (k, r.map(|_| bytes))
            })
        })
        .collect();
    let mut received = 0;
    for t in tasks {
        let (k, r) = t.await?;
        received += r?;
        ks.push(k);
    }
    Ok(json!({
        "ms": crate::stats::ms(t0),
        "bytes_received": received,
        "client_peak_rss_kib": crate::stats::proc_status_kib(std::process::id(), "VmHWM:"),
    }))
}
