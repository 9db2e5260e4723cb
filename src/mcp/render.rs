//! A run's record → `CallToolResult` (what `execute` and every tool that returns a run
//! answers, and a finished task's result): `structuredContent` carries the contract's JSON,
//! a short text block carries the same for models that read text, and images become `image`
//! blocks. Other results render themselves (`tools/out.rs`); errors are rendered by
//! [`super::error::ToolError`].

use std::fmt::Write;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use crate::session::types::{ExecutionResult, RunStatus};

/// Base64 image data one response may carry in all (MCP clients drop messages over 16 MiB).
const MAX_IMAGE_BYTES_PER_RESPONSE: usize = 8 * 1024 * 1024;

fn to_value(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or_else(|e| json!({"error": e.to_string()}))
}

/// An execution result; `isError` when the code raised (or the run failed). Images are
/// scaled for the agent (see [`super::images`]), with a `resource_link` to the original when
/// scaled; an image that cannot be made to fit the per-image cap or the per-response budget,
/// and each shortened stream, become `resource_link` blocks to the run's resources (see
/// [`super::resources`]).
pub async fn execution(r: &ExecutionResult, limits: &crate::config::Limits) -> CallToolResult {
    use super::resources::{link, output_uri, stream_uri};
    let max_image_bytes = limits.max_image_bytes;
    let mut blocks = Vec::new();
    let mut notices = r.notices.clone();
    let mut image_budget = MAX_IMAGE_BYTES_PER_RESPONSE;
    for o in &r.outputs {
        let i = o.index;
        if let Some(img) = &o.image {
            let uri = output_uri(&r.run_id, i);
            let original_link = || {
                ContentBlock::resource_link(link(
                    uri.clone(),
                    format!("output {i} of {} (original)", r.run_id),
                    &img.mime,
                    Some(img.bytes),
                ))
            };
            let agent =
                super::images::for_agent(&r.run_id, i, img, limits.image_max_px, max_image_bytes)
                    .await;
            if let Some(a) = agent.filter(|a| a.data.len() <= image_budget) {
                image_budget -= a.data.len();
                blocks.push(ContentBlock::image(a.data.clone(), a.mime.clone()));
                if let Some(((w, h), (sw, sh))) = a.scaled {
                    notices.push(format!(
                        "Image {i} was scaled from {w}x{h} to {sw}x{sh} px ({} bytes, {}) for this response; the original ({} bytes, {}) is resource {uri} (linked below).",
                        a.bytes, a.mime, img.bytes, img.mime
                    ));
                    blocks.push(original_link());
                }
                continue;
            }
            let why = if img.bytes > max_image_bytes {
                format!(
                    "is over the {max_image_bytes} byte limit for a response and could not be scaled to fit"
                )
            } else {
                format!(
                    "would take this response over {} MiB of images",
                    MAX_IMAGE_BYTES_PER_RESPONSE / (1024 * 1024)
                )
            };
            notices.push(format!(
                "Image {i} ({}, {} bytes) {why}: read it with resources/read {uri} (linked below), or save it to a file from the code.",
                img.mime, img.bytes
            ));
            blocks.push(original_link());
        }
    }
    if let Some(parts) = &r.truncated {
        for (stream, t) in parts {
            if stream == "stdout" || stream == "stderr" {
                blocks.push(ContentBlock::resource_link(link(
                    stream_uri(&r.run_id, stream),
                    format!("{stream} of {}", r.run_id),
                    "text/plain",
                    Some(t.total_bytes),
                )));
            }
            if let Some(a) = &t.artifact {
                blocks.push(ContentBlock::resource_link(link(
                    super::resources::artifact_uri(&a.id),
                    format!("{stream} of {} (artifact {})", r.run_id, a.id),
                    &a.mime,
                    Some(a.bytes as usize),
                )));
            }
        }
    }
    let mut structured = to_value(r);
    structured["notices"] = json!(notices);
    let mut content = vec![ContentBlock::text(execution_text(r, &notices))];
    content.extend(blocks);
    let mut out = CallToolResult::success(content);
    out.structured_content = Some(structured);
    let failed = matches!(
        r.status,
        RunStatus::Error | RunStatus::KernelDied | RunStatus::Timeout | RunStatus::Aborted
    );
    out.is_error = Some(failed);
    out
}

/// The text rendering of a run: a status line (`[ok] run-… in 'default' #1 (3 ms)`), then
/// streams, result, error and notices.
pub fn execution_text(r: &ExecutionResult, notices: &[String]) -> String {
    let mut t = String::new();
    // Kept short (a trivial result is one line and the value): the JSON has every field.
    let _ = write!(
        t,
        "[{}] {} in '{}'",
        r.status.as_str(),
        r.run_id,
        r.session_id
    );
    if let Some(n) = r.execution_count {
        let _ = write!(t, " #{n}");
    }
    if r.generation > 1 {
        let _ = write!(t, " gen {}", r.generation);
    }
    if r.state_reset {
        t.push_str(", STATE RESET");
    }
    let _ = writeln!(t, " ({} ms)", r.elapsed_ms);
    if !r.stdout.is_empty() {
        let _ = writeln!(t, "--- stdout ---\n{}", r.stdout.trim_end_matches('\n'));
    }
    if !r.stderr.is_empty() {
        let _ = writeln!(t, "--- stderr ---\n{}", r.stderr.trim_end_matches('\n'));
    }
    for o in &r.outputs {
        if o.kind == "execute_result" {
            continue;
        }
        match (&o.image, &o.text) {
            (Some(img), _) => {
                let _ = writeln!(t, "--- display: {} ({} bytes) ---", img.mime, img.bytes);
            }
            (None, Some(text)) => {
                let _ = writeln!(t, "--- display ---\n{text}");
            }
            _ => {}
        }
    }
    if let Some(res) = &r.result {
        let _ = writeln!(t, "--- result ---\n{res}");
    }
    if let Some(e) = &r.error {
        let _ = writeln!(t, "--- error: {}: {} ---", e.ename, e.evalue);
        for line in &e.traceback {
            let _ = writeln!(t, "{}", line.trim_end());
        }
    }
    if let Some(p) = &r.prompt {
        let _ = writeln!(
            t,
            "--- waiting for input{}: {:?} --- answer with send_input(run_id=\"{}\", value=...)",
            if p.password { " (password)" } else { "" },
            p.text,
            r.run_id
        );
    }
    if let Some(parts) = &r.truncated {
        let names: Vec<&str> = parts.keys().map(String::as_str).collect();
        let _ = writeln!(
            t,
            "Shortened: {}. The whole text: get_execution(run_id=\"{}\", stream, offset, limit); stdout and stderr are also linked resources.",
            names.join(", "),
            r.run_id
        );
        for (name, a) in parts
            .iter()
            .filter_map(|(n, t)| t.artifact.as_ref().map(|a| (n, a)))
        {
            let _ = writeln!(
                t,
                "The whole {name} is artifact {} ({} bytes, sha256 {}): read_artifact, save_artifact or forward_artifact it by id.",
                a.id, a.bytes, a.sha256
            );
        }
    }
    if matches!(r.status, RunStatus::Running | RunStatus::Queued) {
        let _ = writeln!(
            t,
            "Still {}; call get_execution(run_id=\"{}\", wait_s=...) for the rest.",
            r.status.as_str(),
            r.run_id
        );
    }
    for n in notices {
        let _ = writeln!(t, "note: {n}");
    }
    t.trim_end().to_string()
}
