//! Runs' outputs as MCP resources: `kernel-mcp://runs/{run_id}/stdout`, `…/stderr` and
//! `…/outputs/{index}` (the index-th display of `outputs[]`), listed through resource
//! templates and read with `resources/read`. They live as long as the run is kept (a
//! session keeps its last 256 finished runs; a destroyed session's runs are gone).
//!
//! A run is read only by a caller that sees its session: another connection's `default` run
//! answers resource-not-found, exactly like a run that never existed.
//!
//! A stream read returns its stored text from byte `offset` (query `?offset=N`, default 0),
//! at most [`MAX_READ_BYTES`] at once; when more remains, a second content item names the URI
//! of the rest. An output read returns its image (a base64 blob with its MIME type) or,
//! for a display with no image, its text.
//!
//! Artifacts are resources too: `kernel-mcp://artifacts/{id}` (`?offset=N`), read the same
//! way — text for a text type, else a base64 blob — by a caller that sees the artifact's
//! session (see [`crate::artifacts`]).

use rmcp::ErrorData as McpError;
use rmcp::model::{Resource, ResourceContents, ResourceTemplate};

use crate::registry::RunHandle;
use crate::registry::scope::Scope;
use crate::session::Part;

/// The URI scheme and authority of every run resource.
pub const PREFIX: &str = "kernel-mcp://runs/";

/// The prefix of every artifact resource.
pub const ARTIFACT_PREFIX: &str = "kernel-mcp://artifacts/";

/// The URI of an artifact.
pub fn artifact_uri(id: &str) -> String {
    format!("{ARTIFACT_PREFIX}{id}")
}

/// Most bytes of stream text one read returns (well under the 16 MiB message limit of
/// common clients).
pub const MAX_READ_BYTES: usize = 8 * 1024 * 1024;

/// What a URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// stdout or stderr of a run, from a byte offset.
    Stream {
        run: String,
        part: Part,
        offset: usize,
    },
    /// The index-th entry of a run's `outputs`.
    Output { run: String, index: usize },
}

/// Why a URI names no run resource (the message the client reads).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadUri {
    #[error("Unknown resource {0:?}: run resources start with {PREFIX}", PREFIX = PREFIX)]
    Scheme(String),
    #[error("no run id")]
    NoRun,
    #[error("offset must be a byte count, not {0:?}")]
    Offset(String),
    #[error("unknown query {0:?}; only offset=N is understood")]
    Query(String),
    #[error("output index must be a number, not {0:?}")]
    Index(String),
    #[error(
        "Unknown resource {0:?}: use {PREFIX}{{run_id}}/stdout, /stderr or /outputs/{{index}}",
        PREFIX = PREFIX
    )]
    Part(String),
}

/// Parse a run resource URI.
pub fn parse(uri: &str) -> Result<Target, BadUri> {
    let rest = uri
        .strip_prefix(PREFIX)
        .ok_or_else(|| BadUri::Scheme(uri.to_string()))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut parts = path.split('/');
    let run = parts
        .next()
        .filter(|r| !r.is_empty())
        .ok_or(BadUri::NoRun)?;
    let what = parts.next().unwrap_or("");
    let offset = match query.strip_prefix("offset=") {
        Some(n) => n.parse().map_err(|_| BadUri::Offset(n.to_string()))?,
        None if query.is_empty() => 0,
        None => return Err(BadUri::Query(query.to_string())),
    };
    let target = match (what, parts.next(), parts.next()) {
        ("stdout", None, _) => Target::Stream {
            run: run.into(),
            part: Part::Stdout,
            offset,
        },
        ("stderr", None, _) => Target::Stream {
            run: run.into(),
            part: Part::Stderr,
            offset,
        },
        ("outputs", Some(i), None) => Target::Output {
            run: run.into(),
            index: i.parse().map_err(|_| BadUri::Index(i.to_string()))?,
        },
        _ => return Err(BadUri::Part(uri.to_string())),
    };
    Ok(target)
}

/// The URI of a run's stream (`"stdout"` / `"stderr"`).
pub fn stream_uri(run: &str, stream: &str) -> String {
    format!("{PREFIX}{run}/{stream}")
}

/// The URI of a run's index-th output.
pub fn output_uri(run: &str, index: usize) -> String {
    format!("{PREFIX}{run}/outputs/{index}")
}

/// A `resource_link` target for a run's part.
pub fn link(uri: String, name: String, mime: &str, size: Option<usize>) -> Resource {
    let mut r = Resource::new(uri, name).with_mime_type(mime);
    r.size = size.map(|s| s as u64);
    r
}

/// The three templates.
pub fn templates() -> Vec<ResourceTemplate> {
    let t = |uri: &str, name: &str, description: &str, mime: Option<&str>| {
        let mut t = ResourceTemplate::new(uri, name);
        t.description = Some(description.into());
        t.mime_type = mime.map(String::from);
        t
    };
    vec![
        t(
            "kernel-mcp://runs/{run_id}/stdout",
            "run stdout",
            "A run's whole stdout (8 MiB per read; ?offset=N for the rest).",
            Some("text/plain"),
        ),
        t(
            "kernel-mcp://runs/{run_id}/stderr",
            "run stderr",
            "A run's whole stderr (8 MiB per read; ?offset=N for the rest).",
            Some("text/plain"),
        ),
        t(
            "kernel-mcp://runs/{run_id}/outputs/{index}",
            "run output",
            "The index-th display of a run's outputs[]: its image, or its text.",
            None,
        ),
        t(
            "kernel-mcp://artifacts/{id}",
            "artifact",
            "An artifact kept by reference: text, or a base64 blob (8 MiB per read; ?offset=N for the rest).",
            None,
        ),
    ]
}

/// Read `uri` for the caller of `scope`. Errors: `-32602` for a malformed URI,
/// resource-not-found for a run or output that is not (or no longer) kept, or that the caller
/// does not see.
pub async fn read(scope: &Scope, uri: &str) -> Result<Vec<ResourceContents>, McpError> {
    if let Some(rest) = uri.strip_prefix(ARTIFACT_PREFIX) {
        return read_artifact(scope, uri, rest).await;
    }
    let target = parse(uri).map_err(|m| McpError::invalid_params(m.to_string(), None))?;
    let run_of = |run: &str| -> Result<RunHandle, McpError> {
        let key = scope.run_key(run.to_string());
        scope
            .registry()
            .run(&key)
            .map_err(|e| McpError::resource_not_found(format!("{e} ({uri})"), None))
    };
    match target {
        Target::Stream { run, part, offset } => {
            let page = run_of(&run)?
                .page(part, offset, MAX_READ_BYTES)
                .await
                .map_err(|e| McpError::resource_not_found(e.to_string(), None))?;
            let mut contents = vec![ResourceContents::text(page.text, uri)];
            if page.next_offset < page.total_bytes {
                let base = uri.split_once('?').map_or(uri, |(b, _)| b);
                let next = format!("{base}?offset={}", page.next_offset);
                contents.push(ResourceContents::text(
                    format!(
                        "[{} of {} bytes remain: read {next}]",
                        page.total_bytes - page.next_offset,
                        page.total_bytes
                    ),
                    next,
                ));
            }
            Ok(contents)
        }
        Target::Output { run, index } => {
            let r = run_of(&run)?
                .record()
                .await
                .map_err(|e| McpError::resource_not_found(e.to_string(), None))?;
            let output = r.outputs.iter().find(|o| o.index == index).ok_or_else(|| {
                let count = r.outputs.last().map_or(0, |o| o.index + 1);
                let why = if index < count {
                    "it is one of the many outputs a response leaves out; export_history(format=\"notebook\") keeps them all"
                } else {
                    "there is no such index"
                };
                McpError::resource_not_found(
                    format!("Run {run} has {count} outputs; output {index} cannot be read: {why}."),
                    None,
                )
            })?;
            match (&output.image, &output.text) {
                (Some(img), _) => Ok(vec![
                    ResourceContents::blob(img.data.clone(), uri).with_mime_type(img.mime.clone()),
                ]),
                (None, Some(text)) => Ok(vec![ResourceContents::text(text.clone(), uri)]),
                (None, None) => Ok(vec![ResourceContents::text(String::new(), uri)]),
            }
        }
    }
}

/// Read the artifact `rest` (`{id}` or `{id}?offset=N`) names, at most [`MAX_READ_BYTES`]
/// from its offset, and a link to the rest. Errors: as [`read`].
async fn read_artifact(
    scope: &Scope,
    uri: &str,
    rest: &str,
) -> Result<Vec<ResourceContents>, McpError> {
    let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
    let offset: u64 = match query.strip_prefix("offset=") {
        Some(n) => n.parse().map_err(|_| {
            McpError::invalid_params(format!("offset must be a byte count, not {n:?}"), None)
        })?,
        None if query.is_empty() => 0,
        None => {
            return Err(McpError::invalid_params(
                format!("unknown query {query:?}; only offset=N is understood"),
                None,
            ));
        }
    };
    let viewer = scope.viewer();
    let (artifact, bytes) = scope
        .registry()
        .artifacts()
        .read(id, |s| viewer.sees(s), offset, MAX_READ_BYTES)
        .await
        .map_err(|e| match e {
            crate::artifacts::ArtifactError::NotFound(_) => {
                McpError::resource_not_found(format!("{e} ({uri})"), None)
            }
            other => McpError::invalid_params(other.to_string(), None),
        })?;
    let (encoding, data, covered) = super::tools::artifact_encode(&artifact, &bytes);
    let mut contents = vec![match encoding {
        "text" => ResourceContents::text(data, uri).with_mime_type(artifact.mime.clone()),
        _ => ResourceContents::blob(data, uri).with_mime_type(artifact.mime.clone()),
    }];
    let next_offset = offset + covered as u64;
    if next_offset < artifact.bytes {
        let next = format!("{}?offset={next_offset}", artifact_uri(id));
        contents.push(ResourceContents::text(
            format!(
                "[{} of {} bytes remain: read {next}]",
                artifact.bytes - next_offset,
                artifact.bytes
            ),
            next,
        ));
    }
    Ok(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_and_output_uris_parse_back_to_what_they_name() {
        assert_eq!(
            parse(&stream_uri("run-1", "stdout")),
            Ok(Target::Stream {
                run: "run-1".into(),
                part: Part::Stdout,
                offset: 0
            })
        );
        assert_eq!(
            parse("kernel-mcp://runs/run-1/stderr?offset=10"),
            Ok(Target::Stream {
                run: "run-1".into(),
                part: Part::Stderr,
                offset: 10
            })
        );
        assert_eq!(
            parse(&output_uri("run-1", 3)),
            Ok(Target::Output {
                run: "run-1".into(),
                index: 3
            })
        );
    }

    #[test]
    fn a_malformed_uri_says_what_is_understood() {
        for bad in [
            "file:///etc/passwd",
            "kernel-mcp://runs/run-1/result",
            "kernel-mcp://runs/run-1/outputs/x",
            "kernel-mcp://runs/run-1/stdout?limit=3",
            "kernel-mcp://runs//stdout",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
