//! How `read_cells` shows cells to the model: id, type, source, execution count and outputs,
//! each output as text the way `execute` shows a display (stream text; a bundle's richest
//! readable form; an error's name, value and traceback; an image described by type and size,
//! never inlined), every part bounded, and the whole answer bounded by bytes ([`BUDGET`]):
//! cells past it are left for the next read (`next`).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::notebook::Notebook;
use crate::notebook::run::{BatchState, CellState};
use crate::session::RunId;

/// Bytes of cells one `read_cells` answer carries, about (at least one cell always).
pub const BUDGET: usize = 512 * 1024;
/// Bytes of one output's text shown (head and tail).
const OUTPUT_TEXT: usize = 8 * 1024;
/// Bytes of one cell's source shown (head and tail).
const SOURCE_TEXT: usize = 64 * 1024;

/// One cell as `read_cells` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CellView {
    pub index: usize,
    pub id: String,
    pub cell_type: String,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_count: Option<i64>,
    /// Outputs as text (left out when not asked for, and for markdown and raw cells).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<OutputView>>,
    /// The run of this cell in the batch `execute_cells` runs now or ran last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<CellRun>,
}

/// A cell's run in the current or last batch.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CellRun {
    pub run_id: RunId,
    pub status: String,
}

/// One output as text.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OutputView {
    pub output_type: String,
    pub text: String,
}

impl CellView {
    /// The cell as the text block shows it.
    pub fn text(&self) -> String {
        let count = self
            .execution_count
            .map_or(String::new(), |n| format!(" [{n}]"));
        let mut t = format!(
            "--- {} {} ({}){count}\n{}\n",
            self.index, self.id, self.cell_type, self.source
        );
        for o in self.outputs.iter().flatten() {
            t.push_str(&format!("  → {}: {}\n", o.output_type, o.text.trim_end()));
        }
        if let Some(r) = &self.run {
            t.push_str(&format!("  run {} {}\n", r.run_id, r.status));
        }
        t
    }
}

/// The views of `nb`'s cells at `indices`, within [`BUDGET`]; and the index to read from next
/// when the budget cut the list.
pub fn cell_views(
    nb: &Notebook,
    indices: &[usize],
    outputs: bool,
    batch: Option<&BatchState>,
) -> (Vec<CellView>, Option<usize>) {
    let mut out = Vec::new();
    let mut used = 0;
    for &i in indices {
        let view = view(nb, i, outputs, batch);
        let size = serde_json::to_vec(&view).map_or(0, |v| v.len());
        if !out.is_empty() && used + size > BUDGET {
            return (out, Some(i));
        }
        used += size;
        out.push(view);
    }
    (out, None)
}

fn view(nb: &Notebook, i: usize, outputs: bool, batch: Option<&BatchState>) -> CellView {
    let cell = &nb.cells()[i];
    let code = cell.cell_type() == crate::notebook::CellType::Code;
    let run = batch.and_then(|b| {
        b.cells
            .iter()
            .find(|c| c.id == cell.id())
            .and_then(|c| match &c.state {
                CellState::Run { run_id, status } => Some(CellRun {
                    run_id: run_id.clone(),
                    status: status.as_str().to_string(),
                }),
                CellState::Pending => None,
                CellState::Skipped { .. } => None,
            })
    });
    CellView {
        index: i,
        id: cell.id().to_string(),
        cell_type: cell.cell_type().as_str().to_string(),
        source: bounded(&cell.source(), SOURCE_TEXT),
        execution_count: cell.execution_count(),
        outputs: (outputs && code).then(|| cell.outputs().iter().map(output_view).collect()),
        run,
    }
}

/// An nbformat output as text.
fn output_view(o: &Value) -> OutputView {
    let kind = o["output_type"].as_str().unwrap_or("unknown").to_string();
    let text = match kind.as_str() {
        "stream" => joined(&o["text"]),
        "error" => {
            let tb: Vec<String> = o["traceback"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(strip_ansi).collect())
                .unwrap_or_default();
            format!(
                "{}: {}\n{}",
                o["ename"].as_str().unwrap_or(""),
                o["evalue"].as_str().unwrap_or(""),
                tb.join("\n")
            )
        }
        _ => bundle_text(&o["data"]),
    };
    OutputView {
        output_type: kind,
        text: bounded(&text, OUTPUT_TEXT),
    }
}

/// A MIME bundle's richest readable text; an image is described by its type and size.
fn bundle_text(data: &Value) -> String {
    for mime in ["text/markdown", "text/latex", "text/plain"] {
        if let Some(v) = data.get(mime) {
            return joined(v);
        }
    }
    if let Some(v) = data.get("application/json") {
        return serde_json::to_string_pretty(v).unwrap_or_default();
    }
    let Some(map) = data.as_object() else {
        return String::new();
    };
    let described: Vec<String> = map
        .iter()
        .map(|(mime, v)| format!("[{mime}, {} bytes]", joined(v).len()))
        .collect();
    described.join(" ")
}

/// A string, or a list of strings, as one string.
fn joined(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn strip_ansi(s: &str) -> String {
    String::from_utf8_lossy(&strip_ansi_escapes::strip(s)).into_owned()
}

/// `s` cut to about `max` bytes: its head and tail, with the bytes left out said between.
fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut head = max / 2;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - max / 2;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n… [{} bytes left out] …\n{}",
        &s[..head],
        tail - head,
        &s[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_read_as_text_images_are_described_and_long_text_is_cut() {
        let img =
            json!({"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}});
        assert_eq!(output_view(&img).text, "[image/png, 4 bytes]");
        let err = json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["\u{1b}[31mline\u{1b}[0m"]});
        assert_eq!(output_view(&err).text, "E: v\nline");
        let long = "x".repeat(100_000);
        let s = bounded(&long, 1000);
        assert!(
            s.len() < 1100 && s.contains("bytes left out"),
            "{}",
            s.len()
        );
    }
}
