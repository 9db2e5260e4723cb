//! The client's hello: how a relay (`kernel-mcp --shared`) or a CLI client that asks for
//! stricter floors than the running service's (a sandbox, a memory ceiling) gets them for
//! every session its connection creates — or a clear refusal, never silently less
//! (docs/sandbox.md, "Floors in shared mode"; the rule in `registry::floors`).
//!
//! Before any MCP byte, such a client sends one line, `{"kernel-mcp-hello": {"floors":
//! FLOORS}}`, and waits for the service's line `{"kernel-mcp-hello": {"floors": IN_FORCE}}`:
//! the floors now in force for its connection (the service's, made stricter by the ask). The
//! client checks that they satisfy its ask, and refuses to go on otherwise (a service too old
//! to know the hello answers something else, or nothing). The hello belongs to the
//! connection, not to MCP, so it holds for every protocol version the client then speaks
//! (stateless 2026-07-28 requests included) and needs no change in the client. A client
//! without floors to ask for sends no hello.
//!
//! The service also writes its own floors next to its socket (`<socket>.floors`, 0600) for
//! `kernel-mcp doctor`.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::paths::ServicePaths;
use crate::registry::floors::Floors;

/// The key of the hello and of its answer.
pub const KEY: &str = "kernel-mcp-hello";
/// Longest first line the service reads to look for a hello (a longer one is MCP).
const MAX_FIRST_LINE: u64 = 1 << 20;
/// Longest answer line a client reads.
const MAX_ANSWER: usize = 64 * 1024;
/// How long a client waits for the answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// Why a client's floors were not taken.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    #[error(
        "the running kernel-mcp service does not take a client's floors (it answered {0}): it is older than this kernel-mcp. Stop it (it exits once idle, or end its process) so that a new one starts, or run without --sandbox / --max-memory-mib"
    )]
    NotUnderstood(String),
    #[error(
        "the running kernel-mcp service would give this client's sessions {in_force}, less than the {asked} it asks for; kernel-mcp never runs sessions less confined than asked"
    )]
    Weaker { asked: String, in_force: String },
    #[error("saying hello to the kernel-mcp service failed: {0}")]
    Io(#[from] std::io::Error),
}

fn line(floors: &Floors) -> Vec<u8> {
    let mut l =
        serde_json::to_vec(&serde_json::json!({ KEY: { "floors": floors } })).unwrap_or_default();
    l.push(b'\n');
    l
}

/// The floors a hello (or its answer) carries; `None` for any other line.
fn parse(line: &[u8]) -> Option<Floors> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    serde_json::from_value(v.get(KEY)?.get("floors")?.clone()).ok()
}

/// The client's side: ask for `asked` on `stream` (before any MCP byte) and check the
/// answer. Returns the floors in force. Errors: [`HelloError`].
pub async fn ask(stream: &mut UnixStream, asked: &Floors) -> Result<Floors, HelloError> {
    stream.write_all(&line(asked)).await?;
    // Byte by byte: nothing after the answer's newline is ours to read.
    let mut answer = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while answer.len() < MAX_ANSWER {
            if stream.read(&mut byte).await? == 0 {
                break;
            }
            if byte[0] == b'\n' {
                break;
            }
            answer.push(byte[0]);
        }
        Ok::<_, std::io::Error>(())
    };
    let answered = tokio::time::timeout(ANSWER_DEADLINE, read).await;
    let shown = || {
        let text = String::from_utf8_lossy(&answer);
        match text.trim() {
            "" => "nothing".to_string(),
            t => format!("{:?}", t.chars().take(200).collect::<String>()),
        }
    };
    match answered {
        Ok(r) => r?,
        Err(_) => return Err(HelloError::NotUnderstood(shown())),
    }
    let in_force = parse(&answer).ok_or_else(|| HelloError::NotUnderstood(shown()))?;
    if !in_force.satisfies(asked) {
        return Err(HelloError::Weaker {
            asked: asked.describe(),
            in_force: in_force.describe(),
        });
    }
    Ok(in_force)
}

/// The service's side: read the connection's first line. A hello gives its floors (the
/// caller answers with [`answer`]); any other line is MCP, returned to be served first.
pub async fn first_line<R: AsyncRead + Unpin>(
    read: &mut tokio::io::BufReader<R>,
) -> std::io::Result<(Option<Floors>, Vec<u8>)> {
    let mut first = Vec::new();
    read.take(MAX_FIRST_LINE)
        .read_until(b'\n', &mut first)
        .await?;
    match parse(&first) {
        Some(floors) => Ok((Some(floors), Vec::new())),
        None => Ok((None, first)),
    }
}

/// The service's answer to a hello: the floors in force.
pub fn answer(in_force: &Floors) -> Vec<u8> {
    line(in_force)
}

/// Write the service's own floors beside its socket, for `doctor` (best effort).
pub fn write_record(paths: &ServicePaths, floors: &Floors) {
    use std::os::unix::fs::OpenOptionsExt;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&paths.floors_record)?;
        std::io::Write::write_all(&mut f, &line(floors))
    };
    if let Err(e) = write() {
        tracing::warn!(file = %paths.floors_record.display(), "the service's floors are not recorded: {e}");
    }
}

/// The floors the service of `paths` recorded, if it did.
pub fn read_record(paths: &ServicePaths) -> Option<Floors> {
    parse(&std::fs::read(&paths.floors_record).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_parses_back_and_mcp_does_not() {
        let f = Floors {
            sandbox: crate::kernel::Sandbox {
                policy: crate::kernel::SandboxPolicy::Workspace,
                network: false,
            },
            max_memory_mib: 512,
        };
        assert_eq!(parse(&line(&f)), Some(f));
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#),
            None
        );
        assert_eq!(parse(b"not json"), None);
    }

    #[tokio::test]
    async fn the_service_serves_what_follows_a_hello_and_keeps_a_first_mcp_line() {
        let hello = line(&Floors::default());
        let mut input = hello.clone();
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\"}\n");
        let mut r = tokio::io::BufReader::new(&input[..]);
        let (floors, pending) = first_line(&mut r).await.unwrap();
        assert_eq!((floors, pending.len()), (Some(Floors::default()), 0));
        let mut rest = String::new();
        r.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "{\"jsonrpc\":\"2.0\"}\n");
        let mut r = tokio::io::BufReader::new(&b"{\"jsonrpc\":\"2.0\"}\n"[..]);
        let (floors, pending) = first_line(&mut r).await.unwrap();
        assert_eq!(
            (floors, pending),
            (None, b"{\"jsonrpc\":\"2.0\"}\n".to_vec())
        );
    }
}
