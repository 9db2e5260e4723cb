//! Transit files: where the content frame of a large `stream` message goes while it comes off
//! the iopub socket (docs/performance.md), so a flood costs the server a piece buffer, not the
//! frame.
//!
//! ipykernel batches a flood's stdout into a few messages of up to tens of MB (50 MB of
//! `print` arrive as two messages of 6–10 and 40–44 MB on an idle host). A content frame of
//! at least [`TRANSIT_FRAME`] bytes of a `stream` message is read in pieces of
//! [`PIECE_BYTES`]: each is written to an unnamed file (`O_TMPFILE`, so nothing is left on
//! disk however the server ends), fed to the message's HMAC and to
//! [`wire::ContentScanner`], which notes where `text` lies in the file. The session then
//! unescapes the text from the file a piece at a time as it stores it (into its spool once
//! the run is large, see `session::run::spool`), and the file goes when the message does.
//! Nothing of the text is used before the signature is checked: a badly signed message is
//! dropped with its file. When the file cannot be written (a full disk), what it holds is
//! read back and the rest of the frame read into memory: the message is then parsed like any
//! other, under iopub's in-memory budget, and nothing of it is lost.
//!
//! The files live in the directory set by [`set_dir`] (the server's spool directory, 0700),
//! else the system's temporary directory. Files not yet stored by their sessions are bounded
//! by [`TRANSIT_BUDGET`] bytes across all kernels; a reader waits for room, and while it
//! waits the kernel's output stays in the socket buffers (the same backpressure as the
//! in-memory budget of `iopub`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::wire::{self, ContentScanner, RawText, Signer, StreamedContent};

/// A `stream` content frame at least this large is read into a transit file.
pub const TRANSIT_FRAME: usize = 1024 * 1024;
/// Bytes of transit files whose messages are not yet stored, across all kernels.
pub const TRANSIT_BUDGET: usize = 256 * 1024 * 1024;
/// A frame is read off the socket in pieces of this size.
pub const PIECE_BYTES: usize = 256 * 1024;

static DIR: OnceLock<PathBuf> = OnceLock::new();

/// The budget in KiB permits (a semaphore counts in u32).
static BUDGET: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(TRANSIT_BUDGET / 1024)));

/// Make transit files in `dir` from now on (the first call wins).
pub fn set_dir(dir: &Path) {
    let _ = DIR.set(dir.to_owned());
}

/// A new unnamed file in the transit directory; `None` (with a warning) when none can be made,
/// and then the frame is read into memory as any other.
fn new_file() -> Option<File> {
    let dir = DIR.get().cloned().unwrap_or_else(std::env::temp_dir);
    match tempfile::tempfile_in(&dir) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "no transit file, a large stream message is read into memory: {e}");
            None
        }
    }
}

/// Whether a header frame is a `stream` message's.
pub fn is_stream(header: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        msg_type: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Kind>(header).is_ok_and(|k| k.msg_type == "stream")
}

/// What became of a content frame read in pieces.
pub enum Transited {
    /// Scanned: the content without its text, the text in its file, the MAC over the
    /// frame, and the budget the file holds (release it once the text is stored).
    Streamed(Box<StreamedContent>, Option<OwnedSemaphorePermit>),
    /// The whole frame in memory, for the general parser: the content is not a flat object
    /// of strings, or its transit file could not be written (a full disk) and the rest of
    /// the frame was read into memory instead.
    Whole(Bytes),
    /// The file could not be written nor read back: the message is lost; the reason.
    Lost(String),
}

/// Read a content frame of `size` bytes from `read` into a transit file (see the module
/// docs); `signed` are the message's header, parent_header and metadata frames. `None` when
/// no file could be made: nothing was read, and the caller reads the frame as usual.
/// Errors: the connection failed or closed mid-frame.
pub async fn read<R: AsyncRead + Unpin>(
    read: &mut R,
    size: usize,
    signer: &Signer,
    signed: [&[u8]; 3],
) -> std::io::Result<Option<Transited>> {
    let Some(file) = new_file() else {
        return Ok(None);
    };
    read_through(read, size, signer, signed, file)
        .await
        .map(Some)
}

/// [`read`] into `file`.
async fn read_through<R, F>(
    read: &mut R,
    size: usize,
    signer: &Signer,
    signed: [&[u8]; 3],
    mut file: F,
) -> std::io::Result<Transited>
where
    R: AsyncRead + Unpin,
    F: Write + wire::RawStore + 'static,
{
    tracing::debug!(
        bytes = size,
        "a stream content frame goes through a transit file"
    );
    let kib = (size / 1024).clamp(1, TRANSIT_BUDGET / 1024) as u32;
    let permit = BUDGET.clone().acquire_many_owned(kib).await.ok();
    let mut mac = signer.begin(signed);
    let mut scanner = ContentScanner::default();
    let mut piece = Vec::with_capacity(PIECE_BYTES.min(size));
    let mut left = size;
    let mut written = 0;
    // Once the file failed: the frame so far, and the rest as it comes.
    let mut in_memory: Option<Vec<u8>> = None;
    let mut lost = None;
    while left > 0 {
        let want = left.min(PIECE_BYTES);
        piece.clear();
        while piece.len() < want {
            let more = (want - piece.len()) as u64;
            if read.take(more).read_buf(&mut piece).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        left -= want;
        if lost.is_some() {
            continue; // the rest of the frame is read and dropped
        }
        if let Some(whole) = in_memory.as_mut() {
            whole.extend_from_slice(&piece);
            continue;
        }
        mac.update(&piece);
        scanner.feed(&piece);
        match file.write_all(&piece) {
            Ok(()) => written += piece.len(),
            Err(e) => {
                tracing::warn!(
                    bytes = size,
                    "a transit file could not be written ({e}); the large stream message is read into memory"
                );
                let mut whole = vec![0u8; written];
                match read_exact_at(&file, &mut whole) {
                    Ok(()) => {
                        whole.reserve_exact(size - written);
                        whole.extend_from_slice(&piece);
                        in_memory = Some(whole);
                    }
                    Err(e) => {
                        lost = Some(format!(
                            "its transit file could not be written nor read back: {e}"
                        ));
                    }
                }
            }
        }
    }
    if let Some(reason) = lost {
        return Ok(Transited::Lost(reason));
    }
    if let Some(whole) = in_memory {
        return Ok(Transited::Whole(Bytes::from(whole)));
    }
    Ok(match scanner.finish() {
        Some((fields, span)) => {
            let store: Arc<dyn wire::RawStore> = Arc::new(file);
            Transited::Streamed(
                Box::new(StreamedContent {
                    mac,
                    content: Value::Object(fields),
                    raw_text: span.map(|span| RawText::in_store(store, span)),
                }),
                permit,
            )
        }
        None => {
            drop(permit);
            let mut whole = vec![0u8; size];
            match read_exact_at(&file, &mut whole) {
                Ok(()) => Transited::Whole(Bytes::from(whole)),
                Err(e) => Transited::Lost(format!("its transit file could not be read: {e}")),
            }
        }
    })
}

/// Fill `buf` from the start of `store`. Errors: a read failed or the store is shorter.
fn read_exact_at(store: &dyn wire::RawStore, buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match store.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SIGNED: [&[u8]; 3] = [br#"{"msg_type":"stream"}"#, b"{}", b"{}"];

    async fn transit(content: &[u8], signer: &Signer) -> Transited {
        let mut source = content;
        read(&mut source, content.len(), signer, SIGNED)
            .await
            .expect("read")
            .expect("a transit file")
    }

    #[tokio::test]
    async fn a_stream_frame_goes_through_its_file_and_reads_back_whole() {
        let text = "line é \"q\"\n".repeat(300_000);
        let content = serde_json::to_vec(&json!({"name": "stdout", "text": text})).unwrap();
        let signer = Signer::new(b"key");
        let Transited::Streamed(streamed, permit) = transit(&content, &signer).await else {
            panic!("a flat stream content is scanned");
        };
        assert_eq!(streamed.content, json!({"name": "stdout"}));
        assert!(permit.is_some_and(|p| p.num_permits() == content.len() / 1024));
        let raw = streamed.raw_text.expect("the text is in the file");
        assert_eq!(raw.to_text(), text);
        let sig = signer.sign([SIGNED[0], SIGNED[1], SIGNED[2], &content]);
        assert!(streamed.mac.verify(sig.as_bytes()).is_ok());
    }

    #[tokio::test]
    async fn a_bad_signature_is_refused_and_the_message_never_decodes() {
        let text = "x".repeat(2 * TRANSIT_FRAME);
        let content = serde_json::to_vec(&json!({"name": "stdout", "text": text})).unwrap();
        let signer = Signer::new(b"key");
        let Transited::Streamed(streamed, _) = transit(&content, &signer).await else {
            panic!("scanned");
        };
        let forged = Signer::new(b"other").sign([SIGNED[0], SIGNED[1], SIGNED[2], &content]);
        let frames = vec![
            Bytes::from_static(wire::DELIMITER),
            Bytes::from(forged),
            Bytes::from_static(SIGNED[0]),
            Bytes::from_static(b"{}"),
            Bytes::from_static(b"{}"),
            Bytes::new(),
        ];
        assert_eq!(
            wire::decode_streamed(frames, *streamed).err(),
            Some(wire::WireError::BadSignature)
        );
    }

    #[tokio::test]
    async fn a_content_that_is_not_flat_comes_back_whole_for_the_general_parser() {
        let content =
            serde_json::to_vec(&json!({"name": "stdout", "text": "t", "n": [1, 2]})).unwrap();
        let Transited::Whole(bytes) = transit(&content, &Signer::new(b"")).await else {
            panic!("not flat: whole");
        };
        assert_eq!(bytes, content);
    }

    /// A transit file on a disk that fills after `room` bytes.
    struct FillsAfter {
        file: File,
        room: usize,
    }

    impl Write for FillsAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ENOSPC));
            }
            let n = self.file.write(&buf[..buf.len().min(self.room)])?;
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl wire::RawStore for FillsAfter {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            wire::RawStore::read_at(&self.file, buf, offset)
        }
    }

    #[tokio::test]
    async fn a_disk_that_fills_mid_frame_gives_the_whole_frame_from_memory() {
        let text = "line é \"q\"\n".repeat(200_000);
        let content = serde_json::to_vec(&json!({"name": "stdout", "text": text})).unwrap();
        assert!(content.len() > 4 * PIECE_BYTES);
        // At once, within the second piece, and at a piece's end.
        for room in [0, PIECE_BYTES + 4321, 2 * PIECE_BYTES] {
            let file = FillsAfter {
                file: tempfile::tempfile().unwrap(),
                room,
            };
            let mut source = &content[..];
            let got = read_through(&mut source, content.len(), &Signer::new(b"k"), SIGNED, file)
                .await
                .expect("read");
            let Transited::Whole(bytes) = got else {
                panic!("room {room}: the frame is kept in memory");
            };
            assert!(bytes == content, "room {room}: the frame byte for byte");
        }
    }

    #[test]
    fn only_a_stream_header_is_a_stream() {
        assert!(is_stream(br#"{"msg_id": "1", "msg_type": "stream"}"#));
        assert!(!is_stream(br#"{"msg_type": "display_data"}"#));
        assert!(!is_stream(b"not json"));
    }
}
