//! The notebook's shape in the shared document, as `jupyter_ydoc`'s `YNotebook` and
//! JupyterLab's `@jupyter/ydoc` write it, read into the project's [`Notebook`] and written
//! from its cells.
//!
//! Roots: `meta`, a map of `nbformat`, `nbformat_minor` and `metadata` (a map); `cells`, an
//! array of cell maps. A cell map holds `id`, `cell_type`, `source` (a shared text),
//! `metadata` (a map), and for code cells `outputs` (an array), `execution_count` and
//! `execution_state` (`"idle"` or `"running"`, shown by JupyterLab as `[*]`; not part of
//! the file); markdown and raw cells may hold `attachments`. Every other key is a plain value.
//! An output is a map of plain values, but a stream output's `text` is a shared text, so a
//! stream grows by appending to it (JupyterLab's `appendStreamOutput`). Older writers put
//! outputs in as plain JSON objects; both read the same.

use serde_json::{Map as JsonMap, Value, json};
use yrs::types::ToJson;
use yrs::{
    Array, ArrayPrelim, ArrayRef, Doc, In, Map, MapPrelim, MapRef, Out, ReadTxn, Text, TextPrelim,
    TextRef, TransactionMut,
};

use super::values::{from_any, from_out, to_any};
use crate::notebook::model::{ModelError, Notebook};

/// The document's two roots.
#[derive(Clone)]
pub struct Roots {
    pub meta: MapRef,
    pub cells: ArrayRef,
}

impl Roots {
    /// The roots of `doc` (defined now, so updates from peers land in them).
    pub fn of(doc: &Doc) -> Roots {
        Roots {
            meta: doc.get_or_insert_map("meta"),
            cells: doc.get_or_insert_array("cells"),
        }
    }
}

/// The document as an nbformat notebook: cells with ids, outputs and counts as the file
/// would hold them (`execution_state` left out).
///
/// Errors: [`ModelError`] when a cell is not one (an unknown `cell_type`, no source).
pub fn snapshot<T: ReadTxn>(txn: &T, roots: &Roots) -> Result<Notebook, ModelError> {
    Notebook::from_value(document(txn, roots, true))
}

/// The cells' ids in order, as [`snapshot`] gives them (a cell without a valid or unique id
/// gets the one the snapshot gives it), read without outputs.
pub fn ids<T: ReadTxn>(txn: &T, roots: &Roots) -> Result<Vec<String>, ModelError> {
    let nb = Notebook::from_value(document(txn, roots, false))?;
    Ok(nb.cells().iter().map(|c| c.id().to_string()).collect())
}

/// The notebook as JSON; `full: false` reads only each cell's id, type and source.
pub fn document<T: ReadTxn>(txn: &T, roots: &Roots, full: bool) -> Value {
    let meta = match roots.meta.to_json(txn) {
        yrs::Any::Map(m) => m,
        _ => Default::default(),
    };
    let num = |k: &str, default: u64| meta.get(k).map(from_any).unwrap_or(json!(default));
    let metadata = meta
        .get("metadata")
        .map(from_any)
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let cells: Vec<Value> = roots
        .cells
        .iter(txn)
        .map(|c| cell_json(txn, &c, full))
        .collect();
    json!({
        "cells": cells,
        "metadata": if full { metadata } else { json!({}) },
        "nbformat": num("nbformat", 4),
        "nbformat_minor": num("nbformat_minor", 5),
    })
}

/// One cell as nbformat JSON.
pub fn cell_json<T: ReadTxn>(txn: &T, cell: &Out, full: bool) -> Value {
    let Out::YMap(map) = cell else {
        return from_out(txn, cell);
    };
    let mut obj = JsonMap::new();
    for (k, v) in map.iter(txn) {
        if full || matches!(k, "id" | "cell_type" | "source") {
            obj.insert(k.to_string(), from_out(txn, &v));
        }
    }
    obj.remove("execution_state");
    let textual = matches!(
        obj.get("cell_type").and_then(Value::as_str),
        Some("markdown" | "raw")
    );
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(JsonMap::is_empty);
    if textual && obj.get("attachments").is_some_and(empty) {
        obj.remove("attachments");
    }
    Value::Object(obj)
}

/// A cell map to insert, from the cell's nbformat JSON: `source` as a shared text,
/// `metadata` as a map, `outputs` as an array of output maps; code cells idle.
pub fn cell_prelim(cell: &JsonMap<String, Value>) -> MapPrelim {
    let mut entries: Vec<(String, In)> = Vec::with_capacity(cell.len() + 1);
    for (k, v) in cell {
        let value: In = match k.as_str() {
            "source" => TextPrelim::new(joined(v)).into(),
            "metadata" => In::Map(map_prelim(v)),
            "outputs" => In::Array(ArrayPrelim::from(
                v.as_array()
                    .map(|o| o.iter().map(output_prelim).collect::<Vec<_>>())
                    .unwrap_or_default(),
            )),
            "execution_state" => continue,
            _ => In::Any(to_any(v)),
        };
        entries.push((k.clone(), value));
    }
    if cell.get("cell_type").and_then(Value::as_str) == Some("code") {
        entries.push(("execution_state".into(), In::Any("idle".into())));
    }
    entries.into_iter().collect()
}

/// An output to insert: a map of plain values, a stream's `text` as a shared text.
pub fn output_prelim(output: &Value) -> In {
    let Value::Object(obj) = output else {
        return In::Any(to_any(output));
    };
    let stream = obj.get("output_type").and_then(Value::as_str) == Some("stream");
    In::Map(
        obj.iter()
            .map(|(k, v)| {
                let value: In = if stream && k == "text" {
                    TextPrelim::new(joined(v)).into()
                } else {
                    In::Any(to_any(v))
                };
                (k.clone(), value)
            })
            .collect(),
    )
}

fn map_prelim(v: &Value) -> MapPrelim {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, x)| (k.clone(), In::Any(to_any(x))))
                .collect()
        })
        .unwrap_or_default()
}

/// A string or a list of strings (nbformat's multi-line strings) as one string.
fn joined(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// The position and map of the cell whose `id` is `id`, else of the cell [`ids`] names so.
pub fn find<T: ReadTxn>(txn: &T, roots: &Roots, id: &str) -> Option<(u32, MapRef)> {
    let at = |i: u32| match roots.cells.get(txn, i) {
        Some(Out::YMap(m)) => Some((i, m)),
        _ => None,
    };
    for (i, cell) in roots.cells.iter(txn).enumerate() {
        if let Out::YMap(m) = cell
            && matches!(m.get(txn, "id"), Some(Out::Any(yrs::Any::String(s))) if &*s == id)
        {
            return Some((i as u32, m));
        }
    }
    let i = ids(txn, roots).ok()?.iter().position(|x| x == id)?;
    at(i as u32)
}

/// A cell's `source` text, if it is one.
pub fn source_text<T: ReadTxn>(txn: &T, cell: &MapRef) -> Option<TextRef> {
    match cell.get(txn, "source") {
        Some(Out::YText(t)) => Some(t),
        _ => None,
    }
}

/// A cell's `outputs` array, made when it has none (or a plain value instead).
pub fn outputs_array(txn: &mut TransactionMut, cell: &MapRef) -> ArrayRef {
    match cell.get(txn, "outputs") {
        Some(Out::YArray(a)) => a,
        _ => cell.insert(txn, "outputs", ArrayPrelim::default()),
    }
}

/// Append `output` to a cell's outputs. A stream output right after one of the same stream
/// (`stdout`, `stderr`) grows that one's text, as Jupyter merges them.
pub fn append_output(txn: &mut TransactionMut, cell: &MapRef, output: &Value) {
    let outputs = outputs_array(txn, cell);
    if output["output_type"] == "stream" && output["text"].is_string() {
        let n = outputs.len(txn);
        if n > 0
            && let Some(Out::YMap(last)) = outputs.get(txn, n - 1)
        {
            let same = |k: &str| matches!(last.get(txn, k), Some(Out::Any(yrs::Any::String(s))) if Some(&*s) == output[k].as_str());
            if same("output_type")
                && same("name")
                && let Some(Out::YText(text)) = last.get(txn, "text")
            {
                let add = output["text"].as_str().unwrap_or_default();
                let end = text.len(txn);
                text.insert(txn, end, add);
                return;
            }
        }
    }
    outputs.push_back(txn, output_prelim(output));
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
