//! Forking a live local ipykernel (docs/semantics.md, "Forking a session"): the new kernel of
//! `fork_session`, a copy of the source kernel's process (its whole heap, copy-on-write)
//! serving new sockets.
//!
//! The mechanics live in `helper.py` (run inside the source kernel; its module docs say what
//! the child rebuilds and why). This side prepares the fork ([`ForkPlan::prepare`]: a new
//! connection file and a rendezvous Unix socket in the private runtime directory), gives the
//! source its request ([`ForkPlan::request_content`], a silent execute_request), meets the child
//! on the rendezvous ([`ForkPlan::meet`]: its pid from the kernel's SO_PEERCRED, checked to be
//! a child of the source kernel; fresh stdout/stderr pipes, and the report pipe of its
//! supervisor, handed over with SCM_RIGHTS), and
//! makes it a [`Kernel`] like any other ([`ForkedChild::start`]: connect, wait until ready,
//! heartbeat).
//!
//! **Where the fork sits.** Linux has no way to re-parent a process: the fork is a child of
//! the source kernel, inside the source supervisor's tree, and only the death of its parents
//! moves it (to the nearest subreaper, which is that supervisor). So it is adopted, not
//! re-parented: it leaves the source's session and process group at once (`setsid`, in the
//! helper), so the source's interrupts and shutdown signals never reach it, and forks once
//! more: its first process execs `kernel-mcp supervise --adopt-child` (a supervisor of its
//! own: memory limit, cgroup, end of tree, report, see [`super::supervise::adopt`]) and the
//! second is the kernel. This server holds that supervisor through a pidfd (its exit, never a
//! recycled pid) and its report pipe, handed over on the rendezvous with the output pipes; and
//! releases it from the source's supervisor ([`release_from_source`]). A server without a
//! supervisor binary runs its kernels unsupervised, and the fork likewise (no memory limit).
//!
//! **Sandbox.** A fork keeps its source's sandbox: Landlock domains and seccomp filters survive
//! `fork` and cannot be shed, and the helper adds a nested domain scoping the copy's signals.
//! A session under a restricting policy (`workspace`, `read-only`) cannot be forked: its kernel
//! may neither bind the fork's new ports nor reach the rendezvous socket (the registry
//! refuses it, `UNSUPPORTED`). What the broker gives a kernel (its endpoint) is the fork's own.
//!
//! [`ForkedLauncher`] is the fork session's launcher: its first kernel is the fork; a restart or
//! a recovery starts a fresh kernel the way the source's launcher does (the copy is gone then,
//! as any restart loses state).

use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::time::Instant;

use super::connection;
use super::connection::ConnectionInfo;
use super::local::Kernel;
use super::process::KernelProcess;
use super::ready::FileGuard;
use super::sandbox::Sandbox;
use super::spec::KernelSpec;
use super::types::ExitInfo;
use super::types::{KernelEnvHook, StartError};

/// The helper's Python source (`helper.py`), sent into the source kernel.
pub const HELPER: &str = include_str!("helper.py");

/// The module the helper is loaded as in the source kernel.
const HELPER_MODULE: &str = "_kernel_mcp_fork";

/// How long one line on the rendezvous may take.
const LINE_TIMEOUT: Duration = Duration::from_secs(30);

mod launcher;
pub use launcher::ForkedLauncher;

/// What the fork needs before the source is asked: its connection file and the rendezvous.
pub struct ForkPlan {
    info: ConnectionInfo,
    connection_file: FileGuard,
    rendezvous: UnixListener,
    rendezvous_path: FileGuard,
}

/// Why the fork did not come to be.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// This kernel cannot be forked (the helper's reason, or ours).
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Start(#[from] StartError),
}

impl ForkPlan {
    /// A new connection file (fresh ports and key, 0600) and a listening rendezvous socket,
    /// both in the private runtime directory. Errors: [`StartError::Launch`] naming the file.
    pub fn prepare(kernel: &str) -> Result<ForkPlan, StartError> {
        let err = |detail: String| StartError::Launch {
            kernel: kernel.to_string(),
            detail,
        };
        let dir = connection::runtime_dir().map_err(|e| err(e.to_string()))?;
        let info = ConnectionInfo::allocate(kernel).map_err(|e| err(e.to_string()))?;
        let id = uuid::Uuid::new_v4();
        let file = dir.join(connection::connection_file_name(id));
        info.write(&file)
            .map_err(|e| err(format!("writing {}: {e}", file.display())))?;
        let connection_file = FileGuard {
            file: Some(file),
            dir: None,
        };
        // Short: a Unix socket's path is limited to 107 bytes.
        let path = dir.join(format!(
            "kernel-mcp-fork-{}.sock",
            &id.simple().to_string()[..12]
        ));
        let rendezvous =
            UnixListener::bind(&path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        Ok(ForkPlan {
            info,
            connection_file,
            rendezvous,
            rendezvous_path: FileGuard {
                file: Some(path),
                dir: None,
            },
        })
    }

    /// The silent `execute_request` content that loads the helper into the source kernel
    /// (as a module, so the user's namespace gains no name) and schedules the fork; with
    /// `supervisor` (the `kernel-mcp` binary and the fork's memory limit in MiB), the copy
    /// runs under `kernel-mcp supervise --adopt-child`. What `env_hook` gives a kernel of
    /// `spec` on the fork's connection file (the broker's endpoint) replaces the source's in
    /// the copy's environment; `PYTHONPATH` stays the source's. Its `user_expressions.v` is
    /// the helper's answer, hex-encoded JSON: `{"ok": true, "pid"}` or `{"ok": false,
    /// "reason"}` (see [`parse_scheduled`]).
    pub fn request_content(
        &self,
        supervisor: Option<(&Path, u64)>,
        spec: &KernelSpec,
        env_hook: Option<&KernelEnvHook>,
    ) -> Value {
        // A JSON string literal is also a Python string literal.
        let literal = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let code = format!(
            "__import__('sys').modules.setdefault({m}, __import__('types').ModuleType({m})); exec(compile({src}, '<kernel-mcp fork helper>', 'exec'), __import__('sys').modules[{m}].__dict__)",
            m = literal(HELPER_MODULE),
            src = literal(HELPER),
        );
        // A JSON list of strings is also a Python list literal.
        let supervisor = match supervisor {
            Some((binary, max_memory_mib)) => serde_json::to_string(&[
                path_str(binary),
                "supervise".into(),
                "--max-memory-mib".into(),
                max_memory_mib.to_string(),
                "--server-pid".into(),
                std::process::id().to_string(),
                // Only for its files, should the server die first (a fork is not sandboxed
                // again: it keeps its source's sandbox).
                "--connection-file".into(),
                path_str(self.connection_file.path()),
            ])
            .unwrap_or_default(),
            None => "None".into(),
        };
        let mut env = std::collections::BTreeMap::new();
        if let Some(hook) = env_hook {
            let launch = super::types::HookLaunch {
                spec,
                connection_file: self.connection_file.path(),
                private_dir: None,
            };
            // A fork keeps its source's descriptors; it takes none from a launch.
            drop(hook.apply(&launch, &mut env));
        }
        env.remove("PYTHONPATH");
        // A JSON object of strings is also a Python dict literal.
        let env = serde_json::to_string(&env).unwrap_or_else(|_| "{}".into());
        let expr = format!(
            "__import__('json').dumps(__import__('sys').modules[{m}].schedule({cf}, {rdv}, {supervisor}, {env})).encode().hex()",
            m = literal(HELPER_MODULE),
            cf = literal(&path_str(self.connection_file.path())),
            rdv = literal(&path_str(self.rendezvous_path.path())),
        );
        json!({
            "code": code,
            "silent": true,
            "store_history": false,
            "user_expressions": {"v": expr},
            "allow_stdin": false,
            "stop_on_error": false,
        })
    }

    /// Wait (until `deadline`) for the source's child on the rendezvous; a connection from
    /// anything else is ignored. Errors: the parent's report that `fork()` failed, the
    /// deadline.
    pub async fn meet(self, source_pid: u32, deadline: Instant) -> Result<ForkedChild, StartError> {
        let failed = |detail: String| StartError::Launch {
            kernel: self.info.kernel_name.clone(),
            detail,
        };
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.rendezvous.accept()).await;
            let stream = match accepted {
                Err(_) => {
                    return Err(failed(format!(
                        "the source kernel (pid {source_pid}) did not fork within the time limit"
                    )));
                }
                Ok(Err(e)) => return Err(failed(format!("rendezvous: {e}"))),
                Ok(Ok((stream, _))) => stream,
            };
            let Some(pid) = stream.peer_cred().ok().and_then(|c| c.pid()) else {
                continue;
            };
            let pid = pid as u32;
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            let by = deadline.min(Instant::now() + LINE_TIMEOUT);
            let read = tokio::time::timeout_at(by, reader.read_line(&mut line)).await;
            if !matches!(read, Ok(Ok(n)) if n > 0) {
                continue;
            }
            let hello: Value = serde_json::from_str(line.trim()).unwrap_or(Value::Null);
            if pid == source_pid && hello["role"] == "parent" {
                let message = hello["message"].as_str().unwrap_or("the fork failed");
                return Err(failed(format!(
                    "the source kernel could not fork: {message}"
                )));
            }
            if hello["role"] != "child"
                || super::proc_tree::parent_pid(pid as i32) != Some(source_pid as i32)
            {
                tracing::warn!(
                    pid,
                    "ignoring a connection to the fork rendezvous that is not the source kernel's child"
                );
                continue;
            }
            return Ok(ForkedChild {
                pid,
                stream: reader.into_inner(),
                plan: self,
            });
        }
    }
}

/// The fork, met on the rendezvous: it exists (the copy is taken) but serves nothing yet.
pub struct ForkedChild {
    pid: u32,
    stream: tokio::net::UnixStream,
    plan: ForkPlan,
}

impl ForkedChild {
    /// The fork's pid (from the kernel's credentials of its rendezvous connection).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Hand the fork its output pipes (and its supervisor's report pipe), wait for its
    /// sockets, and connect to it as a kernel of `spec` in `sandbox` (its source's), ready by
    /// `deadline`. `supervised`: the fork runs under its own `kernel-mcp supervise` (asked for
    /// in [`ForkPlan::request_content`]), which holds its memory limit.
    /// Errors: [`StartError`] with the fork's output tail; the fork is killed then.
    pub async fn start(
        self,
        spec: &KernelSpec,
        sandbox: Sandbox,
        supervised: bool,
        deadline: Instant,
    ) -> Result<Kernel, StartError> {
        let ForkedChild {
            pid,
            mut stream,
            plan,
        } = self;
        let failed = |detail: String| StartError::Launch {
            kernel: spec.name.clone(),
            detail,
        };
        let exited = pidfd_exit(pid as i32).map_err(|e| failed(e.to_string()))?;
        let (out_r, out_w) = pipe().map_err(|e| failed(format!("pipe: {e}")))?;
        let (err_r, err_w) = pipe().map_err(|e| failed(format!("pipe: {e}")))?;
        let (report_r, report_w) = match supervised {
            true => {
                let (r, w) = pipe().map_err(|e| failed(format!("pipe: {e}")))?;
                (Some(r), Some(w))
            }
            false => (None, None),
        };
        let process =
            KernelProcess::adopted(pid as i32, supervised, exited, out_r, err_r, report_r);
        // From here on, dropping `process` kills the fork and its tree.
        let mut fds = vec![out_w.as_raw_fd(), err_w.as_raw_fd()];
        fds.extend(report_w.as_ref().map(|w| w.as_raw_fd()));
        send_fds(&stream, &fds)
            .await
            .map_err(|e| failed(format!("handing the fork its pipes: {e}")))?;
        drop((out_w, err_w, report_w));
        let mut line = String::new();
        let mut reader = BufReader::new(&mut stream);
        let read = tokio::time::timeout_at(deadline, reader.read_line(&mut line)).await;
        let report: Value = serde_json::from_str(line.trim()).unwrap_or(Value::Null);
        if report["status"] != "ok" {
            let why = match (read, report["message"].as_str()) {
                (_, Some(m)) => m.to_string(),
                (Err(_), None) => "it did not report within the time limit".to_string(),
                (Ok(_), None) => "it ended before reporting".to_string(),
            };
            let _ = process.wait_exit(Duration::from_millis(500)).await;
            return Err(StartError::Exited {
                kernel: spec.name.clone(),
                exit: process.exit_info().unwrap_or(ExitInfo::unknown()),
                output_tail: format!(
                    "{}\nkernel-mcp: the fork could not become a kernel: {why}",
                    process.output_tail()
                ),
                hint: String::new(),
            });
        }
        let _ = stream.shutdown().await;
        tracing::info!(kernel = %spec.name, pid, "forked kernel serves its new sockets");
        let ForkPlan {
            info,
            connection_file,
            ..
        } = plan;
        connect(spec, sandbox, info, process, connection_file, deadline).await
    }
}

/// Connect to the fork's sockets and wait until it is ready (as [`Kernel::start`] does after
/// its spawn); then the heartbeat watches it.
async fn connect(
    spec: &KernelSpec,
    sandbox: Sandbox,
    info: ConnectionInfo,
    process: KernelProcess,
    connection_file: FileGuard,
    deadline: Instant,
) -> Result<Kernel, StartError> {
    let timed_out = |process: &KernelProcess| StartError::Timeout {
        kernel: spec.name.clone(),
        timeout_s: deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64(),
        output_tail: process.output_tail(),
    };
    let exited = |process: &KernelProcess| StartError::Exited {
        kernel: spec.name.clone(),
        exit: process.exit_info().unwrap_or(ExitInfo::unknown()),
        output_tail: process.output_tail(),
        hint: String::new(),
    };
    let launched = super::local::Launched {
        spec,
        info,
        process,
        sandbox,
        connection_file,
        limit_file: None,
    };
    let failed = super::local::Failed {
        exited,
        timed_out,
        closed_sockets: "the forked kernel closed its sockets but lives on; stopping it",
    };
    super::local::connect_ready(launched, deadline, failed).await
}

/// Tell the supervisor of the source kernel `source_pid` (its parent, when that runs this
/// server's binary: a spawned kernel's supervisor, or a fork's) that the fork rooted at
/// `fork_pid` has left its care: it no longer counts the fork's memory nor ends it with its
/// own kernel (see [`super::supervise::adopt::release`]). Best effort: a source without a
/// supervisor has nothing to release.
pub fn release_from_source(source_pid: u32, fork_pid: u32) {
    let Some(supervisor) = super::proc_tree::parent_pid(source_pid as i32) else {
        return;
    };
    let program = super::proc_tree::program(supervisor);
    if program.is_none() || program != std::env::current_exe().ok() {
        return;
    }
    if let Err(e) = super::supervise::adopt::release(supervisor, fork_pid as i32) {
        tracing::warn!(
            supervisor,
            fork_pid,
            "could not release the fork from its source's supervisor: {e}"
        );
    }
}

/// The helper's answer to the scheduling request (`user_expressions.v` of the execute reply):
/// `Ok(source pid)` once the fork is scheduled. Errors: [`ForkError::Unsupported`] with the
/// helper's reason; [`ForkError::Start`] when the reply makes no sense.
pub fn parse_scheduled(reply: &Value, kernel: &str) -> Result<u32, ForkError> {
    let v = &reply["user_expressions"]["v"];
    let garbled = |what: String| {
        ForkError::Start(StartError::Launch {
            kernel: kernel.to_string(),
            detail: format!("the fork helper {what}"),
        })
    };
    if v["status"] != "ok" {
        return Err(garbled(format!(
            "failed in the source kernel: {} {}",
            v["ename"].as_str().unwrap_or_default(),
            v["evalue"].as_str().unwrap_or_default()
        )));
    }
    let text = v["data"]["text/plain"].as_str().unwrap_or_default();
    let answer = hex::decode(text.trim().trim_matches(['\'', '"']))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .ok_or_else(|| garbled(format!("answered {text:.200}")))?;
    if answer["ok"] == true {
        return answer["pid"]
            .as_u64()
            .map(|p| p as u32)
            .ok_or_else(|| garbled("gave no pid".into()));
    }
    Err(ForkError::Unsupported(
        answer["reason"]
            .as_str()
            .unwrap_or("the fork helper refused")
            .to_string(),
    ))
}

/// The exit of `pid` (a process we did not spawn), through a pidfd so a recycled pid is never
/// mistaken for it: the future resolves once it has exited (its status is its parent's to
/// reap). Errors: no pidfd for it (it is gone already, or the kernel is older than 5.3).
fn pidfd_exit(pid: i32) -> std::io::Result<BoxFuture<'static, ()>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open and the same until it is dropped.
    let pidfd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(std::io::Error::from)?;
    Ok(Box::pin(async move {
        // A pidfd is readable once its process has exited.
        let _ = pidfd.readable().await;
        tracing::debug!(pid, "forked kernel ended");
    }))
}

/// A pipe whose read end is async; the write end is for the fork (close-on-exec here).
fn pipe() -> std::io::Result<(tokio::net::unix::pipe::Receiver, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(r)?;
    Ok((receiver, w))
}

/// Send `fds` over `stream` (SCM_RIGHTS) with a one-byte payload.
async fn send_fds(stream: &tokio::net::UnixStream, fds: &[i32]) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, sendmsg};
    loop {
        stream.writable().await?;
        let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
            sendmsg::<UnixAddr>(
                stream.as_raw_fd(),
                &[IoSlice::new(b"f")],
                &[ControlMessage::ScmRights(fds)],
                MsgFlags::empty(),
                None,
            )
            .map_err(std::io::Error::from)
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

impl FileGuard {
    /// The guarded path.
    fn path(&self) -> &Path {
        self.file.as_deref().unwrap_or(Path::new(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helpers_answer_is_its_pid_or_its_reason() {
        let reply = |answer: Value| {
            let hex = hex::encode(answer.to_string());
            json!({"user_expressions": {"v": {"status": "ok", "data": {"text/plain": format!("'{hex}'")}}}})
        };
        assert_eq!(
            parse_scheduled(&reply(json!({"ok": true, "pid": 42})), "python3").ok(),
            Some(42)
        );
        let refused = parse_scheduled(
            &reply(json!({"ok": false, "reason": "ipykernel 6"})),
            "python3",
        );
        assert!(matches!(refused, Err(ForkError::Unsupported(r)) if r == "ipykernel 6"));
        let failed = json!({"user_expressions": {"v": {"status": "error", "ename": "NameError", "evalue": "x"}}});
        assert!(matches!(
            parse_scheduled(&failed, "python3"),
            Err(ForkError::Start(_))
        ));
    }

    #[tokio::test]
    async fn the_request_loads_the_helper_as_a_module_and_names_no_user_variable() {
        let plan = ForkPlan::prepare("python3").expect("plan");
        let spec = KernelSpec {
            name: "python3".into(),
            resource_dir: Default::default(),
            argv: vec![],
            display_name: "Python 3".into(),
            language: "python".into(),
            interrupt_mode: Default::default(),
            env: Default::default(),
            metadata: Value::Null,
        };
        let hook = KernelEnvHook::new(|launch, env| {
            let cf = launch.connection_file;
            env.insert("PYTHONPATH".into(), "/helper".into());
            env.insert(
                "KERNEL_MCP_ENDPOINT".into(),
                cf.with_extension("mcp").display().to_string(),
            );
            None
        });
        let content =
            plan.request_content(Some((Path::new("/bin/kernel-mcp"), 64)), &spec, Some(&hook));
        assert_eq!(content["silent"], true);
        assert_eq!(content["store_history"], false);
        let code = content["code"].as_str().expect("code");
        assert!(
            code.starts_with("__import__('sys').modules.setdefault("),
            "{code:.80}"
        );
        assert!(
            !code.contains("\n_"),
            "no assignment in the user's namespace"
        );
        let expr = content["user_expressions"]["v"].as_str().expect("expr");
        assert!(expr.contains(".schedule("), "{expr}");
        assert!(
            expr.contains(
                r#"["/bin/kernel-mcp", "supervise", "--max-memory-mib", "64", "--server-pid""#
            ) || expr.contains(
                r#"["/bin/kernel-mcp","supervise","--max-memory-mib","64","--server-pid""#
            ),
            "{expr}"
        );
        let endpoint = plan.connection_file.path().with_extension("mcp");
        assert!(
            expr.contains(&format!(
                "{{\"KERNEL_MCP_ENDPOINT\":\"{}\"}}",
                endpoint.display()
            )),
            "the fork's own endpoint, no PYTHONPATH: {expr}"
        );
        assert!(plan.connection_file.path().exists());
        assert!(plan.rendezvous_path.path().exists());
    }
}
