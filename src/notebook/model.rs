//! The notebook document: an nbformat 4.x `.ipynb` read into memory, addressed by cell id,
//! and written back the way Jupyter writes it.
//!
//! Every key a cell or the notebook carries is kept, known or not (a person's metadata, a
//! newer minor version's fields, attachments), so a read and a write change only what an edit
//! changed. Cells of a notebook older than 4.5 have no ids in the file: each gets one when it
//! is read (the same rules Jupyter uses: `[a-zA-Z0-9-_]`, 1–64 characters) and the notebook is
//! upgraded to 4.5 when it is next written, as JupyterLab does. Jupyter's own writer
//! (`nbformat.write`) sorts keys, indents by one space, ends with a newline and splits
//! multi-line strings (sources, stream text, textual MIME data) into lists of lines;
//! [`Notebook::to_text`] does the same, so a notebook kernel-mcp writes diffs cleanly against
//! one Jupyter wrote.
//!
//! Format: <https://nbformat.readthedocs.io/en/latest/format_description.html>; cell ids:
//! JEP 62 (<https://jupyter.org/enhancement-proposals/62-cell-id/cell-id.html>).

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

/// The largest notebook read or written: 100 MiB (docs/limits.md).
pub const MAX_NOTEBOOK_BYTES: usize = 100 * 1024 * 1024;

/// Why a file is not a notebook kernel-mcp can work on. The file is never touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("it is not valid JSON ({0}); it may be truncated or not a notebook")]
    NotJson(String),
    #[error("it is not an nbformat notebook ({0})")]
    NotNotebook(String),
    #[error(
        "it is nbformat {0}; kernel-mcp works on nbformat 4. Convert it first: \
         `jupyter nbconvert --to notebook --nbformat 4 FILE`"
    )]
    OldFormat(u64),
    #[error("it is nbformat {0}, newer than the nbformat 4 kernel-mcp knows")]
    NewFormat(u64),
    #[error("cell {index} is not valid: {reason}")]
    BadCell { index: usize, reason: String },
}

/// The three kinds of cell.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    Code,
    Markdown,
    Raw,
}

impl CellType {
    pub fn as_str(self) -> &'static str {
        match self {
            CellType::Code => "code",
            CellType::Markdown => "markdown",
            CellType::Raw => "raw",
        }
    }

    fn parse(s: &str) -> Option<CellType> {
        match s {
            "code" => Some(CellType::Code),
            "markdown" => Some(CellType::Markdown),
            "raw" => Some(CellType::Raw),
            _ => None,
        }
    }
}

/// One cell: its JSON object, every key kept. `cell_type` and `id` are checked when read.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    fields: Map<String, Value>,
}

impl Cell {
    /// A new, empty cell of `kind` with `id` and `source` (code cells: no outputs, no count).
    pub fn new(kind: CellType, id: String, source: &str) -> Cell {
        let mut fields = Map::new();
        fields.insert("cell_type".into(), json!(kind.as_str()));
        fields.insert("id".into(), json!(id));
        fields.insert("metadata".into(), json!({}));
        fields.insert("source".into(), json!(source));
        if kind == CellType::Code {
            fields.insert("execution_count".into(), Value::Null);
            fields.insert("outputs".into(), json!([]));
        }
        Cell { fields }
    }

    pub fn id(&self) -> &str {
        self.fields.get("id").and_then(Value::as_str).unwrap_or("")
    }

    pub fn cell_type(&self) -> CellType {
        self.fields
            .get("cell_type")
            .and_then(Value::as_str)
            .and_then(CellType::parse)
            .unwrap_or(CellType::Raw)
    }

    /// The source as one string (nbformat allows a string or a list of lines).
    pub fn source(&self) -> String {
        joined(self.fields.get("source"))
    }

    pub fn set_source(&mut self, source: &str) {
        self.fields.insert("source".into(), json!(source));
    }

    /// Change the cell's type, keeping id, source, metadata and attachments: a code cell
    /// gains empty outputs and a null count; other cells lose them.
    pub fn set_cell_type(&mut self, kind: CellType) {
        if kind == self.cell_type() {
            return;
        }
        self.fields.insert("cell_type".into(), json!(kind.as_str()));
        if kind == CellType::Code {
            self.fields.insert("execution_count".into(), Value::Null);
            self.fields.insert("outputs".into(), json!([]));
        } else {
            self.fields.remove("execution_count");
            self.fields.remove("outputs");
        }
    }

    /// A code cell's `execution_count`.
    pub fn execution_count(&self) -> Option<i64> {
        self.fields.get("execution_count").and_then(Value::as_i64)
    }

    /// A code cell's outputs (empty for other cells).
    pub fn outputs(&self) -> &[Value] {
        self.fields
            .get("outputs")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Set a code cell's outputs and count (what running it gave).
    pub fn set_run(&mut self, outputs: Vec<Value>, execution_count: Option<i64>) {
        self.fields.insert("outputs".into(), Value::Array(outputs));
        self.fields
            .insert("execution_count".into(), json!(execution_count));
    }

    /// The cell as its JSON object.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// A cell from a JSON object already known to be a cell (a merge of two cells).
    pub(super) fn from_fields(fields: Map<String, Value>) -> Cell {
        Cell { fields }
    }

    fn parse(index: usize, value: Value) -> Result<Cell, ModelError> {
        let bad = |reason: &str| ModelError::BadCell {
            index,
            reason: reason.to_string(),
        };
        let Value::Object(fields) = value else {
            return Err(bad("not a JSON object"));
        };
        match fields.get("cell_type").and_then(Value::as_str) {
            Some(t) if CellType::parse(t).is_some() => {}
            Some(t) => return Err(bad(&format!("unknown cell_type {t:?}"))),
            None => return Err(bad("no cell_type")),
        }
        match fields.get("source") {
            Some(Value::String(_)) => {}
            Some(Value::Array(lines)) if lines.iter().all(Value::is_string) => {}
            _ => return Err(bad("source is not a string or a list of strings")),
        }
        Ok(Cell { fields })
    }
}

/// A notebook: its cells in order and every other top-level key as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Notebook {
    /// `metadata`, `nbformat`, `nbformat_minor` and anything else but `cells`.
    top: Map<String, Value>,
    cells: Vec<Cell>,
}

impl Notebook {
    /// A new, empty nbformat 4.5 notebook for `kernelspec` (`{name, display_name, language}`).
    pub fn empty(kernelspec: Value) -> Notebook {
        let mut top = Map::new();
        top.insert("metadata".into(), json!({ "kernelspec": kernelspec }));
        top.insert("nbformat".into(), json!(4));
        top.insert("nbformat_minor".into(), json!(5));
        Notebook {
            top,
            cells: Vec::new(),
        }
    }

    /// Parse a notebook file's bytes. Cells without an id (nbformat < 4.5) get one.
    ///
    /// Errors: [`ModelError`] saying what is wrong (invalid JSON, not a notebook, nbformat 3,
    /// a malformed cell).
    pub fn parse(bytes: &[u8]) -> Result<Notebook, ModelError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| ModelError::NotJson(e.to_string()))?;
        Notebook::from_value(value)
    }

    /// A notebook from its JSON already parsed (a collaboration room's document read as
    /// JSON), checked and given cell ids as [`Notebook::parse`] does.
    ///
    /// Errors: as [`Notebook::parse`], but for invalid JSON.
    pub fn from_value(value: Value) -> Result<Notebook, ModelError> {
        let Value::Object(mut top) = value else {
            return Err(ModelError::NotNotebook(
                "the top level is not an object".into(),
            ));
        };
        match top.get("nbformat").and_then(Value::as_u64) {
            Some(4) => {}
            Some(n) if n < 4 => return Err(ModelError::OldFormat(n)),
            Some(n) => return Err(ModelError::NewFormat(n)),
            None => return Err(ModelError::NotNotebook("no nbformat number".into())),
        }
        let cells = match top.remove("cells") {
            Some(Value::Array(cells)) => cells,
            _ => return Err(ModelError::NotNotebook("no list of cells".into())),
        };
        if !top.get("metadata").is_some_and(Value::is_object) {
            top.insert("metadata".into(), json!({}));
        }
        let mut parsed = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| Cell::parse(i, c))
            .collect::<Result<Vec<_>, _>>()?;
        assign_missing_ids(&mut parsed);
        Ok(Notebook { top, cells: parsed })
    }

    /// A notebook of these top-level keys (`cells` aside) and cells.
    pub(super) fn from_parts(top: Map<String, Value>, cells: Vec<Cell>) -> Notebook {
        Notebook { top, cells }
    }

    /// Every top-level key but `cells`.
    pub fn top(&self) -> &Map<String, Value> {
        &self.top
    }

    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    pub(super) fn cells_mut(&mut self) -> &mut Vec<Cell> {
        &mut self.cells
    }

    /// The index of the cell with `id`.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.cells.iter().position(|c| c.id() == id)
    }

    /// The notebook's `metadata.kernelspec.name`, if it names one.
    pub fn kernelspec_name(&self) -> Option<&str> {
        self.top
            .get("metadata")?
            .get("kernelspec")?
            .get("name")?
            .as_str()
    }

    /// `metadata.kernelspec` and `metadata.language_info` from a session's kernel.
    pub fn set_kernel_metadata(&mut self, kernelspec: Value, language_info: Value) {
        let meta = self.top.entry("metadata").or_insert_with(|| json!({}));
        if let Value::Object(m) = meta {
            m.insert("kernelspec".into(), kernelspec);
            if language_info.is_object() {
                m.insert("language_info".into(), language_info);
            }
        }
    }

    /// A cell id no cell of this notebook has (8 random hex digits, as JupyterLab makes).
    pub fn fresh_id(&self) -> String {
        let taken: HashSet<&str> = self.cells.iter().map(Cell::id).collect();
        loop {
            let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
            if !taken.contains(id.as_str()) {
                return id;
            }
        }
    }

    /// The file's text as Jupyter writes it: keys sorted, one-space indent, multi-line
    /// strings as lists of lines, a final newline, nbformat 4.5 (cells have ids).
    pub fn to_text(&self) -> String {
        let mut top = self.top.clone();
        let minor = top
            .get("nbformat_minor")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if minor < 5 {
            top.insert("nbformat_minor".into(), json!(5));
        }
        let cells: Vec<Value> = self.cells.iter().map(split_cell).collect();
        top.insert("cells".into(), Value::Array(cells));
        let mut buf = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
        Value::Object(top)
            .serialize(&mut ser)
            .expect("serializing a serde_json::Value to memory cannot fail");
        let mut text = String::from_utf8(buf).expect("serde_json writes UTF-8");
        text.push('\n');
        text
    }
}

/// Give every cell without a valid, unique id one: `cell-N` by position when free, else a
/// random one (ids of a pre-4.5 notebook are stable across reads of the same file).
fn assign_missing_ids(cells: &mut [Cell]) {
    let mut taken: HashSet<String> = HashSet::new();
    let mut needs = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let id = cell.id().to_string();
        if is_valid_id(&id) && taken.insert(id) {
            continue;
        }
        needs.push(i);
    }
    for i in needs {
        let mut id = format!("cell-{}", i + 1);
        while taken.contains(&id) {
            id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        }
        taken.insert(id.clone());
        cells[i].fields.insert("id".into(), json!(id));
    }
}

/// A cell id nbformat accepts: 1–64 of `[a-zA-Z0-9-_]`.
pub fn is_valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// A string or a list of strings as one string.
fn joined(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// MIME types that are not `text/*` but are split into lines all the same (nbformat's
/// `_non_text_split_mimes`).
const SPLIT_MIMES: [&str; 2] = ["application/javascript", "image/svg+xml"];

/// The cell as nbformat writes it: source and multi-line output strings as lists of lines.
fn split_cell(cell: &Cell) -> Value {
    let mut fields = cell.fields.clone();
    if let Some(Value::String(s)) = fields.get("source") {
        let lines = split_lines(s);
        fields.insert("source".into(), lines);
    }
    if let Some(Value::Array(outputs)) = fields.get_mut("outputs") {
        for output in outputs {
            split_output(output);
        }
    }
    Value::Object(fields)
}

fn split_output(output: &mut Value) {
    match output.get("output_type").and_then(Value::as_str) {
        Some("stream") => {
            if let Some(Value::String(s)) = output.get("text") {
                output["text"] = split_lines(s);
            }
        }
        Some("execute_result" | "display_data") => {
            if let Some(Value::Object(data)) = output.get_mut("data") {
                for (mime, value) in data.iter_mut() {
                    let splits = mime.starts_with("text/") || SPLIT_MIMES.contains(&mime.as_str());
                    if let (true, Value::String(s)) = (splits, &*value) {
                        *value = split_lines(s);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Python's `str.splitlines(keepends=True)` as a JSON list: every line boundary Python
/// knows (`\n`, `\r\n`, `\r`, `\v`, `\f`, `\x1c`–`\x1e`, `\x85`, U+2028, U+2029).
pub fn split_lines(s: &str) -> Value {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|(_, n)| *n == '\n') => {
                chars.next();
                i + 2
            }
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}'
            | '\u{2028}' | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(Value::String(s[start..end].to_string()));
        start = end;
    }
    if start < s.len() {
        lines.push(Value::String(s[start..].to_string()));
    }
    Value::Array(lines)
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
