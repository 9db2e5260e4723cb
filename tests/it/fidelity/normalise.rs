//! The normalisations: every difference between nbclient's outputs and ours that is
//! intended, each applied to both sides before comparing and counted where it changed
//! something ([`Applied`]), and the report of how often each applied.

use std::collections::BTreeMap;

use kernel_mcp::session::clean_text;
use serde_json::{Map, Value, json};

/// Every difference between nbclient's outputs and ours that is intended, applied to both
/// sides before comparing. The report prints this list with how often each applied.
const NORMALISATIONS: [(&str, &str); 8] = [
    (
        "terminal",
        "stream text, tracebacks and error values rendered as a terminal shows them: ANSI escapes removed, `\\r` and `\\b` applied (what the agent reads)",
    ),
    (
        "coalesced",
        "consecutive stream outputs of the same stream joined into one, before terminal rendering (nbclient keeps one output per message; kernel-mcp keeps them as nbformat's coalesce_streams and JupyterLab show them)",
    ),
    (
        "bounded",
        "a stream over 20000 bytes is compared by its head and tail (the agent sees head + tail, the rest is pageable)",
    ),
    (
        "images",
        "raster images compared by MIME type only (the reference leaves their bytes out; PNG bytes are not stable)",
    ),
    (
        "addresses",
        "memory addresses `0x` + 6 or more hex digits masked (they differ per process)",
    ),
    (
        "list-text",
        "nbformat's list-of-lines form of text joined into one string (the same text)",
    ),
    (
        "agent-result",
        "the agent's `result` of a rich execute_result is its richest readable form, so only a text/plain-only Out[] is compared as text",
    ),
    (
        "reply-error",
        "an error the kernel reported only in its execute_reply, printing it on stderr (ipykernel's UsageError for an unknown magic), is the agent's `error`; the notebook has the stderr line only",
    ),
];

/// Counts of each normalisation that changed something.
#[derive(Default)]
pub(crate) struct Applied(pub(super) BTreeMap<&'static str, usize>);

impl Applied {
    pub(super) fn note(&mut self, name: &'static str, changed: bool) {
        if changed {
            *self.0.entry(name).or_default() += 1;
        }
    }
}

/// nbformat text: a string, or a list of strings joined.
pub(super) fn joined(v: &Value, applied: &mut Applied) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            applied.note("list-text", true);
            parts.iter().filter_map(Value::as_str).collect()
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Mask what names a process: memory addresses.
pub(super) fn masked(text: &str, applied: &mut Applied) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let hex = rest[i + 2..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        if hex >= 6 {
            out.push_str("0x…");
            applied.note("addresses", true);
        } else {
            out.push_str(&rest[i..i + 2 + hex]);
        }
        rest = &rest[i + 2 + hex..];
    }
    out.push_str(rest);
    out
}

pub(super) fn terminal(text: &str, applied: &mut Applied) -> String {
    let cleaned = clean_text(text);
    applied.note("terminal", cleaned != text);
    masked(&cleaned, applied)
}

/// `outputs` with consecutive stream outputs of the same stream joined (raw text).
pub(super) fn coalesced(outputs: &[Value], applied: &mut Applied) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(outputs.len());
    for o in outputs {
        if let Some(last) = out.last_mut()
            && o["output_type"] == "stream"
            && last["output_type"] == "stream"
            && last["name"] == o["name"]
        {
            let text = joined(&last["text"], applied) + &joined(&o["text"], applied);
            last["text"] = Value::String(text);
            applied.note("coalesced", true);
            continue;
        }
        out.push(o.clone());
    }
    out
}

/// One output normalised for comparison.
pub(super) fn normal_output(o: &Value, applied: &mut Applied) -> Value {
    let kind = o["output_type"].as_str().unwrap_or("");
    match kind {
        "stream" => json!({
            "output_type": "stream",
            "name": o["name"],
            "text": terminal(&joined(&o["text"], applied), applied),
        }),
        "error" => json!({
            "output_type": "error",
            "ename": terminal(o["ename"].as_str().unwrap_or(""), applied),
            "evalue": terminal(o["evalue"].as_str().unwrap_or(""), applied),
            "traceback": o["traceback"].as_array().into_iter().flatten()
                .map(|l| terminal(&joined(l, applied), applied)).collect::<Vec<_>>(),
        }),
        _ => {
            let mut data = Map::new();
            for (mime, v) in o["data"].as_object().into_iter().flatten() {
                let v = if mime.starts_with("image/") && mime != "image/svg+xml" {
                    applied.note("images", true);
                    json!("<image>")
                } else if v.is_string() || v.is_array() {
                    Value::String(masked(&joined(v, applied), applied))
                } else {
                    v.clone()
                };
                data.insert(mime.clone(), v);
            }
            let metadata = o["metadata"].as_object().cloned().unwrap_or_default();
            let mut n = json!({"output_type": kind, "data": data, "metadata": metadata});
            if kind == "execute_result" {
                n["execution_count"] = o["execution_count"].clone();
            }
            n
        }
    }
}

/// The first and last 2 000 characters of `text`, with a marker between.
pub(super) fn head_tail(text: &str) -> String {
    let head: String = text.chars().take(2000).collect();
    let tail: String = text
        .chars()
        .rev()
        .take(2000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}[…]{tail}")
}

/// The head and tail of a text over the agent's stream bound, else the text.
pub(super) fn bounded(text: &str, applied: &mut Applied) -> String {
    const SHOWN: usize = 20_000;
    if text.len() <= SHOWN {
        return text.to_string();
    }
    applied.note("bounded", true);
    head_tail(text)
}

/// The normalisations, each with how often it changed something.
pub(super) fn normalisations_report(applied: &Applied) -> String {
    let mut text = String::from("normalisations (applied to both sides; docs/fidelity.md):\n");
    for (name, why) in NORMALISATIONS {
        text.push_str(&format!(
            "  {name:<13} {:>5} times  {why}\n",
            applied.0.get(name).copied().unwrap_or(0)
        ));
    }
    text
}
