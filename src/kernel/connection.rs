//! The connection file: ports, key and transport a kernel binds, written before the kernel starts.
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/kernels.html#connection-files>

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Contents of a connection file (TCP on 127.0.0.1 only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConnectionInfo {
    pub transport: String,
    pub ip: String,
    pub shell_port: u16,
    pub iopub_port: u16,
    pub stdin_port: u16,
    pub control_port: u16,
    pub hb_port: u16,
    /// HMAC key: 64 hex characters (32 random bytes), used as UTF-8 bytes.
    pub key: String,
    pub signature_scheme: String,
    pub kernel_name: String,
}

/// How many of the ports most recently handed to kernels are not handed out again.
const RECENT_PORTS_KEPT: usize = 2048;

/// The ports most recently handed to kernels by this process, oldest first.
static RECENT_PORTS: std::sync::Mutex<std::collections::VecDeque<u16>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

impl ConnectionInfo {
    /// Five free loopback ports (each found by binding port 0 and releasing it, and none of the
    /// last 2048 this process handed out) and a fresh key.
    /// Another process can still take a port before the kernel binds it; the launcher retries
    /// with new ports when the kernel exits early.
    pub fn allocate(kernel_name: &str) -> std::io::Result<ConnectionInfo> {
        // Hold every listener until the end so the five ports are distinct, and skip ports
        // handed to another kernel recently: a socket of ours still connected to (or
        // reconnecting to) an earlier kernel's port must never reach a newer kernel there.
        let mut held = Vec::new();
        let mut ports = Vec::with_capacity(5);
        let mut recent = RECENT_PORTS.lock().unwrap_or_else(|e| e.into_inner());
        while ports.len() < 5 {
            let l = TcpListener::bind("127.0.0.1:0")?;
            let port = l.local_addr()?.port();
            held.push(l);
            if !recent.contains(&port) {
                ports.push(port);
            } else if held.len() > 5 + RECENT_PORTS_KEPT {
                return Err(std::io::Error::other(
                    "no free loopback port not used recently",
                ));
            }
        }
        for &p in &ports {
            if recent.len() == RECENT_PORTS_KEPT {
                recent.pop_front();
            }
            recent.push_back(p);
        }
        drop(recent);
        let key = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Ok(ConnectionInfo {
            transport: "tcp".into(),
            ip: "127.0.0.1".into(),
            shell_port: ports[0],
            iopub_port: ports[1],
            stdin_port: ports[2],
            control_port: ports[3],
            hb_port: ports[4],
            key,
            signature_scheme: "hmac-sha256".into(),
            kernel_name: kernel_name.into(),
        })
    }

    /// `tcp://127.0.0.1:<port>`.
    pub fn endpoint(&self, port: u16) -> String {
        format!("{}://{}:{}", self.transport, self.ip, port)
    }

    /// Write the file with mode 0600, failing if it already exists. Not synced to disk: the
    /// kernel reads it through the page cache, and after a crash of the host it names ports
    /// nobody listens on (an `fsync` cost 0.3 ms of each launch).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        file.write_all(&bytes)
    }
}

/// Create `dir` (one level, mode 0700) for one kernel's connection file.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Where [`runtime_dir`] is, without creating it.
pub fn runtime_dir_path() -> PathBuf {
    if let Some(d) = std::env::var_os("JUPYTER_RUNTIME_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        PathBuf::from(d).join("kernel-mcp")
    } else {
        std::env::temp_dir().join(format!("kernel-mcp-{}", nix::unistd::getuid()))
    }
}

/// Directory for our connection files, created 0700: `$JUPYTER_RUNTIME_DIR`, else
/// `$XDG_RUNTIME_DIR/kernel-mcp`, else `<tmp>/kernel-mcp-<uid>`. Errors: it cannot be created, or
/// it is not ours alone (see [`crate::trust::check_dir`]).
pub fn runtime_dir() -> std::io::Result<PathBuf> {
    let dir = runtime_dir_path();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    // Connection files hold the kernels' HMAC keys: a directory another user planted (or can
    // write in) would let them swap a file before the kernel reads it.
    crate::trust::check_dir(&dir).map_err(std::io::Error::other)?;
    Ok(dir)
}

/// The name of the connection file of the kernel launched as `id`: `kernel-mcp-<id>.json`
/// (a kernel's supervisor removes only files named so, see [`is_connection_file_name`]).
pub fn connection_file_name(id: impl std::fmt::Display) -> String {
    format!("{CONNECTION_FILE_PREFIX}{id}.json")
}

/// Whether `name` is one [`connection_file_name`] gives.
pub fn is_connection_file_name(name: &str) -> bool {
    name.starts_with(CONNECTION_FILE_PREFIX) && name.ends_with(".json")
}

const CONNECTION_FILE_PREFIX: &str = "kernel-mcp-";
/// The directory of a sandboxed kernel's connection file: `sandbox-<id>` in the runtime dir.
pub const SANDBOX_DIR_PREFIX: &str = "sandbox-";
/// The extension of a kernel's limit file, beside its connection file (`kernel-mcp-<id>.limit`:
/// a new memory limit for its supervisor).
pub const LIMIT_EXTENSION: &str = "limit";
/// The extension of a kernel's broker endpoint file, which sits beside its connection file
/// (`kernel-mcp-<id>.mcp`; the broker writes it, the kernel's supervisor may have to remove it).
pub const ENDPOINT_EXTENSION: &str = "mcp";
/// A session's broker socket in the runtime dir: `broker-<id>/mcp.sock` (the prefix of the
/// directory's name, and the socket's name in it).
pub const BROKER_DIR_PREFIX: &str = "broker-";
/// See [`BROKER_DIR_PREFIX`].
pub const BROKER_SOCKET: &str = "mcp.sock";

/// Remove `dir`, a directory of the runtime dir that holds the Unix socket `socket`, if nobody
/// listens on that socket (connecting is refused, as after its server was killed). A live
/// socket accepts, and a directory whose socket is not bound yet is left alone. Returns
/// whether the directory was removed.
pub fn remove_if_dead(dir: &Path, socket: &str) -> bool {
    let socket = dir.join(socket);
    match std::os::unix::net::UnixStream::connect(&socket) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            let _ = std::fs::remove_file(&socket);
            std::fs::remove_dir(dir).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn ports_are_not_handed_to_two_kernels_in_a_row() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let i = ConnectionInfo::allocate("python3").unwrap();
            for p in [
                i.shell_port,
                i.iopub_port,
                i.stdin_port,
                i.control_port,
                i.hb_port,
            ] {
                assert!(seen.insert(p), "port {p} handed out twice");
            }
        }
    }

    #[test]
    fn allocated_ports_are_distinct_and_key_is_64_hex() {
        let info = ConnectionInfo::allocate("python3").unwrap();
        let mut ports = vec![
            info.shell_port,
            info.iopub_port,
            info.stdin_port,
            info.control_port,
            info.hb_port,
        ];
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 5);
        assert_eq!(info.key.len(), 64);
        assert!(info.key.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn connection_file_is_written_0600_with_the_fields_kernels_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kernel-x.json");
        let info = ConnectionInfo::allocate("python3").unwrap();
        info.write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["signature_scheme"], "hmac-sha256");
        assert_eq!(v["ip"], "127.0.0.1");
        assert_eq!(v["shell_port"], info.shell_port);
        assert!(
            info.write(&path).is_err(),
            "an existing file is never overwritten"
        );
    }
}
