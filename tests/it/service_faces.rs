//! The service's faces checked both ways (docs/semantics.md, "The shared service"), through the
//! real binaries:
//! - a socket another user planted (uid 65534 made the directory and listens first, or
//!   listens on a socket moved into our directory) gets nothing from `serve --shared` or
//!   `kernel-mcp exec`: they refuse with the reason and exit non-zero, and the listener
//!   receives zero bytes; a directory writable by others is refused the same way;
//! - the service changes the mode only of directories it created: an existing directory open
//!   to others (0777, 1777) keeps its mode and is refused; a new one is made 0700.
//!
//! The planted listener runs as `nobody` with the system interpreter, so those tests need
//! root (and skip, saying so, without it).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::common::{require_venv, venv, wait_until};

/// Longest one refused command may take: proves "no hang".
const DEADLINE: Duration = Duration::from_secs(60);

/// A Unix listener as another user: binds `argv[1]` (making its directory when `argv[2]` is
/// 1), says `listening`, then counts connections and bytes until stdin closes, and prints them.
const PLANTED: &str = r#"
import os, select, socket, sys
path, mkdir = sys.argv[1], sys.argv[2] == "1"
if mkdir:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)
print("listening", flush=True)
conns, accepted, received = [], 0, 0
while True:
    r, _, _ = select.select([s, sys.stdin] + conns, [], [])
    if sys.stdin in r:
        break
    for x in r:
        if x is s:
            c, _ = s.accept()
            conns.append(c)
            accepted += 1
        else:
            d = x.recv(65536)
            received += len(d)
            if not d:
                conns.remove(x)
                x.close()
# stdin closed: count what is still waiting too (on a loaded machine the clients'
# connections, and anything they sent, may still sit in the backlog and buffers).
s.setblocking(False)
while True:
    try:
        c, _ = s.accept()
    except BlockingIOError:
        break
    conns.append(c)
    accepted += 1
for c in conns:
    c.setblocking(False)
    try:
        received += len(c.recv(65536))
    except (BlockingIOError, ConnectionError):
        pass
print(f"accepted={accepted} received={received}", flush=True)
"#;

/// The planted listener, running.
struct Planted {
    child: tokio::process::Child,
}

impl Planted {
    /// Start it as uid 65534 on `socket`; returns once it listens.
    async fn start(socket: &Path, make_dir: bool) -> Planted {
        let mut child = tokio::process::Command::new("python3")
            .args(["-c", PLANTED])
            .arg(socket)
            .arg(if make_dir { "1" } else { "0" })
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the planted listener");
        let mut out = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = tokio::time::timeout(DEADLINE, out.next_line())
            .await
            .expect("the planted listener starts")
            .expect("read");
        assert_eq!(first.as_deref(), Some("listening"));
        child.stdout = Some(out.into_inner().into_inner());
        Planted { child }
    }

    /// Stop it; returns (connections accepted, bytes received).
    async fn stop(mut self) -> (u64, u64) {
        drop(self.child.stdin.take());
        let out = tokio::time::timeout(DEADLINE, self.child.wait_with_output())
            .await
            .expect("the planted listener stops")
            .expect("wait");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let field = |name: &str| -> u64 {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text:?}"))
        };
        (field("accepted="), field("received="))
    }
}

/// A temp dir others may enter and write in (sticky, like /tmp), for the planted listener.
fn shared_base() -> tempfile::TempDir {
    let base = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod 1777");
    base
}

/// `kernel-mcp ARGS` with the per-user default socket under `tmpdir` (TMPDIR), or at
/// `socket` when given; state in `state`.
fn command(
    tmpdir: &Path,
    socket: Option<&Path>,
    state: &Path,
    args: &[&str],
) -> tokio::process::Command {
    require_venv();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"));
    cmd.args(args)
        .env("VIRTUAL_ENV", venv())
        .env("TMPDIR", tmpdir)
        .env("XDG_STATE_HOME", state)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("KERNEL_MCP_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(s) = socket {
        cmd.env("KERNEL_MCP_SOCKET", s);
    }
    cmd
}

/// Run `cmd`, writing an MCP `initialize` line to its stdin (as a client would); returns its
/// exit code and stderr.
async fn run_refused(mut cmd: tokio::process::Command) -> (Option<i32>, String) {
    let mut child = cmd.spawn().expect("spawn kernel-mcp");
    if let Some(mut stdin) = child.stdin.take() {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        // It may have refused and gone already: a broken pipe is fine.
        let _ = stdin.write_all(format!("{init}\n").as_bytes()).await;
    }
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("a refusal, not a hang")
        .expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn need_root() -> bool {
    if nix::unistd::getuid().is_root() {
        return true;
    }
    crate::common::skip("needs root to plant a listener as another uid (nobody)");
    false
}

#[tokio::test]
async fn a_socket_planted_by_another_user_receives_nothing_from_the_relay_or_exec() {
    if !need_root() {
        return;
    }
    let base = shared_base();
    let state = tempfile::tempdir().unwrap();
    let uid = nix::unistd::getuid().as_raw();
    let dir = base.path().join(format!("kernel-mcp-{uid}"));
    let planted = Planted::start(&dir.join("service.sock"), true).await;
    assert_eq!(std::fs::metadata(&dir).unwrap().uid(), 65534);

    let (code, err) = run_refused(command(
        base.path(),
        None,
        state.path(),
        &["serve", "--shared"],
    ))
    .await;
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("belongs to uid 65534") && err.contains("rm -r"),
        "{err}"
    );
    let (code, err) = run_refused(command(
        base.path(),
        None,
        state.path(),
        &["exec", "-s", "x", "-c", "print('leaked')"],
    ))
    .await;
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("belongs to uid 65534"), "{err}");
    assert_eq!(planted.stop().await, (0, 0), "nothing may reach it");
}

#[tokio::test]
async fn a_listener_of_another_uid_in_our_directory_is_refused_after_connecting_and_gets_no_byte() {
    if !need_root() {
        return;
    }
    let base = shared_base();
    let state = tempfile::tempdir().unwrap();
    // Ours, private; the listener is bound in nobody's directory and moved into ours, so only
    // the peer-credential check stands between it and the code.
    let ours = base.path().join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).unwrap();
    let theirs = base.path().join("theirs/service.sock");
    let planted = Planted::start(&theirs, true).await;
    let socket = ours.join("service.sock");
    std::fs::rename(&theirs, &socket).expect("move the socket into our directory");

    for args in [
        &["serve", "--shared"][..],
        &["exec", "-s", "x", "-c", "print('leaked')"][..],
        &["sessions"][..],
    ] {
        let (code, err) =
            run_refused(command(base.path(), Some(&socket), state.path(), args)).await;
        assert_ne!(code, Some(0), "{args:?}: {err}");
        assert!(
            err.contains("runs as uid 65534") && err.contains("nothing was sent"),
            "{args:?}: {err}"
        );
    }
    let (accepted, received) = planted.stop().await;
    assert!(
        accepted >= 3,
        "each client connected, then refused: {accepted}"
    );
    assert_eq!(received, 0, "not one byte");
}

#[tokio::test]
async fn a_socket_directory_writable_by_others_is_refused_by_clients_and_the_service_alike() {
    let base = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    for mode in [0o777, 0o1777] {
        let dir = base.path().join(format!("open-{mode:o}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let socket = dir.join("k.sock");
        for args in [
            &["serve", "--shared"][..],
            &["exec", "-s", "x", "-c", "1"][..],
            &["service", "--pool", "python3=0"][..],
        ] {
            let (code, err) =
                run_refused(command(base.path(), Some(&socket), state.path(), args)).await;
            assert_ne!(code, Some(0), "{args:?}: {err}");
            assert!(
                err.contains("writable by other users") && err.contains(&format!("{mode:04o}")),
                "{args:?}: {err}"
            );
        }
        let now = std::fs::metadata(&dir).unwrap().mode() & 0o7777;
        assert_eq!(
            now, mode,
            "the mode of a directory we did not create is never changed"
        );
        assert!(!socket.exists(), "nothing listens there");
    }
}

#[tokio::test]
async fn the_service_makes_a_missing_socket_directory_0700_and_serves_there() {
    let base = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let dir: PathBuf = base.path().join("new/sub");
    let socket = dir.join("k.sock");
    let mut cmd = command(
        base.path(),
        Some(&socket),
        state.path(),
        &["service", "--pool", "python3=0"],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the service");
    let up = wait_until(DEADLINE, || socket.exists()).await;
    let mode = std::fs::metadata(&dir).map(|m| m.mode() & 0o7777).ok();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let status = tokio::time::timeout(DEADLINE, child.wait()).await;
    assert!(up, "the service listens on {}", socket.display());
    assert_eq!(mode, Some(0o700));
    assert!(status.is_ok_and(|s| s.is_ok_and(|s| s.success())));
}
