//! Tests of `display.rs`: what the agent reads of a MIME bundle, and what history keeps.

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
    let item =
        display(json!({"image/svg+xml": svg, "text/plain": "<Figure size 640x480 with 1 Axes>"}));
    assert!(item.image.is_none());
    assert_eq!(
        item.text.as_deref(),
        Some(format!("<Figure size 640x480 with 1 Axes>\n{svg}").as_str())
    );
    assert_eq!(history_output(&item).data["image/svg+xml"], svg);
    // With a raster image as well, the image is what the agent gets.
    let both = display(json!({"image/svg+xml": svg, "image/png": PNG, "text/plain": "<Figure>"}));
    assert_eq!(both.text.as_deref(), Some("<Figure>"));
}

#[test]
fn an_empty_html_display_reads_as_its_text_plain() {
    // display(HTML('<div style="width:10px;height:10px;background:red"></div>'))
    let item = display(json!({
        "text/plain": "<IPython.core.display.HTML object>",
        "text/html": "<div style=\"width:10px;height:10px;background:red\"></div>",
    }));
    assert_eq!(
        item.text.as_deref(),
        Some("<IPython.core.display.HTML object>")
    );
    // Blank text/plain and empty HTML alone: the MIME types, never nothing.
    let item = display(json!({"text/plain": "  ", "text/html": "<div></div>"}));
    assert_eq!(
        item.text.as_deref(),
        Some("[a display with no readable text: text/html, text/plain]")
    );
}

#[test]
fn a_widget_without_text_reads_as_its_mime_types() {
    let item = display(json!({
        "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2},
    }));
    assert_eq!(
        item.text.as_deref(),
        Some("[a display with no readable text: application/vnd.jupyter.widget-view+json]")
    );
    assert_eq!(
        display(json!({})).text.as_deref(),
        Some("[an empty display: no MIME data]")
    );
    // An image alone needs no words: it is the image.
    assert_eq!(display(json!({"image/png": PNG})).text, None);
}
