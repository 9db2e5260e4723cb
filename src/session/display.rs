//! Display outputs: what the agent sees of a MIME bundle (`display_data`, `execute_result`,
//! `update_display_data`) and of an `error` message. Spec: "Display Data" and "Execution
//! errors" in <https://jupyter-client.readthedocs.io/en/latest/messaging.html>.

use base64::Engine;
use serde_json::Value;

use super::history::HistoryOutput;
use super::output::clean_text;
use super::types::{ErrorInfo, ImageData, OutputItem};

/// Image MIME types returned as image content, in order of preference.
const IMAGE_MIMES: [&str; 3] = ["image/png", "image/jpeg", "image/gif"];

/// A display output from a MIME bundle: text/plain, the first image, the display_id.
pub(crate) fn output_item(kind: &str, content: &Value) -> OutputItem {
    let data = content["data"].as_object();
    let mime_types: Vec<String> = data
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    let plain = data
        .and_then(|d| d.get("text/plain"))
        .and_then(mime_text)
        .map(|t| clean_text(&t).into_owned());
    // A bare `<IPython.core.display.HTML object>` placeholder says nothing: prefer the HTML
    // or Markdown as text when there is one.
    let placeholder = plain
        .as_deref()
        .is_none_or(|t| t.starts_with('<') && t.ends_with(" object>"));
    let richer = || {
        let d = data?;
        if let Some(html) = d.get("text/html").and_then(mime_text) {
            return Some(html_to_text(&html));
        }
        d.get("text/markdown").and_then(mime_text)
    };
    let text = if placeholder {
        richer().or(plain)
    } else {
        plain
    };
    let image = data.and_then(|d| {
        IMAGE_MIMES.iter().find_map(|m| {
            let b64 = mime_text(d.get(*m)?)?;
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
        })
    });
    OutputItem {
        kind: kind.to_string(),
        mime_types,
        text,
        image,
        display_id: content["transient"]["display_id"]
            .as_str()
            .map(String::from),
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
fn mime_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p.as_str()).collect()),
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

/// A display output as history keeps it (and the notebook export writes it).
pub(crate) fn history_output(o: &OutputItem) -> HistoryOutput {
    let mut data = serde_json::Map::new();
    if let Some(t) = &o.text {
        data.insert("text/plain".into(), Value::String(t.clone()));
    }
    if let Some(img) = &o.image {
        data.insert(img.mime.clone(), Value::String(img.data.clone()));
    }
    HistoryOutput {
        kind: o.kind.clone(),
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn html_only_displays_read_as_their_text() {
        let item = output_item(
            "display_data",
            &json!({"data": {"text/plain": "<IPython.core.display.HTML object>",
                             "text/html": "<b>Total</b>: 3 &lt; 4 &amp; ok"}}),
        );
        assert_eq!(item.text.as_deref(), Some("Total : 3 < 4 & ok"));
        let plain = output_item(
            "display_data",
            &json!({"data": {"text/plain": "42", "text/html": "<i>42</i>"}}),
        );
        assert_eq!(
            plain.text.as_deref(),
            Some("42"),
            "a real text/plain is kept"
        );
    }
}
