//! The Python helper module `kernel_mcp` (`kernel_mcp.py` beside this file, and its artifact
//! half `_kernel_mcp_artifacts.py`, both built into the binary), written once per process into `<runtime dir>/python-<hash>/` (0700; the hash of
//! the module's text, so servers of different versions never share one) and put on the
//! `PYTHONPATH` of Python kernels by [`super::Broker::env_hook`]. The runtime directory is
//! outside every sandbox grant (`kernel::sandbox::rules`), so no sandboxed kernel can rewrite
//! the copy unsandboxed kernels import; a sandboxed kernel imports a copy of its own,
//! written into its private directory ([`install_private`]), which it may read but not
//! write.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// The module's source.
pub const SOURCE: &str = include_str!("kernel_mcp.py");
/// The module's files: name and source.
pub const FILES: [(&str, &str); 2] = [
    ("kernel_mcp.py", SOURCE),
    (
        "_kernel_mcp_artifacts.py",
        include_str!("_kernel_mcp_artifacts.py"),
    ),
];

/// Write the module (if it is not there already with this content) and return its directory.
/// Errors: the runtime directory cannot be made or written.
pub fn install() -> std::io::Result<PathBuf> {
    use sha2::Digest;
    let mut digest = sha2::Sha256::new();
    for (name, source) in FILES {
        digest.update(name.as_bytes());
        digest.update(source.as_bytes());
    }
    let hash = hex::encode(digest.finalize());
    let dir = crate::kernel::connection::runtime_dir()?.join(format!("python-{}", &hash[..16]));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    for (name, source) in FILES {
        let file = dir.join(name);
        if std::fs::read_to_string(&file).ok().as_deref() != Some(source) {
            // Written aside and renamed: a kernel importing it meanwhile never reads half a file.
            let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
            std::io::Write::write_all(&mut tmp, source.as_bytes())?;
            tmp.persist(&file).map_err(|e| e.error)?;
        }
    }
    Ok(dir)
}

/// Write the module into `<private_dir>/python/` (0700, the file 0600) for one sandboxed
/// kernel, and return that directory. Errors: it cannot be written.
pub fn install_private(private_dir: &std::path::Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = private_dir.join("python");
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    for (name, source) in FILES {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(name))?;
        std::io::Write::write_all(&mut file, source.as_bytes())?;
    }
    Ok(dir)
}
