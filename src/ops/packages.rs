//! Installing packages into a Python session's own interpreter: `uv pip install --python <exe>`
//! when `uv` is on PATH, else `<exe> -m pip install`, bounded in time and output. Owns running
//! the installer: both of its pipes are read at once (uv writes everything to stderr, so reading
//! one pipe to its end first lets the other fill up and stalls the installer), only a fixed-size
//! tail of the combined output is kept, and the installer's whole process group is killed when
//! it runs out of time or the caller stops waiting.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{ChildStderr, ChildStdout};
use tokio_util::io::ReaderStream;

use crate::session::SessionError;

/// Longest an install may take.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept from the installer (its tail).
const OUTPUT_TAIL_BYTES: usize = 4000;
/// Bytes asked for per read of a pipe.
const READ_CHUNK: usize = 16 * 1024;
/// How long the pipes may stay open after the installer exits (output still in flight, or a
/// helper process it left behind holding them) before reading stops.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Installer output meaning a package that was already installed, and so may already be
/// imported, was replaced: pip says "Successfully uninstalled foo-1.0", uv "Uninstalled 1 package".
const REPLACED_MARKERS: [&[u8]; 2] = [b"Successfully uninstalled", b"Uninstalled "];

/// What an install did.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct InstallOutcome {
    pub ok: bool,
    /// The command that ran.
    pub command: Vec<String>,
    /// The tail of its combined stdout and stderr.
    pub output: String,
    /// True when an installed package replaced one that may already be imported.
    pub restart_recommended: bool,
    /// Sentences about how the install ran (e.g. inside a remote kernel).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// Reject specifiers that would be read as installer options (e.g. `--index-url`).
pub fn validate(packages: &[String]) -> Result<(), SessionError> {
    if packages.is_empty() {
        return Err(SessionError::InvalidArgument(
            "packages is empty: name at least one package.".into(),
        ));
    }
    if let Some(bad) = packages
        .iter()
        .find(|p| p.trim().is_empty() || p.trim_start().starts_with('-'))
    {
        return Err(SessionError::InvalidArgument(format!(
            "{bad:?} is not a package requirement (options are not accepted)."
        )));
    }
    Ok(())
}

/// Install `packages` for the interpreter `python` with [`installer_command`], for at most
/// [`INSTALL_TIMEOUT`]. Errors: as [`run_installer`].
pub async fn install(python: &Path, packages: &[String]) -> Result<InstallOutcome, SessionError> {
    run_installer(installer_command(python, packages), INSTALL_TIMEOUT).await
}

/// The installer's argv for `packages` and the interpreter `python`: `uv pip install --python
/// <python> <packages...>` when `uv` is on PATH, else `<python> -m pip install
/// --disable-pip-version-check --no-input <packages...>`. Does not validate `packages`
/// (see [`validate`]).
pub fn installer_command(python: &Path, packages: &[String]) -> Vec<String> {
    let mut command: Vec<String> = match which::which("uv") {
        Ok(uv) => vec![
            uv.display().to_string(),
            "pip".into(),
            "install".into(),
            "--python".into(),
            python.display().to_string(),
        ],
        Err(_) => vec![
            python.display().to_string(),
            "-m".into(),
            "pip".into(),
            "install".into(),
            "--disable-pip-version-check".into(),
            "--no-input".into(),
        ],
    };
    command.extend(packages.iter().cloned());
    command
}

/// Run `command` (argv; stdin empty) in a process group of its own for at most `timeout`,
/// reading its stdout and stderr concurrently. The outcome's `output` is the last
/// `OUTPUT_TAIL_BYTES` (4000) bytes of both, in arrival order, decoded lossily as UTF-8;
/// `restart_recommended` is true when a replacement marker appeared anywhere in either
/// stream, however long the output. A non-zero exit is `ok: false`, not an error.
///
/// Errors: `INVALID_ARGUMENT` for an empty `command`; `IO_ERROR` when it cannot be started;
/// `LIMIT_EXCEEDED` when it runs longer than `timeout` (its process group is then killed; the
/// error's details hold `command` and the output tail).
pub async fn run_installer(
    command: Vec<String>,
    timeout: Duration,
) -> Result<InstallOutcome, SessionError> {
    let Some((program, args)) = command.split_first() else {
        return Err(SessionError::InvalidArgument(
            "The installer command is empty.".into(),
        ));
    };
    let mut installer = tokio::process::Command::new(program);
    crate::secrets::scrub(installer.as_std_mut());
    let mut child = installer
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SessionError::io(Path::new(program), format!("cannot run {program}: {e}")))?;
    let mut group = GroupKiller::new(child.id());
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(SessionError::Internal(
            "the installer's output pipes are missing".into(),
        ));
    };
    let mut output = OutputTail::new(OUTPUT_TAIL_BYTES);
    let finished = tokio::time::timeout(timeout, async {
        let mut reading = std::pin::pin!(read_both(stdout, stderr, &mut output));
        let exited_first = tokio::select! {
            () = &mut reading => None,
            status = child.wait() => Some(status),
        };
        match exited_first {
            None => child.wait().await,
            Some(status) => {
                if tokio::time::timeout(DRAIN_GRACE, &mut reading)
                    .await
                    .is_err()
                {
                    // Something it started still holds the pipes: stop it with the group.
                    group.kill();
                }
                status
            }
        }
    })
    .await;
    let Ok(status) = finished else {
        group.kill();
        let _ = child.kill().await;
        return Err(SessionError::LimitExceeded(format!(
            "The install did not finish within {} s and was stopped. Install fewer packages at a time, or check the output for what it was waiting on. Its output ended with:\n{}",
            timeout.as_secs(),
            output.text()
        )));
    };
    // Reaped, and no member held the pipes past the grace: the group id may be reused now.
    group.disarm();
    Ok(InstallOutcome {
        ok: status.map(|s| s.success()).unwrap_or(false),
        command,
        output: output.text(),
        restart_recommended: output.replaced,
        notices: Vec::new(),
    })
}

/// Feed both pipes into `output` as their bytes arrive, until both reach end of file. A read
/// error ends that pipe.
async fn read_both(stdout: ChildStdout, stderr: ChildStderr, output: &mut OutputTail) {
    let stdout = ReaderStream::with_capacity(stdout, READ_CHUNK).map(|r| (0, r));
    let stderr = ReaderStream::with_capacity(stderr, READ_CHUNK).map(|r| (1, r));
    let mut both = futures::stream::select(stdout, stderr);
    while let Some((stream, chunk)) = both.next().await {
        if let Ok(bytes) = chunk {
            output.push(stream, &bytes);
        }
    }
}

/// SIGKILLs a process group when told to or when dropped (the caller stopped waiting), unless
/// disarmed. Disarm it once the leader is reaped and nothing holds the pipes: with no member
/// left, the group id is free for reuse. (Killing after the reap is safe while some member
/// still holds the pipes, since a live member keeps the id taken.)
struct GroupKiller(Option<Pid>);

impl GroupKiller {
    /// The group led by the just-spawned process `pid` (`None` if it already exited).
    fn new(pid: Option<u32>) -> GroupKiller {
        GroupKiller(pid.and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw))
    }

    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The combined output of two streams as it goes by: the last `cap` bytes in arrival order,
/// and whether a [`REPLACED_MARKERS`] entry appeared in either stream, even split across reads.
struct OutputTail {
    tail: VecDeque<u8>,
    cap: usize,
    /// True once bytes were dropped from the front.
    cut: bool,
    /// Per stream, its last bytes (shorter than the longest marker), so a marker split across
    /// two reads is still seen.
    carry: [Vec<u8>; 2],
    replaced: bool,
}

impl OutputTail {
    fn new(cap: usize) -> OutputTail {
        OutputTail {
            tail: VecDeque::with_capacity(cap),
            cap,
            cut: false,
            carry: [Vec::new(), Vec::new()],
            replaced: false,
        }
    }

    /// Append `chunk` read from `stream` (0 or 1).
    fn push(&mut self, stream: usize, chunk: &[u8]) {
        if !self.replaced {
            let keep = REPLACED_MARKERS.iter().map(|m| m.len()).max().unwrap_or(1) - 1;
            let carry = &mut self.carry[stream];
            carry.extend_from_slice(chunk);
            self.replaced = REPLACED_MARKERS
                .iter()
                .any(|m| memchr::memmem::find(carry, m).is_some());
            let drop = carry.len().saturating_sub(keep);
            carry.drain(..drop);
        }
        let skip = chunk.len().saturating_sub(self.cap);
        let chunk = &chunk[skip..];
        let excess = (self.tail.len() + chunk.len()).saturating_sub(self.cap);
        self.cut |= skip > 0 || excess > 0;
        self.tail.drain(..excess);
        self.tail.extend(chunk);
    }

    /// The tail as text: lossy UTF-8, at most `cap` bytes, never starting inside a character.
    fn text(&self) -> String {
        let (a, b) = self.tail.as_slices();
        let bytes = [a, b].concat();
        // The cut may have split a character: skip its continuation bytes.
        let start = if self.cut {
            bytes
                .iter()
                .take(3)
                .take_while(|&&b| b & 0xC0 == 0x80)
                .count()
        } else {
            0
        };
        let text = String::from_utf8_lossy(&bytes[start..]);
        // Each invalid byte decodes to three; keep the limit.
        let mut from = text.len().saturating_sub(self.cap);
        while !text.is_char_boundary(from) {
            from += 1;
        }
        text[from..].to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Generous: only proves the call does not hang (it takes well under a second).
    const NO_HANG: Duration = Duration::from_secs(30);

    /// `sh -c script` as the installer, with `NO_HANG` as its own limit and the test's.
    async fn run_script(script: &str) -> Result<InstallOutcome, SessionError> {
        let command = vec!["/bin/sh".into(), "-c".into(), script.into()];
        tokio::time::timeout(NO_HANG, run_installer(command, NO_HANG))
            .await
            .expect("the installer run did not finish")
    }

    /// Writes 1 MB of `e` to stderr.
    const MB_TO_STDERR: &str = "head -c 1000000 /dev/zero | tr '\\000' e >&2";

    #[tokio::test]
    async fn installer_that_fills_stderr_before_stdout_finishes() {
        let started = Instant::now();
        let out = run_script(&format!("{MB_TO_STDERR}; echo done"))
            .await
            .unwrap();
        assert!(out.ok, "{out:?}");
        // Which of "done" and the last of stderr arrives first is a race; either way the
        // tail is full and bounded.
        assert!(out.output.bytes().all(|b| b"edon\n".contains(&b)));
        assert_eq!(out.output.len(), OUTPUT_TAIL_BYTES);
        assert!(!out.restart_recommended);
        assert!(started.elapsed() < NO_HANG);
    }

    #[tokio::test]
    async fn replacement_seen_early_is_reported_although_the_tail_drops_it() {
        let out = run_script(&format!(
            "echo 'Successfully uninstalled foo-1.0'; {MB_TO_STDERR}"
        ))
        .await
        .unwrap();
        assert!(out.restart_recommended, "{out:?}");
        assert!(out.output.len() <= OUTPUT_TAIL_BYTES);
        assert!(!out.output.contains("uninstalled"), "{}", out.output);
    }

    #[tokio::test]
    async fn failing_installer_is_not_ok_and_keeps_its_message() {
        let out = run_script("echo 'No matching distribution found for nope' >&2; exit 1")
            .await
            .unwrap();
        assert!(!out.ok);
        assert_eq!(out.output, "No matching distribution found for nope\n");
        assert_eq!(out.command[0], "/bin/sh");
    }

    #[tokio::test]
    async fn stdout_and_stderr_are_kept_in_arrival_order() {
        let out = run_script("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three")
            .await
            .unwrap();
        assert_eq!(out.output, "one\ntwo\nthree\n");
    }

    /// The pid written to `pidfile`, and whether it is still running (not gone, not a zombie).
    fn pid_in(pidfile: &Path) -> (i32, bool) {
        let pid: i32 = std::fs::read_to_string(pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let running = procfs::process::Process::new(pid)
            .and_then(|p| p.stat())
            .is_ok_and(|s| s.state != 'Z');
        (pid, running)
    }

    /// Wait up to `NO_HANG` for the process in `pidfile` to stop running; false if it did not.
    async fn stops_running(pidfile: &Path) -> bool {
        let deadline = Instant::now() + NO_HANG;
        while pid_in(pidfile).1 {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    #[tokio::test]
    async fn installer_over_its_time_is_stopped_with_its_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!(
            "sleep 60 & echo $! > {}; echo started; wait",
            pidfile.display()
        );
        let command = vec!["/bin/sh".into(), "-c".into(), script];
        let started = Instant::now();
        let err = run_installer(command, Duration::from_millis(500))
            .await
            .unwrap_err();
        // Stopped at its limit: long before the 60 s sleep it waits for would end.
        assert!(started.elapsed() < NO_HANG);
        assert_eq!(err.code(), crate::session::ErrorCode::LimitExceeded);
        assert!(err.to_string().ends_with("started\n"), "{err}");
        assert!(
            stops_running(&pidfile).await,
            "the helper {:?} survived",
            pid_in(&pidfile)
        );
    }

    #[tokio::test]
    async fn helper_holding_the_pipes_after_exit_is_stopped_after_a_grace() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let started = Instant::now();
        let out = run_script(&format!(
            "echo installed; sleep 60 & echo $! > {}; exit 0",
            pidfile.display()
        ))
        .await
        .unwrap();
        assert!(out.ok);
        assert_eq!(out.output, "installed\n");
        // Reading stopped after the grace: long before the helper's 60 s sleep would end.
        assert!(started.elapsed() < NO_HANG);
        assert!(
            stops_running(&pidfile).await,
            "the helper {:?} survived",
            pid_in(&pidfile)
        );
    }

    #[tokio::test]
    async fn program_that_cannot_start_is_an_io_error_naming_it() {
        let err = run_installer(vec!["/nonexistent/uv".into()], NO_HANG)
            .await
            .unwrap_err();
        assert_eq!(err.code(), crate::session::ErrorCode::IoError);
        assert!(err.to_string().contains("/nonexistent/uv"), "{err}");
        let err = run_installer(vec![], NO_HANG).await.unwrap_err();
        assert_eq!(err.code(), crate::session::ErrorCode::InvalidArgument);
    }

    #[test]
    fn installer_command_names_the_interpreter_and_ends_with_the_packages() {
        let packages = vec!["numpy".to_string(), "pandas==2.2".to_string()];
        let command = installer_command(Path::new("/env/bin/python"), &packages);
        assert!(
            command.iter().any(|a| a == "/env/bin/python"),
            "{command:?}"
        );
        assert_eq!(command[command.len() - 2..], packages[..]);
        assert!(
            command.windows(2).any(|w| w == ["pip", "install"]),
            "{command:?}"
        );
    }

    #[test]
    fn marker_split_across_reads_of_one_stream_is_seen() {
        let mut t = OutputTail::new(16);
        t.push(0, b"...Successfully unin");
        t.push(1, b"noise on the other stream");
        assert!(!t.replaced);
        t.push(0, b"stalled foo-1.0\n");
        assert!(t.replaced);
    }

    #[test]
    fn marker_halves_on_different_streams_do_not_count() {
        let mut t = OutputTail::new(16);
        t.push(0, b"Successfully ");
        t.push(1, b"uninstalled");
        assert!(!t.replaced);
        t.push(0, b"Uninstalled 1 package in 3ms");
        assert!(t.replaced);
    }

    #[test]
    fn tail_keeps_the_last_bytes_in_arrival_order_and_stays_bounded() {
        let mut t = OutputTail::new(5);
        t.push(0, b"abc");
        t.push(1, b"de");
        assert_eq!(t.text(), "abcde");
        t.push(0, b"f");
        assert_eq!(t.text(), "bcdef");
        t.push(1, &[b'x'; 1000]);
        assert_eq!(t.tail.len(), 5);
        assert_eq!(t.text(), "xxxxx");
    }

    #[test]
    fn tail_cut_inside_a_character_starts_at_the_next_one() {
        let mut t = OutputTail::new(4);
        t.push(0, "aé€".as_bytes()); // 1 + 2 + 3 bytes: the cut drops `a` and half of `é`
        assert_eq!(t.text(), "€");
    }
}
