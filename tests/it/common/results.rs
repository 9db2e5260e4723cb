//! Reading a tool's result: its structured content, text and image blocks, `isError`, the
//! whole result as JSON for messages, and the `status` and error name of an execution.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// `structuredContent` of a result (panics when absent: every tool sets it).
pub fn structured(r: &CallToolResult) -> Value {
    r.structured_content
        .clone()
        .unwrap_or_else(|| panic!("result has no structuredContent: {}", dump(r)))
}

/// All text content blocks, joined by newlines.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The image content blocks: (mimeType, base64 data).
pub fn images(r: &CallToolResult) -> Vec<(String, String)> {
    r.content
        .iter()
        .filter_map(ContentBlock::as_image)
        .map(|i| (i.mime_type.clone(), i.data.clone()))
        .collect()
}

/// `isError` (absent = false).
pub fn is_error(r: &CallToolResult) -> bool {
    r.is_error.unwrap_or(false)
}

/// The whole result as JSON text (for assertions over everything, and messages).
pub fn dump(r: &CallToolResult) -> String {
    serde_json::to_string(r).unwrap_or_else(|e| format!("<unserializable result: {e}>"))
}

/// `result["error"]["ename"]` as a str ("" when absent).
pub fn ename(result: &Value) -> &str {
    result["error"]["ename"].as_str().unwrap_or("")
}

/// `result["status"]` as a str ("" when absent).
pub fn status(result: &Value) -> &str {
    result["status"].as_str().unwrap_or("")
}
