//! Three-way merge of a notebook, cell by cell: what kernel-mcp last read or wrote (`base`),
//! the agent's change of it (`ours`), and the file as it is now (`theirs`: a person saved it
//! from JupyterLab, an editor, git).
//!
//! Cells are matched by id. Within a cell each key (`source`, `outputs`, `execution_count`,
//! `metadata`, …) merges on its own: a side that left a key as it was takes the other side's
//! value, so a person editing a cell's source while the agent writes its outputs merges
//! cleanly. A cell changed in the same key differently by both, or changed by one side and
//! deleted by the other, is a conflict, named by its id. Cells added on either side are kept,
//! after the nearest cell that precedes them on their side. The order of the common cells
//! follows the side that changed it; both changing it is a conflict. The notebook's
//! `metadata` merges key by key the same way; other top-level keys take `theirs`.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::model::{Cell, Notebook};

/// The merge could not be made: these cells (or `"(cell order)"`, `"(metadata)"`) were
/// changed differently on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub cells: Vec<String>,
}

/// What the order conflict is named in [`Conflict::cells`].
pub const ORDER: &str = "(cell order)";
/// What a metadata conflict is named in [`Conflict::cells`].
pub const METADATA: &str = "(metadata)";

/// Merge `ours` and `theirs`, both made from `base`.
///
/// Errors: [`Conflict`] naming what both sides changed differently.
pub fn merge(base: &Notebook, ours: &Notebook, theirs: &Notebook) -> Result<Notebook, Conflict> {
    let b = by_id(base);
    let o = by_id(ours);
    let t = by_id(theirs);
    let mut conflicts = Vec::new();
    let mut merged: HashMap<&str, Cell> = HashMap::new();
    let ids: Vec<&str> = ours
        .cells()
        .iter()
        .chain(theirs.cells())
        .chain(base.cells())
        .map(Cell::id)
        .collect();
    let mut seen = HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            continue;
        }
        match merge_cell(b.get(id), o.get(id), t.get(id)) {
            Ok(Some(cell)) => {
                merged.insert(id, cell);
            }
            Ok(None) => {}
            Err(()) => conflicts.push(id.to_string()),
        }
    }
    let order = merge_order(base, ours, theirs, &merged);
    if order.is_none() {
        conflicts.push(ORDER.to_string());
    }
    let metadata = merge_maps(
        base.top().get("metadata"),
        ours.top().get("metadata"),
        theirs.top().get("metadata"),
    );
    if metadata.is_none() {
        conflicts.push(METADATA.to_string());
    }
    if !conflicts.is_empty() {
        return Err(Conflict { cells: conflicts });
    }
    let cells = order
        .unwrap_or_default()
        .into_iter()
        .filter_map(|id| merged.remove(id.as_str()))
        .collect();
    let mut top = theirs.top().clone();
    if let Some(m) = metadata {
        top.insert("metadata".into(), Value::Object(m));
    }
    Ok(Notebook::from_parts(top, cells))
}

fn by_id(nb: &Notebook) -> HashMap<&str, &Cell> {
    nb.cells().iter().map(|c| (c.id(), c)).collect()
}

/// One cell's merge: `Ok(None)` when it is deleted, `Err` on a conflict.
fn merge_cell(b: Option<&&Cell>, o: Option<&&Cell>, t: Option<&&Cell>) -> Result<Option<Cell>, ()> {
    match (b, o, t) {
        (_, Some(o), None) if b.is_none() => Ok(Some((*o).clone())),
        (_, None, Some(t)) if b.is_none() => Ok(Some((*t).clone())),
        (None, Some(o), Some(t)) => (o == t).then(|| Some((*o).clone())).ok_or(()),
        (Some(b), Some(o), Some(t)) => {
            let fields = merge_maps(
                Some(&Value::Object(b.fields().clone())),
                Some(&Value::Object(o.fields().clone())),
                Some(&Value::Object(t.fields().clone())),
            )
            .ok_or(())?;
            Ok(Some(Cell::from_fields(fields)))
        }
        // Deleted by us: fine unless they changed it.
        (Some(b), None, Some(t)) => (b == t).then_some(None).ok_or(()),
        // Deleted by them: fine unless we changed it.
        (Some(b), Some(o), None) => (b == o).then_some(None).ok_or(()),
        _ => Ok(None),
    }
}

/// Key-by-key three-way merge of two JSON objects (a missing object is empty); `None` on a
/// conflict.
fn merge_maps(
    b: Option<&Value>,
    o: Option<&Value>,
    t: Option<&Value>,
) -> Option<Map<String, Value>> {
    let empty = Map::new();
    let obj = |v: Option<&Value>| {
        v.and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let (b, o, t) = (obj(b), obj(o), obj(t));
    let mut out = Map::new();
    let keys: HashSet<&String> = b.keys().chain(o.keys()).chain(t.keys()).collect();
    for key in keys {
        let (bv, ov, tv) = (b.get(key), o.get(key), t.get(key));
        let pick = if ov == bv {
            tv
        } else if tv == bv || ov == tv {
            ov
        } else {
            return None;
        };
        if let Some(v) = pick {
            out.insert(key.clone(), v.clone());
        }
    }
    Some(out)
}

/// The merged order of the cells in `merged`, or `None` when both sides reordered the cells
/// they share with `base`.
fn merge_order(
    base: &Notebook,
    ours: &Notebook,
    theirs: &Notebook,
    merged: &HashMap<&str, Cell>,
) -> Option<Vec<String>> {
    let in_all: HashSet<&str> = {
        let o: HashSet<&str> = ours.cells().iter().map(Cell::id).collect();
        let t: HashSet<&str> = theirs.cells().iter().map(Cell::id).collect();
        base.cells()
            .iter()
            .map(Cell::id)
            .filter(|id| o.contains(id) && t.contains(id))
            .collect()
    };
    let common = |nb: &Notebook| -> Vec<String> {
        nb.cells()
            .iter()
            .map(Cell::id)
            .filter(|id| in_all.contains(id))
            .map(str::to_string)
            .collect()
    };
    let (cb, co, ct) = (common(base), common(ours), common(theirs));
    let (skeleton, other) = match (co != cb, ct != cb) {
        (true, true) if co != ct => return None,
        (true, _) => (ours, theirs),
        _ => (theirs, ours),
    };
    let mut order: Vec<String> = skeleton
        .cells()
        .iter()
        .map(|c| c.id().to_string())
        .filter(|id| merged.contains_key(id.as_str()))
        .collect();
    // Cells only the other side has, each after its nearest predecessor there.
    let mut anchor: Option<String> = None;
    for cell in other.cells() {
        let id = cell.id();
        if order.iter().any(|x| x == id) {
            anchor = Some(id.to_string());
            continue;
        }
        if !merged.contains_key(id) {
            continue;
        }
        let at = match &anchor {
            Some(a) => order
                .iter()
                .position(|x| x == a)
                .map_or(order.len(), |i| i + 1),
            None => 0,
        };
        order.insert(at, id.to_string());
        anchor = Some(id.to_string());
    }
    Some(order)
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
