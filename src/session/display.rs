//! Display outputs: what the agent sees of a MIME bundle (`display_data`, `execute_result`,
//! `update_display_data`) and of an `error` message. Spec: "Display Data" and "Execution
//! errors" in <https://jupyter-client.readthedocs.io/en/latest/messaging.html>.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::history::{HistoryOutput, value_bytes};
use super::output::{clean_text, head_tail_with};
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
        bundle: Arc::new(bundle),
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
    let text = |mime: &str| data.get(mime).and_then(mime_text);
    let plain = text("text/plain");
    let (plain, placeholder) = match plain {
        Some(p) if is_placeholder(&p) => (None, Some(p)),
        p => (p, None),
    };
    let chosen = text("text/markdown")
        .or_else(|| data.get("application/json").map(json_text))
        .or_else(|| text("text/latex"))
        .or(plain)
        .or_else(|| text("text/html").map(|html| Cow::Owned(html_to_text(&html))))
        .or(placeholder)?;
    Some(clean_text(&chosen).into_owned())
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
mod tests {
    use super::*;
    use serde_json::json;

    /// A 1×1 PNG.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    fn display(data: Value) -> OutputItem {
        output_item("display_data", &json!({ "data": data }))
    }

    fn text_of(data: Value) -> Option<String> {
        readable_text(data.as_object().expect("a bundle"))
    }

    #[test]
    fn a_markdown_display_reads_as_its_markdown() {
        // IPython.display.Markdown("# hi\n\nsome *text*")
        let text = text_of(json!({
            "text/plain": "<IPython.core.display.Markdown object>",
            "text/markdown": "# hi\n\nsome *text*",
        }));
        assert_eq!(text.as_deref(), Some("# hi\n\nsome *text*"));
    }

    #[test]
    fn a_json_display_reads_as_pretty_json() {
        // IPython.display.JSON({"a": 1, "b": [1, 2]})
        let item = output_item(
            "display_data",
            &json!({
                "data": {"text/plain": "<IPython.core.display.JSON object>",
                         "application/json": {"a": 1, "b": [1, 2]}},
                "metadata": {"application/json": {"expanded": false, "root": "root"}},
            }),
        );
        assert_eq!(
            item.text.as_deref(),
            Some("{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ]\n}")
        );
        // Sent as a string of JSON: parsed, then pretty-printed; not JSON: shown as it is.
        let text = text_of(json!({"application/json": "{\"a\":[true]}"}));
        assert_eq!(text.as_deref(), Some("{\n  \"a\": [\n    true\n  ]\n}"));
        let text = text_of(json!({"application/json": "not json"}));
        assert_eq!(text.as_deref(), Some("not json"));
    }

    #[test]
    fn a_big_json_display_is_bounded() {
        let rows: Vec<Value> = (0..100_000).map(|i| json!({"row": i})).collect();
        let text = text_of(json!({"application/json": rows})).unwrap();
        assert!(text.len() <= DISPLAY_TEXT_BYTES + 100, "{}", text.len());
        assert!(
            text.starts_with("[\n  {\n    \"row\": 0\n  },"),
            "{}",
            &text[..50]
        );
        assert!(
            text.ends_with("\"row\": 99999\n  }\n]"),
            "{}",
            &text[text.len() - 50..]
        );
        assert!(text.contains("bytes of this display omitted"));
    }

    #[test]
    fn a_latex_display_reads_as_its_latex() {
        // IPython.display.Latex(r"$\alpha^2$")
        let text = text_of(json!({
            "text/plain": "<IPython.core.display.Latex object>",
            "text/latex": "$\\alpha^2$",
        }));
        assert_eq!(text.as_deref(), Some("$\\alpha^2$"));
        // The contract's order puts LaTeX before text/plain (a SymPy expression).
        let text = text_of(json!({"text/plain": "x**2", "text/latex": "$\\displaystyle x^{2}$"}));
        assert_eq!(text.as_deref(), Some("$\\displaystyle x^{2}$"));
    }

    #[test]
    fn the_order_is_markdown_json_latex_plain_html() {
        let all = json!({
            "text/plain": "plain",
            "text/html": "<i>html</i>",
            "text/latex": "latex",
            "application/json": {"j": 1},
            "text/markdown": "markdown",
        });
        let without = |keys: &[&str]| {
            let mut d = all.clone();
            for k in keys {
                d.as_object_mut().unwrap().remove(*k);
            }
            text_of(d)
        };
        assert_eq!(without(&[]).as_deref(), Some("markdown"));
        assert_eq!(
            without(&["text/markdown"]).as_deref(),
            Some("{\n  \"j\": 1\n}")
        );
        assert_eq!(
            without(&["text/markdown", "application/json"]).as_deref(),
            Some("latex")
        );
        assert_eq!(
            without(&["text/markdown", "application/json", "text/latex"]).as_deref(),
            Some("plain")
        );
        assert_eq!(
            without(&[
                "text/markdown",
                "application/json",
                "text/latex",
                "text/plain"
            ])
            .as_deref(),
            Some("html")
        );
    }

    #[test]
    fn a_dataframe_keeps_its_text_plain() {
        let repr = "   a  b\n0  1  x\n1  2  y";
        let text = text_of(json!({
            "text/plain": repr,
            "text/html": "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>x</td></tr></table>",
        }));
        assert_eq!(text.as_deref(), Some(repr));
    }

    #[test]
    fn an_html_only_display_reads_as_text() {
        let text = text_of(json!({"text/html": "<p>Hello <b>world</b></p>\n<p>&lt;3</p>"}));
        assert_eq!(text.as_deref(), Some("Hello world\n<3"));
        let text = text_of(json!({
            "text/plain": "<IPython.core.display.HTML object>",
            "text/html": "<b>Total</b>: 3 &lt; 4 &amp; ok",
        }));
        assert_eq!(text.as_deref(), Some("Total : 3 < 4 & ok"));
    }

    #[test]
    fn a_placeholder_is_kept_only_when_nothing_else_reads() {
        let text = text_of(json!({"text/plain": "<Widget object>", "application/vnd.x+json": {}}));
        assert_eq!(text.as_deref(), Some("<Widget object>"));
        assert_eq!(text_of(json!({"application/vnd.x+json": {}})), None);
    }

    #[test]
    fn an_image_stays_an_image() {
        let item =
            display(json!({"image/png": PNG, "text/plain": "<Figure size 640x480 with 1 Axes>"}));
        let image = item.image.as_ref().unwrap();
        assert_eq!(
            (image.mime.as_str(), image.data.as_str()),
            ("image/png", PNG)
        );
        assert_eq!(image.bytes, 70);
        assert_eq!(
            item.text.as_deref(),
            Some("<Figure size 640x480 with 1 Axes>")
        );
        assert_eq!(item.mime_types, ["image/png", "text/plain"]);
    }

    #[test]
    fn a_5_mb_text_plain_display_is_bounded_with_the_omitted_count() {
        let big = "a".repeat(2_500_000) + &"b".repeat(2_500_000);
        let text = text_of(json!({ "text/plain": big })).unwrap();
        assert!(
            (DISPLAY_TEXT_BYTES..DISPLAY_TEXT_BYTES + 100).contains(&text.len()),
            "{}",
            text.len()
        );
        assert!(text.starts_with(&"a".repeat(10_000)));
        assert!(text.ends_with(&"b".repeat(10_000)));
        assert!(
            text.contains("[… 4980000 bytes of this display omitted …]"),
            "{}",
            &text[9_990..10_060]
        );
    }

    #[test]
    fn the_whole_bundle_is_kept_for_history_with_the_image_once() {
        let item = output_item(
            "execute_result",
            &json!({
                "data": {"text/plain": "<Chart>", "text/html": "<svg/>",
                         "application/json": {"k": [1]}, "image/png": PNG},
                "metadata": {"image/png": {"width": 1}},
            }),
        );
        assert_eq!(
            item.bundle.data.keys().collect::<Vec<_>>(),
            ["application/json", "text/html", "text/plain"]
        );
        let kept = history_output(&item);
        assert_eq!(kept.kind, "execute_result");
        assert_eq!(
            Value::Object(kept.data),
            json!({"text/plain": "<Chart>", "text/html": "<svg/>",
                   "application/json": {"k": [1]}, "image/png": PNG})
        );
        assert_eq!(
            Value::Object(kept.metadata),
            json!({"image/png": {"width": 1}})
        );
        assert!(stored_bytes(&item) >= PNG.len() + "<svg/>".len() + "<Chart>".len() * 2);
    }

    #[test]
    fn values_over_the_cap_are_left_out_with_a_note() {
        let html = "x".repeat(BUNDLE_VALUE_BYTES + 1);
        let plain = "y".repeat(BUNDLE_VALUE_BYTES + 1);
        let item = display(json!({"text/html": html, "text/plain": plain, "text/latex": "$y$"}));
        let kept = history_output(&item);
        assert_eq!(kept.data["text/latex"], "$y$");
        assert!(!kept.data.contains_key("text/html"));
        // The text the agent saw stands in for the text/plain left out.
        assert_eq!(kept.data["text/plain"], "$y$");
        assert_eq!(
            kept.metadata["kernel_mcp"]["omitted_bytes"],
            json!({"text/html": BUNDLE_VALUE_BYTES + 1, "text/plain": BUNDLE_VALUE_BYTES + 1})
        );
        assert!(stored_bytes(&item) < 1000, "{}", stored_bytes(&item));
        // The image itself is kept whatever its size.
        let png = PNG.repeat(BUNDLE_VALUE_BYTES / PNG.len() + 1);
        let kept = history_output(&display(json!({ "image/png": png })));
        assert_eq!(kept.data["image/png"], png.as_str());
        assert!(kept.metadata.is_empty());
    }

    #[test]
    fn an_item_without_a_bundle_keeps_its_text_as_text_plain() {
        let item = OutputItem {
            bundle: Arc::default(),
            ..display(json!({"text/markdown": "# hi", "image/png": PNG}))
        };
        let kept = history_output(&item);
        assert_eq!(
            Value::Object(kept.data),
            json!({"text/plain": "# hi", "image/png": PNG})
        );
    }

    #[test]
    fn irkernel_values_read_as_text_plain() {
        // IRkernel sends `1 + 1` as a display with these four forms.
        let item = display(json!({"text/plain": "[1] 2", "text/html": "2",
                                  "text/markdown": "2", "text/latex": "2"}));
        assert_eq!(item.text.as_deref(), Some("2"));
        assert_eq!(plain_text(&item).as_deref(), Some("[1] 2"));
        let markdown_only = display(json!({"text/markdown": "**x**"}));
        assert_eq!(plain_text(&markdown_only).as_deref(), Some("**x**"));
    }

    #[test]
    fn a_real_text_plain_beats_html() {
        let plain = display(json!({"text/plain": "42", "text/html": "<i>42</i>"}));
        assert_eq!(plain.text.as_deref(), Some("42"));
    }

    #[test]
    fn an_svg_figure_reads_as_its_placeholder_then_its_source() {
        let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\"><!-- title --></svg>";
        let item = display(
            json!({"image/svg+xml": svg, "text/plain": "<Figure size 640x480 with 1 Axes>"}),
        );
        assert!(item.image.is_none());
        assert_eq!(
            item.text.as_deref(),
            Some(format!("<Figure size 640x480 with 1 Axes>\n{svg}").as_str())
        );
        assert_eq!(history_output(&item).data["image/svg+xml"], svg);
        // With a raster image as well, the image is what the agent gets.
        let both =
            display(json!({"image/svg+xml": svg, "image/png": PNG, "text/plain": "<Figure>"}));
        assert_eq!(both.text.as_deref(), Some("<Figure>"));
    }
}
