//! TEMPORARY stand-in (replaced by the non-blocking file module being written alongside).

use std::path::{Path, PathBuf};

use super::SessionError;

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FileError {
    path: PathBuf,
    message: String,
    too_large: bool,
}

impl From<FileError> for SessionError {
    fn from(e: FileError) -> SessionError {
        if e.too_large {
            SessionError::LimitExceeded(e.message)
        } else {
            SessionError::io(&e.path, e.message)
        }
    }
}

pub async fn read_capped(path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    let p = path.to_path_buf();
    let r = tokio::task::spawn_blocking(move || std::fs::read(&p)).await;
    match r {
        Ok(Ok(b)) if b.len() <= cap => Ok(b),
        Ok(Ok(b)) => Err(FileError {
            path: path.into(),
            message: format!(
                "{} is {} bytes; the limit is {cap}",
                path.display(),
                b.len()
            ),
            too_large: true,
        }),
        Ok(Err(e)) => Err(FileError {
            path: path.into(),
            message: format!("cannot read {}: {e}", path.display()),
            too_large: false,
        }),
        Err(e) => Err(FileError {
            path: path.into(),
            message: e.to_string(),
            too_large: false,
        }),
    }
}

pub async fn write_file(path: &Path, bytes: Vec<u8>) -> Result<(), FileError> {
    let p = path.to_path_buf();
    let r = tokio::task::spawn_blocking(move || {
        if p.is_dir() {
            return Err(std::io::Error::other("is a directory; give a file path"));
        }
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, bytes)
    })
    .await;
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(FileError {
            path: path.into(),
            message: format!("cannot write {}: {e}", path.display()),
            too_large: false,
        }),
        Err(e) => Err(FileError {
            path: path.into(),
            message: e.to_string(),
            too_large: false,
        }),
    }
}
