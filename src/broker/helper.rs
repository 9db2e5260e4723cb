//! The Python helper module `kernel_mcp` (`kernel_mcp.py` beside this file, built into the
//! binary), written once per process into `<runtime dir>/python-<hash>/` (0700; the hash of
//! the module's text, so servers of different versions never share one) and put on the
//! `PYTHONPATH` of Python kernels by [`super::Broker::env_hook`].

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// The module's source.
pub const SOURCE: &str = include_str!("kernel_mcp.py");

/// Write the module (if it is not there already with this content) and return its directory.
/// Errors: the runtime directory cannot be made or written.
pub fn install() -> std::io::Result<PathBuf> {
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(SOURCE.as_bytes()));
    let dir = crate::kernel::connection::runtime_dir()?.join(format!("python-{}", &hash[..16]));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let file = dir.join("kernel_mcp.py");
    if std::fs::read_to_string(&file).ok().as_deref() != Some(SOURCE) {
        // Written aside and renamed: a kernel importing it meanwhile never reads half a file.
        let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
        std::io::Write::write_all(&mut tmp, SOURCE.as_bytes())?;
        tmp.persist(&file).map_err(|e| e.error)?;
    }
    Ok(dir)
}
