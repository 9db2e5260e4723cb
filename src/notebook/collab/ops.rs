//! Changes the agent makes in a room's document: `edit_cells`' operations and a run's
//! outputs, each in one transaction. A running cell's outputs are brought to the run's as
//! they change ([`sync_outputs`]) by the least change, so a person sees a stream grow, a
//! display appear and an updated display replaced in place, and the cell's final outputs
//! are what the run wrote.
//!
//! An edit runs [`crate::notebook::edit::apply`] on the cells as they are (ids, types and
//! sources), so its rules and errors are the file's; nothing changes when an operation
//! cannot apply, or when it would replace, delete or move a cell someone has their cursor in
//! ([`CollabError::CellBeingEdited`]). The document is then brought to the result the way
//! JupyterLab would make it: cells gone are deleted; a new cell is inserted; a replaced
//! source changes by the characters that differ ([`super::diff`]), so a person's cursor in
//! the cell stays put; a moved cell, or one whose type changed, is deleted and inserted anew
//! with its id, outputs and metadata (Yjs 13, which JupyterLab runs, has no move).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;
use yrs::{Array, Map, Out, Text, TransactionMut};

use super::CollabError;
use super::diff;
use super::schema::{self, Roots};
use super::values;
use crate::notebook::edit::{self, EditOp, EditOutcome};
use crate::notebook::model::{Cell, Notebook};

/// Apply `ops` all or nothing. `editing`: the cells others have their cursor in.
///
/// Errors: [`CollabError::Edit`] (an op that cannot apply), [`CollabError::CellBeingEdited`],
/// [`CollabError::Document`] (the document holds something that is not a cell).
pub fn edit(
    txn: &mut TransactionMut,
    roots: &Roots,
    ops: &[EditOp],
    editing: &BTreeMap<String, Vec<String>>,
) -> Result<EditOutcome, CollabError> {
    for op in ops {
        let id = match op {
            EditOp::Replace { id, .. } | EditOp::Delete { id } | EditOp::Move { id, .. } => id,
            EditOp::Insert { .. } => continue,
        };
        if let Some(by) = editing.get(id) {
            return Err(CollabError::CellBeingEdited {
                cell: id.clone(),
                by: by.join(", "),
            });
        }
    }
    let before = Notebook::from_value(schema::document(txn, roots, false))?;
    let mut after = before.clone();
    let outcome = edit::apply(&mut after, ops)?;
    reconcile(txn, roots, &before, &after);
    Ok(outcome)
}

/// Bring the document's cells (which read as `before`) to `after`.
fn reconcile(txn: &mut TransactionMut, roots: &Roots, before: &Notebook, after: &Notebook) {
    let mut cur: Vec<String> = before.cells().iter().map(|c| c.id().to_string()).collect();
    let keep: HashSet<&str> = after.cells().iter().map(Cell::id).collect();
    for i in (0..cur.len()).rev() {
        if !keep.contains(cur[i].as_str()) {
            roots.cells.remove(txn, i as u32);
            cur.remove(i);
        }
    }
    let old: HashMap<&str, &Cell> = before.cells().iter().map(|c| (c.id(), c)).collect();
    for (i, target) in after.cells().iter().enumerate() {
        let id = target.id();
        let was = old.get(id);
        let retyped = was.is_some_and(|c| c.cell_type() != target.cell_type());
        if cur.get(i).map(String::as_str) == Some(id) && !retyped {
            if was.is_some_and(|c| c.source() != target.source()) {
                set_source(txn, roots, i as u32, &target.source());
            }
            continue;
        }
        let fields = match was {
            None => target.fields().clone(),
            Some(_) => {
                let Some(j) = cur.iter().position(|x| x == id) else {
                    continue;
                };
                let full = roots
                    .cells
                    .get(txn, j as u32)
                    .map(|c| schema::cell_json(txn, &c, true))
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                roots.cells.remove(txn, j as u32);
                cur.remove(j);
                let mut cell = Cell::from_fields(full);
                cell.set_source(&target.source());
                cell.set_cell_type(target.cell_type());
                cell.fields().clone()
            }
        };
        roots
            .cells
            .insert(txn, i as u32, schema::cell_prelim(&fields));
        cur.insert(i, id.to_string());
    }
}

/// Change the source text of the cell at `index` to `new` by the characters that differ.
fn set_source(txn: &mut TransactionMut, roots: &Roots, index: u32, new: &str) {
    let Some(Out::YMap(cell)) = roots.cells.get(txn, index) else {
        return;
    };
    let Some(text) = schema::source_text(txn, &cell) else {
        cell.insert(txn, "source", yrs::TextPrelim::new(new));
        return;
    };
    let old = yrs::GetString::get_string(&text, txn);
    for e in diff::edits(&old, new).iter().rev() {
        if e.delete > 0 {
            text.remove_range(txn, e.at as u32, e.delete as u32);
        }
        if !e.insert.is_empty() {
            text.insert(txn, e.at as u32, &e.insert);
        }
    }
}

/// Where a run's changes go: the cell's map.
fn cell_of(txn: &TransactionMut, roots: &Roots, id: &str) -> Result<yrs::MapRef, CollabError> {
    schema::find(txn, roots, id)
        .map(|(_, m)| m)
        .ok_or_else(|| CollabError::UnknownCell { id: id.to_string() })
}

/// Replace a cell's outputs and execution count (a finished run, or `[]`, `None` to clear).
///
/// Errors: [`CollabError::UnknownCell`].
pub fn set_outputs(
    txn: &mut TransactionMut,
    roots: &Roots,
    id: &str,
    outputs: &[Value],
    count: Option<i64>,
) -> Result<(), CollabError> {
    let cell = cell_of(txn, roots, id)?;
    let array = schema::outputs_array(txn, &cell);
    let n = array.len(txn);
    if n > 0 {
        array.remove_range(txn, 0, n);
    }
    for o in outputs {
        array.push_back(txn, schema::output_prelim(o));
    }
    set_count(txn, &cell, count);
    Ok(())
}

fn set_count(txn: &mut TransactionMut, cell: &yrs::MapRef, count: Option<i64>) {
    let value = match count {
        Some(n) => yrs::Any::from(n),
        None => yrs::Any::Null,
    };
    cell.insert(txn, "execution_count", value);
}

/// Streams longer than this that no longer extend what the document shows (a text cut at
/// the output bound) are not rewritten while a run goes on, only when `whole`.
pub const LIVE_REWRITE_BYTES: usize = 8 * 1024;

/// Bring a cell's outputs to `target` (its run's outputs so far) by the least change: the
/// outputs both hold alike stay, a stream that grew gets the new text appended (as
/// JupyterLab's `appendStreamOutput`), and from the first output that differs (a display
/// updated by its `display_id`, outputs cleared, new ones) the rest is replaced. Without
/// `whole` (the run goes on), a long stream that no longer extends what is shown stays as it
/// is until a later call with `whole`. Returns true when such a stream was left waiting.
///
/// Errors: [`CollabError::UnknownCell`].
pub fn sync_outputs(
    txn: &mut TransactionMut,
    roots: &Roots,
    id: &str,
    target: &[Value],
    whole: bool,
) -> Result<bool, CollabError> {
    let cell = cell_of(txn, roots, id)?;
    let array = schema::outputs_array(txn, &cell);
    let current: Vec<Value> = array.iter(txn).map(|o| values::from_out(txn, &o)).collect();
    let (mut waiting, mut i) = (false, 0);
    let alike = |i: usize| i < current.len() && i < target.len() && current[i] == target[i];
    loop {
        while alike(i) {
            i += 1;
        }
        if i >= current.len() || i >= target.len() {
            break;
        }
        match grown(&current[i], &target[i]) {
            Some(Growth::Appended(tail)) => {
                let Some(Out::YMap(out)) = array.get(txn, i as u32) else {
                    break;
                };
                let Some(Out::YText(text)) = out.get(txn, "text") else {
                    break;
                };
                let end = text.len(txn);
                text.insert(txn, end, tail);
            }
            Some(Growth::Rewritten) if !whole => waiting = true,
            _ => break,
        }
        i += 1;
    }
    if i < current.len() {
        array.remove_range(txn, i as u32, (current.len() - i) as u32);
    }
    for o in target.iter().skip(i) {
        array.push_back(txn, schema::output_prelim(o));
    }
    Ok(waiting)
}

/// How a stream output shown (`was`) became `now`.
enum Growth<'a> {
    /// Its text extends the one shown by this.
    Appended(&'a str),
    /// Its text changed otherwise, and is long (cut at the output bound).
    Rewritten,
}

/// `None` unless `was` and `now` are outputs of the same stream (then: how it changed, or
/// `None` for a short text rewritten, which is replaced at once).
fn grown<'a>(was: &Value, now: &'a Value) -> Option<Growth<'a>> {
    let stream = |v: &Value| v["output_type"] == "stream";
    if !stream(was) || !stream(now) || was["name"] != now["name"] {
        return None;
    }
    let (old, new) = (was["text"].as_str()?, now["text"].as_str()?);
    match new.strip_prefix(old) {
        Some(tail) if !tail.is_empty() => Some(Growth::Appended(tail)),
        Some(_) => None,
        None if new.len() > LIVE_REWRITE_BYTES => Some(Growth::Rewritten),
        None => None,
    }
}

/// Append one output to a cell (a stream's text grows the stream before it).
///
/// Errors: [`CollabError::UnknownCell`].
pub fn append_output(
    txn: &mut TransactionMut,
    roots: &Roots,
    id: &str,
    output: &Value,
) -> Result<(), CollabError> {
    let cell = cell_of(txn, roots, id)?;
    schema::append_output(txn, &cell, output);
    Ok(())
}

/// A code cell's execution state as JupyterLab shows it: `[*]` while running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionState {
    Running,
    Idle,
}

impl ExecutionState {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionState::Running => "running",
            ExecutionState::Idle => "idle",
        }
    }
}

/// Set a cell's execution state, and its count when given.
///
/// Errors: [`CollabError::UnknownCell`].
pub fn set_state(
    txn: &mut TransactionMut,
    roots: &Roots,
    id: &str,
    state: ExecutionState,
    count: Option<Option<i64>>,
) -> Result<(), CollabError> {
    let cell = cell_of(txn, roots, id)?;
    cell.insert(txn, "execution_state", state.as_str());
    if let Some(c) = count {
        set_count(txn, &cell, c);
    }
    Ok(())
}

#[cfg(test)]
#[path = "ops_tests.rs"]
mod tests;
