//! Display outputs: what the agent sees of a MIME bundle (`display_data`, `execute_result`,
//! `update_display_data`) and of an `error` message. Spec: "Display Data" and "Execution
//! errors" in <https://jupyter-client.readthedocs.io/en/latest/messaging.html>.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::history::{HistoryOutput, value_bytes};
use super::text::{clean_text, head_tail_with};
use super::types::{DisplayBundle, ErrorInfo, ImageData, OutputItem};

/// Image MIME types returned as image content, in order of preference.
const IMAGE_MIMES: [&str; 3] = ["image/png", "image/jpeg", "image/gif"];

/// SVG images reach the agent as their source text (see docs/fidelity.md: why not rasterised).
const SVG_MIME: &str = "image/svg+xml";

/// Bytes of a display's text the agent sees; a longer text shows its head and tail around a
/// marker saying how much was left out.
pub(crate) const DISPLAY_TEXT_BYTES: usize = 20_000;

/// Bytes of one MIME value (as JSON text) kept for history and the notebook export. Bigger
/// values are left out, with a note in the output's metadata; the image in
/// [`OutputItem::image`] is kept whatever its size.
pub(crate) const BUNDLE_VALUE_BYTES: usize = 1024 * 1024;

/// The metadata key of the note naming MIME values left out of a kept bundle.
const NOTE_KEY: &str = "kernel_mcp";

/// A display output from a MIME bundle (`content` of `display_data`, `execute_result` or
/// `update_display_data`): its MIME types, its [`readable_text`], the first image, the
/// display_id, and the bundle as history keeps it ([`DisplayBundle`]).
pub(crate) fn output_item(kind: &str, content: &Value) -> OutputItem {
    let empty = Map::new();
    let data = content["data"].as_object().unwrap_or(&empty);
    let mime_types: Vec<String> = data.keys().cloned().collect();
    let mut text = richest_text(data);
    let image = IMAGE_MIMES.iter().find_map(|m| {
        let b64 = mime_text(data.get(*m)?)?;
        let b64: String = b64.chars().filter(|c| !c.is_whitespace()).collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&b64)
            .map(|v| v.len())
            .unwrap_or(b64.len() * 3 / 4);
        Some(ImageData {
            mime: m.to_string(),
            data: b64,
            bytes,
        })
    });
    if image.is_none()
        && let Some(svg) = data.get(SVG_MIME).and_then(mime_text)
    {
        // An SVG figure (`InlineBackend.figure_formats = ['svg']`): its source is the text
        // the agent reads, after the text/plain (`<Figure size …>`), bounded by the response.
        text = Some(match text {
            Some(t) => format!("{t}\n{svg}"),
            None => svg.into_owned(),
        });
    }
    if text.is_none() && image.is_none() {
        // Never an empty display: say what it holds.
        text = Some(unreadable_description(&mime_types));
    }
    let bundle = kept_bundle(
        data,
        content["metadata"].as_object(),
        image.as_ref().map(|i| i.mime.as_str()),
        text.as_deref(),
    );
    OutputItem {
        kind: kind.to_string(),
        mime_types,
        text,
        image,
        display_id: content["transient"]["display_id"]
            .as_str()
            .map(String::from),
        index: 0,
        bundle: Arc::new(bundle),
    }
}

/// `t`, unless it reads as nothing (blank).
fn readable(t: Cow<'_, str>) -> Option<Cow<'_, str>> {
    (!t.trim().is_empty()).then_some(t)
}

/// The one line an agent reads for a display with no readable text and no image (a widget's
/// view model, a vendor MIME type): its MIME types.
fn unreadable_description(mime_types: &[String]) -> String {
    if mime_types.is_empty() {
        "[an empty display: no MIME data]".into()
    } else {
        format!(
            "[a display with no readable text: {}]",
            mime_types.join(", ")
        )
    }
}

/// [`richest_text`] bounded to [`DISPLAY_TEXT_BYTES`] (head + tail), for summaries.
pub(crate) fn readable_text(data: &Map<String, Value>) -> Option<String> {
    richest_text(data).map(|t| bounded(&t))
}

/// What the agent reads of a MIME bundle: its richest readable form, cleaned of terminal
/// escapes, whole (a response bounds it, see [`bounded`]; an `execute_result`'s text is the
/// run's pageable `result`).
///
/// In order: `text/markdown`; `application/json` pretty-printed; `text/latex`; `text/plain`
/// unless it is a bare `<… object>` placeholder; the text of `text/html`; the placeholder.
/// `None` when the bundle has none of these (an image alone, say). Images are not text: they
/// are in [`OutputItem::image`].
fn richest_text(data: &Map<String, Value>) -> Option<String> {
    // A form that reads as nothing (an empty or styled-only `<div>`, blank text) is no form.
    let text = |mime: &str| data.get(mime).and_then(mime_text).and_then(readable);
    let plain = text("text/plain");
    let (plain, placeholder) = match plain {
        Some(p) if is_placeholder(&p) => (None, Some(p)),
        p => (p, None),
    };
    let chosen = text("text/markdown")
        .or_else(|| data.get("application/json").map(json_text))
        .or_else(|| text("text/latex"))
        .or(plain)
        .or_else(|| text("text/html").and_then(|html| readable(Cow::Owned(html_to_text(&html)))))
        .or(placeholder)?;
    let cleaned = clean_text(&chosen).into_owned();
    (!cleaned.trim().is_empty()).then_some(cleaned)
}

/// The bundle's text/plain as the agent would read it (cleaned), else its
/// [`OutputItem::text`]. For kernels whose values arrive as displays (IRkernel), where the
/// text/plain is the value as the language prints it.
pub(crate) fn plain_text(item: &OutputItem) -> Option<String> {
    item.bundle
        .data
        .get("text/plain")
        .and_then(mime_text)
        .map(|t| clean_text(&t).into_owned())
        .or_else(|| item.text.clone())
}

/// The bytes an output holds in memory: its text, its image's base64, its kept bundle.
pub(crate) fn stored_bytes(item: &OutputItem) -> usize {
    let bundle: usize = item
        .bundle
        .data
        .iter()
        .chain(&item.bundle.metadata)
        .map(|(k, v)| k.len() + value_bytes(v))
        .sum();
    item.text.as_ref().map_or(0, String::len)
        + item.image.as_ref().map_or(0, |i| i.data.len())
        + bundle
}

/// A bare `<IPython.core.display.Markdown object>`-style repr: says nothing of the content.
fn is_placeholder(text: &str) -> bool {
    let t = text.trim();
    t.starts_with('<') && t.ends_with(" object>") && !t.contains('\n')
}

/// An `application/json` value pretty-printed. A string is parsed as JSON first (some kernels
/// send the text); one that does not parse is shown as it is.
fn json_text(value: &Value) -> Cow<'_, str> {
    let parsed;
    let value = match value {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v) => {
                parsed = v;
                &parsed
            }
            Err(_) => return Cow::Borrowed(s),
        },
        v => v,
    };
    Cow::Owned(serde_json::to_string_pretty(value).unwrap_or_default())
}

/// `text` bounded to [`DISPLAY_TEXT_BYTES`]: its head and tail around
/// `[… N bytes of this display omitted …]` when longer.
pub(crate) fn bounded(text: &str) -> String {
    head_tail_with(text, DISPLAY_TEXT_BYTES, |omitted| {
        format!("\n[… {omitted} bytes of this display omitted …]\n")
    })
    .0
}

/// The bundle as history keeps it: every MIME value of at most [`BUNDLE_VALUE_BYTES`] except
/// `image_mime` (kept in [`OutputItem::image`]), and the metadata. Values left out are named
/// with their sizes in `metadata.kernel_mcp` (metadata over the cap is left out the same way);
/// when something was left out and no text/plain is kept, the agent's `text` stands in as
/// text/plain, so the notebook still shows something.
fn kept_bundle(
    data: &Map<String, Value>,
    metadata: Option<&Map<String, Value>>,
    image_mime: Option<&str>,
    text: Option<&str>,
) -> DisplayBundle {
    let mut kept = Map::new();
    let mut omitted = Map::new();
    for (mime, value) in data {
        if Some(mime.as_str()) == image_mime {
            continue;
        }
        let size = value_bytes(value);
        if size > BUNDLE_VALUE_BYTES {
            omitted.insert(mime.clone(), json!(size));
        } else {
            kept.insert(mime.clone(), value.clone());
        }
    }
    let mut metadata = metadata.cloned().unwrap_or_default();
    let metadata_size: usize = metadata.iter().map(|(k, v)| k.len() + value_bytes(v)).sum();
    let metadata_omitted = metadata_size > BUNDLE_VALUE_BYTES;
    if metadata_omitted {
        metadata.clear();
    }
    if !omitted.is_empty() || metadata_omitted {
        if let (false, Some(t)) = (kept.contains_key("text/plain"), text) {
            kept.insert("text/plain".into(), Value::String(t.to_string()));
        }
        let mut note = Map::new();
        note.insert(
            "note".into(),
            json!(format!(
                "kernel-mcp keeps MIME values of at most {BUNDLE_VALUE_BYTES} bytes; larger ones were left out"
            )),
        );
        if !omitted.is_empty() {
            note.insert("omitted_bytes".into(), Value::Object(omitted));
        }
        if metadata_omitted {
            note.insert("omitted_metadata_bytes".into(), json!(metadata_size));
        }
        metadata.insert(NOTE_KEY.into(), Value::Object(note));
    }
    DisplayBundle {
        data: kept,
        metadata,
    }
}

/// HTML reduced to its text: tags dropped, the common entities decoded, blank runs collapsed.
fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let decoded = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    decoded
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A MIME bundle value as text: a string, or a list of strings joined (nbformat style).
fn mime_text(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Array(parts) => Some(Cow::Owned(
            parts.iter().filter_map(|p| p.as_str()).collect(),
        )),
        _ => None,
    }
}

/// ename / evalue / traceback with ANSI escapes removed.
pub(crate) fn error_info(c: &Value) -> ErrorInfo {
    ErrorInfo {
        ename: clean_text(c["ename"].as_str().unwrap_or_default()).into_owned(),
        evalue: clean_text(c["evalue"].as_str().unwrap_or_default()).into_owned(),
        traceback: c["traceback"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|l| l.as_str())
                    .map(|l| clean_text(l).into_owned())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A display output as history keeps it (and the notebook export writes it): the kept bundle
/// with the image put back, and its metadata. An item built without a bundle keeps its text
/// as text/plain.
pub(crate) fn history_output(o: &OutputItem) -> HistoryOutput {
    let mut data = o.bundle.data.clone();
    if let (true, Some(t)) = (data.is_empty(), &o.text) {
        data.insert("text/plain".into(), Value::String(t.clone()));
    }
    if let Some(img) = &o.image {
        data.insert(img.mime.clone(), Value::String(img.data.clone()));
    }
    HistoryOutput {
        kind: o.kind.clone(),
        data,
        metadata: o.bundle.metadata.clone(),
        display_id: o.display_id.clone(),
        is_result: false,
    }
}

#[cfg(test)]
#[path = "display_tests.rs"]
mod tests;
