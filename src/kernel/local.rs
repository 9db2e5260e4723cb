//! A local kernel ([`Kernel`]): its process and sockets, started from a kernelspec and shut
//! down by the ladder.
//!
//! [`Kernel::start`] writes the connection file, spawns the kernel, connects the sockets and
//! waits until the kernel is ready: a `kernel_info_reply` **and** an iopub message parented to a
//! `kernel_info_request` (or an `iopub_welcome`), retrying the request about once a second
//! (jupyter_client `wait_for_ready`). Every wait races the child's exit and a deadline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::channels::Channels;
use super::connection::{self, ConnectionInfo};
use super::process::{self, KernelProcess};
use super::ready::{FileGuard, exit_of, until_exit, wait_ready};
use super::sandbox::{self, Sandbox, SandboxUnavailable};
use super::spec::KernelSpec;
use super::types::{Channel, KernelEvent};
use super::types::{ExitCause, ExitInfo};
use super::types::{HookLaunch, LaunchOptions, ShutdownRung, StartError};
use super::{adopted, advice, argv};

/// Launches whose kernel exits during start with a port clash, or whose sockets cannot be
/// connected, are retried this many times, with new ports.
const PORT_CLASH_RETRIES: usize = 3;

/// How a kernel is started under `kernel-mcp supervise`.
struct Supervised<'a> {
    opts: &'a LaunchOptions,
    connection_file: &'a std::path::Path,
    limit_file: Option<&'a std::path::Path>,
    /// It inherits a descriptor from the launch hook.
    inherit: bool,
}

impl Supervised<'_> {
    /// `argv` wrapped in the supervisor's command line (`sup supervise … -- argv`).
    fn argv(&self, sup: &std::path::Path, mut argv: Vec<String>) -> Vec<String> {
        let opts = self.opts;
        let mut wrapped = vec![
            sup.display().to_string(),
            "supervise".into(),
            "--max-memory-mib".into(),
            opts.max_memory_mib.to_string(),
            "--report-fd".into(),
            process::REPORT_FD.to_string(),
            "--sandbox".into(),
            opts.sandbox.policy.as_str().into(),
            "--connection-file".into(),
            self.connection_file.display().to_string(),
        ];
        if let Some(f) = self.limit_file {
            wrapped.push("--limit-file".into());
            wrapped.push(f.display().to_string());
        }
        if opts.sandbox.network {
            wrapped.push("--sandbox-network".into());
        }
        if opts.sandbox.restricts()
            && let Ok(json) = serde_json::to_string(&*opts.protected)
        {
            wrapped.push("--protected".into());
            wrapped.push(json);
        }
        if self.inherit {
            wrapped.push("--inherit-fd".into());
            wrapped.push(process::INHERITED_FD.to_string());
        }
        wrapped.push("--".into());
        wrapped.append(&mut argv);
        wrapped
    }
}

/// Why a kernel that closed its sockets while alive was stopped (ends its output tail).
pub(super) const CLOSED_SOCKETS_NOTE: &str = "kernel-mcp: the kernel closed its sockets while its process was still running; it could no longer be reached, so kernel-mcp stopped it.";

/// A live kernel: its process, its sockets and the event stream of both.
pub struct Kernel {
    pub spec: KernelSpec,
    /// `kernel_info_reply` content (implementation, language_info, protocol_version, banner…).
    pub info: Value,
    pub(super) process: KernelProcess,
    pub(super) channels: Channels,
    pub(super) events: mpsc::UnboundedReceiver<KernelEvent>,
    /// False once every socket reader has ended (the channel is closed).
    pub(super) events_open: bool,
    /// True once [`KernelEvent::Exited`] was handed out.
    pub(super) exit_reported: bool,
    pub(super) exit: tokio::sync::watch::Receiver<Option<ExitInfo>>,
    pub(super) connection_file: PathBuf,
    /// Where the supervisor reads a new memory limit (see [`Kernel::set_memory_limit`]);
    /// `None` when the kernel runs unsupervised.
    pub(super) limit_file: Option<PathBuf>,
    /// The connection file's own directory (a sandboxed kernel's), removed with it.
    pub(super) connection_dir: Option<PathBuf>,
    /// The sandbox it runs in.
    pub(super) sandbox: Sandbox,
    /// Set by the heartbeat task while the kernel misses beats (liveness is the child's exit).
    pub(super) unresponsive: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(super) heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Kernel {
    /// Launch `spec` and wait until it is ready (see the module docs).
    /// Errors: [`StartError`] with the exit status and output tail when the kernel dies during start.
    pub async fn start(spec: &KernelSpec, opts: &LaunchOptions) -> Result<Kernel, StartError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(spec, opts).await {
                Err(StartError::Exited {
                    ref output_tail, ..
                }) if attempt <= PORT_CLASH_RETRIES
                    && output_tail.contains("Address already in use") =>
                {
                    tracing::info!(kernel = %spec.name, "port clash at start-up; retrying with new ports");
                }
                // Under heavy connection churn a port can be taken between allocation and
                // bind, or a connect can land on a socket that is not the kernel's (even a TCP
                // self-connect on a port no one listens on yet): a new set of ports fixes it.
                Err(StartError::Connect { ref source, .. }) if attempt <= PORT_CLASH_RETRIES => {
                    tracing::info!(kernel = %spec.name, %source, "could not connect at start-up; retrying with new ports");
                }
                other => return other,
            }
        }
    }

    /// One launch: check, write the connection file, spawn, then wait until ready.
    async fn start_once(spec: &KernelSpec, opts: &LaunchOptions) -> Result<Kernel, StartError> {
        preflight(spec, opts)?;
        let files = ConnectionFiles::new(spec, opts)?;
        let (argv, kernel_program) = kernel_command(spec, opts, &files.connection_file)?;
        let (env, inherit) = environment(spec, opts, &files);
        // Only a supervisor hands a descriptor on to its kernel.
        let inherit = inherit.filter(|_| opts.supervisor.is_some());
        let argv = match &opts.supervisor {
            Some(sup) => Supervised {
                opts,
                connection_file: &files.connection_file,
                limit_file: files.limit_file.as_deref(),
                inherit: inherit.is_some(),
            }
            .argv(sup, argv),
            None => argv,
        };
        // Written last, right before the spawn: a server killed in between leaves the file
        // behind (the supervisor removes it once it runs), so the window is kept short.
        let connection_file = &files.connection_file;
        files.info.write(connection_file).map_err(|e| {
            launch_error(spec, format!("writing {}: {e}", connection_file.display()))
        })?;
        let process =
            KernelProcess::spawn(&argv, &env, &opts.cwd, opts.supervisor.is_some(), inherit)
                .map_err(|e| {
                    let detail = format!("{}: {e}", argv.join(" "));
                    if e.kind() == std::io::ErrorKind::NotFound {
                        program_missing(spec, detail)
                    } else {
                        launch_error(spec, detail)
                    }
                })?;
        tracing::info!(kernel = %spec.name, pid = process.pid(), "kernel process started");

        let deadline = Instant::now() + opts.startup_timeout;
        let exited = |process: &KernelProcess| exited_error(spec, opts, &kernel_program, process);
        let timed_out = |process: &KernelProcess| StartError::Timeout {
            kernel: spec.name.clone(),
            timeout_s: opts.startup_timeout.as_secs_f64(),
            output_tail: process.output_tail(),
        };
        connect_ready(
            Launched {
                spec,
                info: files.info,
                process,
                sandbox: opts.sandbox,
                connection_file: files.guard,
                limit_file: files.limit_file,
            },
            deadline,
            Failed {
                exited,
                timed_out,
                closed_sockets: "the kernel closed its sockets but its process lives on; stopping it",
            },
        )
        .await
    }

    /// See [`wait_ready`].
    pub(super) async fn wait_ready(&mut self) -> Value {
        wait_ready(&mut self.channels, &mut self.events).await
    }

    /// The kernel's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Change the memory limit (MiB, 0 = none) the kernel's supervisor enforces: the limit
    /// file is replaced, the supervisor told to read it (SIGUSR1), and this returns once the
    /// supervisor has removed the file (the limit is in force), within `ack` at most.
    /// Errors: the kernel runs unsupervised, the file could not be written, or no
    /// acknowledgement within `ack` (`TimedOut`).
    pub async fn set_memory_limit(&self, mib: u64, ack: Duration) -> std::io::Result<()> {
        self.request_memory_limit(mib)?;
        let file = self.limit_file.as_deref().unwrap_or(Path::new("/"));
        let deadline = Instant::now() + ack;
        while file.exists() {
            if Instant::now() >= deadline {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the kernel's supervisor did not apply the limit within {ack:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }

    /// The first half of [`Kernel::set_memory_limit`]: write the file and signal.
    fn request_memory_limit(&self, mib: u64) -> std::io::Result<()> {
        let Some(file) = &self.limit_file else {
            return Err(std::io::Error::other(
                "the kernel runs without a supervisor",
            ));
        };
        let tmp = file.with_extension("limit.new");
        std::fs::write(&tmp, format!("{mib}\n"))?;
        std::fs::rename(&tmp, file)?;
        self.process.signal_leader(Signal::SIGUSR1);
        Ok(())
    }

    /// The kernel's exit, once it has exited.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        self.process.exit_info()
    }

    /// The next socket message, or the exit once the process is gone and the messages it
    /// sent before are delivered (see [`super::KernelIo::next_event`]).
    pub(super) async fn next_event_inner(&mut self) -> KernelEvent {
        loop {
            if self.exit_reported {
                return std::future::pending().await;
            }
            tokio::select! {
                // Messages first: what the kernel sent before it died belongs to its runs.
                biased;
                ev = self.events.recv(), if self.events_open => match ev {
                    Some(ev) => return ev,
                    None => self.events_open = false,
                },
                info = exit_of(&mut self.exit) => {
                    self.exit_reported = true;
                    return KernelEvent::Exited(info);
                }
            }
        }
    }

    /// The shutdown ladder: `shutdown_request` on control → `grace` → SIGTERM to the group →
    /// `grace` → SIGKILL to the group and every remaining descendant. Returns the rung reached.
    pub async fn shutdown(mut self, grace: Duration) -> ShutdownRung {
        let rung = if self.exit_info().is_some() {
            ShutdownRung::Graceful
        } else {
            let msg = self
                .channels
                .request("shutdown_request", json!({"restart": false}));
            // A stopped or wedged kernel must not hold the ladder up.
            let _ = tokio::time::timeout(grace, self.channels.send(Channel::Control, &msg)).await;
            if self.process.wait_exit(grace).await.is_some() {
                ShutdownRung::Graceful
            } else {
                self.process.signal(Signal::SIGTERM);
                // A stopped kernel (SIGSTOP, a debugger) acts on SIGTERM only once continued.
                self.process.signal(Signal::SIGCONT);
                if self.process.wait_exit(grace).await.is_some() {
                    ShutdownRung::Terminated
                } else {
                    ShutdownRung::Killed
                }
            }
        };
        // Subprocesses the kernel started (same group or not) go too.
        self.process.kill_all();
        let _ = self.process.wait_exit(Duration::from_secs(2)).await;
        tracing::info!(kernel = %self.spec.name, pid = self.pid(), ?rung, "kernel shut down");
        rung
    }
}

/// A [`StartError::Launch`] of `spec` saying `detail`.
fn launch_error(spec: &KernelSpec, detail: String) -> StartError {
    StartError::Launch {
        kernel: spec.name.clone(),
        detail,
    }
}

/// A [`StartError::Launch`] for a program that cannot be found: `detail`, then the fix.
fn program_missing(spec: &KernelSpec, detail: String) -> StartError {
    let program = spec.argv.first().map(String::as_str).unwrap_or_default();
    let file =
        (!spec.resource_dir.as_os_str().is_empty()).then(|| spec.resource_dir.join("kernel.json"));
    let fix = advice::missing_program(program, file.as_deref(), argv::is_python_name(program));
    launch_error(spec, format!("{detail}\n\n{fix}"))
}

/// What can be checked before anything is written: the working directory, and that the
/// sandbox asked for can be applied here.
fn preflight(spec: &KernelSpec, opts: &LaunchOptions) -> Result<(), StartError> {
    // Checked first: a spawn in a missing directory fails as if the program were missing.
    if !opts.cwd.is_dir() {
        return Err(launch_error(
            spec,
            format!(
                "the working directory {} does not exist (any more) or is not a directory. Create it again, or destroy the session and create one with a cwd that exists.",
                opts.cwd.display()
            ),
        ));
    }
    if !opts.sandbox.restricts() {
        return Ok(());
    }
    let unavailable = |missing: Vec<String>| StartError::SandboxUnavailable {
        kernel: spec.name.clone(),
        reason: SandboxUnavailable {
            sandbox: opts.sandbox,
            missing,
        },
    };
    if opts.supervisor.is_none() {
        return Err(unavailable(vec![
            "the kernel-mcp binary that supervises kernels was not found, and only it applies a sandbox".into(),
        ]));
    }
    sandbox::HostSupport::current()
        .check(opts.sandbox)
        .map_err(|e| unavailable(e.missing))
}

/// A launch's connection info and the files it goes with.
struct ConnectionFiles {
    info: ConnectionInfo,
    connection_file: PathBuf,
    /// A sandboxed kernel's private directory (its connection file's).
    private_dir: Option<PathBuf>,
    /// Removes the connection file (and a sandboxed kernel's directory) unless kept.
    guard: FileGuard,
    /// Where the supervisor reads a new memory limit, for a supervised kernel not sandboxed.
    limit_file: Option<PathBuf>,
}

impl ConnectionFiles {
    /// Ports and key for a new kernel of `spec`, and where its files go: the runtime
    /// directory, or for a sandboxed kernel a private directory of its own in it.
    fn new(spec: &KernelSpec, opts: &LaunchOptions) -> Result<ConnectionFiles, StartError> {
        let sandboxed = opts.sandbox.restricts();
        let info =
            ConnectionInfo::allocate(&spec.name).map_err(|e| launch_error(spec, e.to_string()))?;
        let mut dir = connection::runtime_dir().map_err(|e| launch_error(spec, e.to_string()))?;
        let uuid = uuid::Uuid::new_v4();
        if sandboxed {
            // A directory of its own, which the kernel reads but cannot write (its key, its
            // broker endpoint, its copy of the helper): the other kernels' keys are not next
            // to it.
            dir = dir.join(format!("{}{uuid}", connection::SANDBOX_DIR_PREFIX));
            connection::private_dir(&dir)
                .map_err(|e| launch_error(spec, format!("creating {}: {e}", dir.display())))?;
        }
        let connection_file = dir.join(connection::connection_file_name(uuid));
        let guard = FileGuard {
            file: Some(connection_file.clone()),
            dir: sandboxed.then(|| dir.clone()),
        };
        // Not for a sandboxed kernel: it may write its connection file's directory (and it
        // never comes from the pool, the only reason to change a limit).
        let limit_file = (opts.supervisor.is_some() && !sandboxed)
            .then(|| connection_file.with_extension(connection::LIMIT_EXTENSION));
        Ok(ConnectionFiles {
            info,
            connection_file,
            private_dir: sandboxed.then_some(dir),
            guard,
            limit_file,
        })
    }
}

/// The kernel's own command line (before any supervisor), and its program (`argv[0]`, for
/// error advice). Errors: the program cannot be found (checked here when a supervisor will
/// exec it, to say the fix).
fn kernel_command(
    spec: &KernelSpec,
    opts: &LaunchOptions,
    connection_file: &Path,
) -> Result<(Vec<String>, String), StartError> {
    let mut argv = argv::build_argv(spec, connection_file, opts.env_prefix.as_deref())
        .map_err(|e| program_missing(spec, e.to_string()))?;
    argv::keep_ipython_history_in_memory(&mut argv);
    let kernel_program = argv.first().cloned().unwrap_or_default();
    if opts.supervisor.is_some()
        && let Err(e) = which::which(&kernel_program)
    {
        return Err(program_missing(spec, format!("{kernel_program}: {e}")));
    }
    Ok((argv, kernel_program))
}

/// The kernel's environment: the kernelspec's `env` expanded (`${KERNEL_MCP_TOKEN}` to nothing:
/// secrets never reach a kernel), then the session's, then the launch hook's; and the
/// descriptor the hook gives the kernel to inherit, if any.
fn environment(
    spec: &KernelSpec,
    opts: &LaunchOptions,
    files: &ConnectionFiles,
) -> (BTreeMap<String, String>, Option<std::os::fd::OwnedFd>) {
    let lookup = crate::secrets::env_lookup;
    let mut env: BTreeMap<String, String> = argv::expand_env(spec, &lookup).into_iter().collect();
    env.extend(opts.env.clone());
    let inherit = opts.env_hook.as_ref().and_then(|hook| {
        let launch = HookLaunch {
            spec,
            connection_file: &files.connection_file,
            private_dir: files.private_dir.as_deref(),
        };
        hook.apply(&launch, &mut env)
    });
    (env, inherit)
}

/// Why a kernel that exited during start-up did: its exit and output, with the fix for a
/// Python without ipykernel; or the sandbox its supervisor refused to apply.
fn exited_error(
    spec: &KernelSpec,
    opts: &LaunchOptions,
    kernel_program: &str,
    process: &KernelProcess,
) -> StartError {
    let output_tail = process.output_tail();
    // The first call of most new users ends here: a `python3` without ipykernel.
    let hint = if advice::is_missing_ipykernel(&output_tail) {
        let interpreter = Path::new(if kernel_program.is_empty() {
            "python3"
        } else {
            kernel_program
        });
        let has_uv = which::which("uv").is_ok();
        format!("\n\n{}", advice::missing_ipykernel(interpreter, has_uv))
    } else {
        String::new()
    };
    let exit = process.exit_info().unwrap_or(ExitInfo::unknown());
    if exit.cause == ExitCause::SandboxRefused {
        return StartError::SandboxUnavailable {
            kernel: spec.name.clone(),
            reason: SandboxUnavailable {
                sandbox: opts.sandbox,
                missing: process.report().refused.unwrap_or_default(),
            },
        };
    }
    StartError::Exited {
        kernel: spec.name.clone(),
        exit,
        output_tail,
        hint,
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // The process kills its tree on drop; the connection file goes here.
        let _ = std::fs::remove_file(&self.connection_file);
        if let Some(f) = &self.limit_file {
            let _ = std::fs::remove_file(f);
        }
        if let Some(dir) = &self.connection_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(h) = &self.heartbeat {
            h.abort();
        }
    }
}

/// A kernel process just started (spawned from its kernelspec, or forked), with what its
/// start made for it.
pub(super) struct Launched<'a> {
    pub spec: &'a KernelSpec,
    pub info: ConnectionInfo,
    pub process: KernelProcess,
    pub sandbox: Sandbox,
    /// Removed (with its directory) unless the kernel becomes ready.
    pub connection_file: FileGuard,
    pub limit_file: Option<PathBuf>,
}

/// How a start that did not become ready is told (each start words its errors its own way).
pub(super) struct Failed<E, T> {
    pub exited: E,
    pub timed_out: T,
    /// Logged when the ready kernel later closes its sockets but lives on (it is stopped).
    pub closed_sockets: &'static str,
}

/// Connect to a started kernel's sockets and wait until it is ready, each step racing the
/// process's exit and `deadline`; then a heartbeat watches it. Errors:
/// [`StartError::Connect`], else as `failed` words them.
pub(super) async fn connect_ready<E, T>(
    launched: Launched<'_>,
    deadline: Instant,
    failed: Failed<E, T>,
) -> Result<Kernel, StartError>
where
    E: Fn(&KernelProcess) -> StartError,
    T: Fn(&KernelProcess) -> StartError,
{
    let Launched {
        spec,
        info,
        process,
        sandbox,
        connection_file,
        limit_file,
    } = launched;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut exit = process.exit_watch();
    let channels = tokio::select! {
        r = Channels::connect(&info, tx) => r.map_err(|source| StartError::Connect { kernel: spec.name.clone(), source })?,
        _ = until_exit(&mut exit) => return Err((failed.exited)(&process)),
        _ = tokio::time::sleep_until(deadline) => return Err((failed.timed_out)(&process)),
    };
    let mut kernel = Kernel {
        spec: spec.clone(),
        info: Value::Null,
        exit: process.exit_watch(),
        process,
        channels,
        events: rx,
        events_open: true,
        exit_reported: false,
        sandbox,
        connection_dir: connection_file.dir.clone(),
        connection_file: connection_file.keep(),
        limit_file,
        unresponsive: Default::default(),
        heartbeat: None,
    };
    tokio::select! {
        r = kernel.wait_ready() => {
            kernel.info = r;
            let stop = kernel.process.stopper(CLOSED_SOCKETS_NOTE);
            let closed = failed.closed_sockets;
            kernel.heartbeat = Some(tokio::spawn(adopted::heartbeat(
                info,
                kernel.unresponsive.clone(),
                Some(Box::new(move || {
                    tracing::warn!("{closed}");
                    stop();
                })),
            )));
            Ok(kernel)
        }
        _ = until_exit(&mut exit) => Err((failed.exited)(&kernel.process)),
        _ = tokio::time::sleep_until(deadline) => Err((failed.timed_out)(&kernel.process)),
    }
}
