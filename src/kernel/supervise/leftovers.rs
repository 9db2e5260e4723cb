//! What a killed server leaves of a kernel, removed by the kernel's supervisor once it has
//! ended the kernel's tree: the connection file (it holds the kernel's key), its siblings —
//! the broker endpoint file (`.mcp`, the session's socket and key) and the limit file
//! (`.limit`) — the private directory of a sandboxed kernel's connection file, and the
//! session's broker endpoint directory when its socket is dead. A server that exits cleanly
//! removes all of these itself; this is for SIGKILL, a crash or the OOM killer.

use std::path::Path;

use crate::kernel::connection::{
    BROKER_DIR_PREFIX, BROKER_SOCKET, ENDPOINT_EXTENSION, LIMIT_EXTENSION, SANDBOX_DIR_PREFIX,
    is_connection_file_name, remove_if_dead,
};

/// Remove the files of the kernel whose connection file is `connection_file`. Only a file
/// named as the server names them (`kernel-mcp-*.json`) is touched; errors are ignored (a
/// file already gone is the goal).
pub fn remove(connection_file: &Path) {
    let named_ours = connection_file
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_connection_file_name);
    if !named_ours {
        return;
    }
    let endpoint = connection_file.with_extension(ENDPOINT_EXTENSION);
    let broker_dir = broker_dir_named_in(&endpoint);
    for file in [
        connection_file.to_path_buf(),
        endpoint,
        connection_file.with_extension(LIMIT_EXTENSION),
    ] {
        let _ = std::fs::remove_file(file);
    }
    if let Some(dir) = connection_file.parent()
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(SANDBOX_DIR_PREFIX))
    {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Some(dir) = broker_dir {
        remove_if_dead(&dir, BROKER_SOCKET);
    }
}

/// The `broker-*` directory of the socket the endpoint file names, if it is one.
fn broker_dir_named_in(endpoint_file: &Path) -> Option<std::path::PathBuf> {
    let body = std::fs::read(endpoint_file).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&body).ok()?;
    let socket = Path::new(value.get("socket")?.as_str()?);
    let dir = socket.parent()?;
    let named = dir
        .file_name()?
        .to_string_lossy()
        .starts_with(BROKER_DIR_PREFIX)
        && socket.file_name()? == BROKER_SOCKET;
    named.then(|| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `broker-*` directory in `root` with its socket bound (the listener, kept or dropped
    /// by the caller), and the endpoint file of `cf` naming it.
    fn endpoint(
        root: &Path,
        broker: &str,
        cf: &Path,
    ) -> (std::path::PathBuf, std::os::unix::net::UnixListener) {
        let dir = root.join(broker);
        std::fs::create_dir(&dir).expect("dir");
        let socket = dir.join(BROKER_SOCKET);
        let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let body = serde_json::json!({"socket": socket, "key": "k", "session": "s"});
        std::fs::write(cf.with_extension(ENDPOINT_EXTENSION), body.to_string()).expect("mcp");
        (socket, listener)
    }

    #[test]
    fn removes_the_connection_file_its_siblings_and_a_dead_broker_socket() {
        let root = tempfile::tempdir().expect("tmp");
        let cf = root.path().join("kernel-mcp-1234.json");
        std::fs::write(&cf, "{}").expect("cf");
        // A bound socket whose listener is gone refuses connections, as after a SIGKILL.
        drop(endpoint(root.path(), "broker-0123456789ab", &cf).1);
        std::fs::write(cf.with_extension("limit"), "64").expect("limit");
        remove(&cf);
        let left: Vec<_> = std::fs::read_dir(root.path())
            .expect("read")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn a_live_broker_socket_and_files_not_named_as_ours_are_kept() {
        let root = tempfile::tempdir().expect("tmp");
        let cf = root.path().join("kernel-mcp-5678.json");
        let (socket, _listener) = endpoint(root.path(), "broker-live", &cf);
        remove(&cf);
        assert!(socket.exists(), "a socket someone listens on is kept");
        assert!(!cf.with_extension("mcp").exists());

        let other = root.path().join("notes.json");
        std::fs::write(&other, "{}").expect("other");
        remove(&other);
        assert!(other.exists(), "only kernel-mcp-*.json is ours");
    }

    #[test]
    fn a_sandboxed_kernels_private_directory_goes_with_its_file() {
        let root = tempfile::tempdir().expect("tmp");
        let dir = root.path().join("sandbox-abc");
        std::fs::create_dir(&dir).expect("dir");
        let cf = dir.join("kernel-mcp-abc.json");
        std::fs::write(&cf, "{}").expect("cf");
        std::fs::write(dir.join("kernel-abc.json"), "{}").expect("rewritten");
        remove(&cf);
        assert!(!dir.exists());
    }
}
