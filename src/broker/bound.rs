//! Bounding a tool's result envelope before it reaches the kernel, like every response of
//! kernel-mcp (docs/limits.md): text (text blocks, embedded text and `structuredContent`)
//! up to [`MAX_TEXT_BYTES`], binary data (base64 of images, audio, blobs) up to
//! [`MAX_BINARY_BYTES`], at most [`MAX_BLOCKS`] content blocks. What is cut is said in the
//! envelope's `truncated` field (`{"omitted_bytes": N}`) and where it was cut.

use serde_json::{Value, json};

/// Text in one result (bytes).
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// Base64 data in one result (bytes).
pub const MAX_BINARY_BYTES: usize = 8 * 1024 * 1024;
/// Content blocks in one result.
pub const MAX_BLOCKS: usize = 1000;

/// The envelope with `content` (a list), `structuredContent` (or null) and `isError` (a
/// bool) always present, bounded as the module says.
pub fn bound(mut envelope: Value) -> Value {
    if !envelope.is_object() {
        envelope = json!({});
    }
    let mut omitted: usize = 0;
    let mut text_left = MAX_TEXT_BYTES;
    let mut binary_left = MAX_BINARY_BYTES;
    let obj = envelope.as_object_mut().expect("an object");
    let structured = obj.remove("structuredContent").unwrap_or(Value::Null);
    let size = if structured.is_null() {
        0
    } else {
        serde_json::to_string(&structured).map_or(0, |s| s.len())
    };
    if size > MAX_TEXT_BYTES {
        omitted += size;
        obj.insert("structuredContent".into(), Value::Null);
    } else {
        text_left -= size;
        obj.insert("structuredContent".into(), structured);
    }
    let is_error = obj.get("isError").and_then(Value::as_bool).unwrap_or(false);
    obj.insert("isError".into(), Value::Bool(is_error));
    let mut content = match obj.remove("content") {
        Some(Value::Array(c)) => c,
        _ => Vec::new(),
    };
    if content.len() > MAX_BLOCKS {
        for dropped in content.drain(MAX_BLOCKS..) {
            omitted += serde_json::to_string(&dropped).map_or(0, |s| s.len());
        }
    }
    for block in content.iter_mut() {
        bound_block(block, &mut text_left, &mut binary_left, &mut omitted);
    }
    obj.insert("content".into(), Value::Array(content));
    if omitted > 0 {
        obj.insert("truncated".into(), json!({"omitted_bytes": omitted}));
    }
    envelope
}

fn bound_block(
    block: &mut Value,
    text_left: &mut usize,
    binary_left: &mut usize,
    omitted: &mut usize,
) {
    // Text lives in `text` (text blocks, embedded text resources); data in `data` (image,
    // audio) or `blob` (embedded binary resources).
    let nested = block.get("resource").is_some_and(Value::is_object);
    let target = if nested {
        &mut block["resource"]
    } else {
        &mut *block
    };
    if let Some(Value::String(text)) = target.get_mut("text") {
        if text.len() > *text_left {
            let keep = floor_char_boundary(text, *text_left);
            let cut = text.len() - keep;
            text.truncate(keep);
            text.push_str(&format!("\n[kernel-mcp: {cut} more bytes omitted; a result holds at most {MAX_TEXT_BYTES} bytes of text]"));
            *omitted += cut;
            *text_left = 0;
        } else {
            *text_left -= text.len();
        }
    }
    let mut replace = None;
    for key in ["data", "blob"] {
        let Some(Value::String(data)) = target.get(key) else {
            continue;
        };
        let len = data.len();
        if len > *binary_left {
            let mime = target
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("binary data")
                .to_string();
            *omitted += len;
            replace = Some(json!({
                "type": "text",
                "text": format!("[kernel-mcp: {mime} of {len} base64 bytes omitted; a result holds at most {MAX_BINARY_BYTES} bytes of binary data]"),
            }));
            break;
        }
        *binary_left -= len;
    }
    if let Some(r) = replace {
        *block = r;
    }
}

fn floor_char_boundary(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_envelope_passes_with_its_keys_filled_in() {
        let e = bound(json!({"content": [{"type": "text", "text": "hi"}]}));
        assert_eq!(
            e,
            json!({"content": [{"type": "text", "text": "hi"}], "structuredContent": null, "isError": false})
        );
    }

    #[test]
    fn long_text_and_large_images_are_cut_and_said() {
        let text = "é".repeat(MAX_TEXT_BYTES); // 2 bytes each: twice the limit
        let image = "A".repeat(MAX_BINARY_BYTES + 1);
        let e = bound(json!({"content": [
            {"type": "text", "text": text},
            {"type": "image", "data": image, "mimeType": "image/png"},
        ], "isError": true}));
        let first = e["content"][0]["text"].as_str().unwrap();
        assert!(first.len() < MAX_TEXT_BYTES + 200 && first.contains("more bytes omitted"));
        assert!(
            e["content"][1]["text"]
                .as_str()
                .unwrap()
                .contains("image/png")
        );
        assert!(e["truncated"]["omitted_bytes"].as_u64().unwrap() > MAX_BINARY_BYTES as u64);
        assert_eq!(e["isError"], true);
    }

    #[test]
    fn oversized_structured_content_is_dropped() {
        let big = json!({"x": "y".repeat(MAX_TEXT_BYTES + 1)});
        let e = bound(json!({"content": [], "structuredContent": big}));
        assert!(e["structuredContent"].is_null());
        assert!(e["truncated"]["omitted_bytes"].as_u64().unwrap() > MAX_TEXT_BYTES as u64);
    }
}
