//! The agent's side of the comparison: what the agent should see of a cell nbclient
//! recorded, what it saw (both as the fields they are compared by), and the "reply-error"
//! normalisation between them.

use serde_json::{Value, json};

use super::normalise::{Applied, bounded, head_tail, joined, masked, terminal};

/// What the agent should see of a cell nbclient recorded, as the fields it is compared by.
pub(super) fn expected_agent_view(outputs: &[Value], applied: &mut Applied) -> Value {
    let mut streams = [String::new(), String::new()];
    let mut result = Value::Null;
    let mut shown = Vec::new();
    let mut error = Value::Null;
    for o in outputs {
        match o["output_type"].as_str().unwrap_or("") {
            "stream" => {
                let i = usize::from(o["name"] == "stderr");
                streams[i].push_str(&joined(&o["text"], applied));
            }
            "error" => {
                error = json!([
                    terminal(o["ename"].as_str().unwrap_or(""), applied),
                    terminal(o["evalue"].as_str().unwrap_or(""), applied),
                ]);
            }
            kind => {
                let mimes: Vec<String> = o["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone())
                    .collect();
                let plain_only = mimes.iter().all(|m| m == "text/plain");
                if kind == "execute_result" {
                    result = if plain_only {
                        Value::String(terminal(
                            &joined(&o["data"]["text/plain"], applied),
                            applied,
                        ))
                    } else {
                        applied.note("agent-result", true);
                        json!("<rich>")
                    };
                }
                if kind == "display_data" || !plain_only {
                    shown.push(json!(mimes));
                }
            }
        }
    }
    let [stdout, stderr] = streams.map(|s| bounded(&terminal(&s, applied), applied));
    // Every display reads as something (its text, or an image): none is blank.
    json!({"stdout": stdout, "stderr": stderr, "result": result, "outputs": shown, "error": error,
           "blank_outputs": 0})
}

/// The agent's result normalised the same way.
pub(super) fn agent_view(r: &Value, applied: &mut Applied) -> Value {
    let stream = |name: &str, applied: &mut Applied| {
        let text = r[name].as_str().unwrap_or("");
        if r["truncated"][name].is_object() {
            // Compare head and tail only; the marker between them is ours.
            applied.note("bounded", true);
            head_tail(text)
        } else {
            masked(text, applied)
        }
    };
    let result = match (&r["result"], r["outputs"].as_array()) {
        (Value::Null, _) => Value::Null,
        (res, Some(outs)) if outs.iter().any(|o| o["kind"] == "execute_result") => {
            let _ = res;
            json!("<rich>")
        }
        (res, _) => Value::String(masked(res.as_str().unwrap_or(""), applied)),
    };
    let shown: Vec<Value> = r["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["mime_types"].clone())
        .collect();
    let error = if r["error"].is_object() {
        json!([
            masked(r["error"]["ename"].as_str().unwrap_or(""), applied),
            masked(r["error"]["evalue"].as_str().unwrap_or(""), applied),
        ])
    } else {
        Value::Null
    };
    let blank = r["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["image"].is_null() && o["text"].as_str().is_none_or(|t| t.trim().is_empty()))
        .count();
    json!({
        "stdout": stream("stdout", applied),
        "stderr": stream("stderr", applied),
        "result": result,
        "outputs": shown,
        "error": error,
        "blank_outputs": blank,
    })
}

/// The "reply-error" normalisation: the agent's error is left out when nbclient's cell has
/// none and the error's value is on the agent's stderr (the kernel printed it, and sent the
/// error in its execute_reply only).
pub(super) fn reply_error(want: &Value, got: &mut Value, applied: &mut Applied) {
    let evalue = got["error"][1].as_str().unwrap_or_default().to_string();
    let printed = !evalue.is_empty() && got["stderr"].as_str().is_some_and(|e| e.contains(&evalue));
    if want["error"].is_null() && printed {
        got["error"] = Value::Null;
        applied.note("reply-error", true);
    }
}
