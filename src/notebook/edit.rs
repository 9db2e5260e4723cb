//! `edit_cells`' operations on a notebook: insert, replace, delete and move cells by id,
//! applied all or nothing. The operations run in order on a copy of the notebook; the first
//! that cannot apply (a cell id that does not exist, two places given for one cell) fails the
//! whole edit with its index and reason, and the notebook is left as it was.

use serde::Deserialize;

use super::model::{Cell, CellType, Notebook, is_valid_id};

/// One edit. Places (`index`, `after`, `before`) are exclusive; none means the end.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum EditOp {
    /// Insert a new cell (code unless `cell_type` says otherwise).
    Insert {
        cell_type: Option<CellType>,
        source: String,
        /// Position (0-based) among the cells as they are when this op applies.
        index: Option<usize>,
        /// Insert after the cell with this id.
        after: Option<String>,
        /// Insert before the cell with this id.
        before: Option<String>,
    },
    /// Replace a cell's source and/or type (id, metadata kept; outputs kept for code).
    Replace {
        id: String,
        source: Option<String>,
        cell_type: Option<CellType>,
    },
    /// Delete a cell.
    Delete { id: String },
    /// Move a cell to a new place.
    Move {
        id: String,
        index: Option<usize>,
        after: Option<String>,
        before: Option<String>,
    },
}

/// Why an edit failed; nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("ops[{op}]: no cell has id {id:?}{}", known_ids(.known))]
    UnknownCell {
        op: usize,
        id: String,
        known: Vec<String>,
    },
    #[error("ops[{op}]: {reason}")]
    Invalid { op: usize, reason: String },
}

fn known_ids(known: &[String]) -> String {
    match known.len() {
        0 => " (the notebook has no cells)".into(),
        n if n <= 20 => format!(" (cells: {})", known.join(", ")),
        n => format!(" ({n} cells; read_cells lists their ids)"),
    }
}

/// What an edit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditOutcome {
    /// The ids of the inserted cells, in the order of their ops.
    pub inserted: Vec<String>,
    /// Ids of cells whose source or type changed.
    pub replaced: Vec<String>,
    pub deleted: Vec<String>,
    pub moved: Vec<String>,
}

/// Apply `ops` to `nb` in order, all or nothing.
///
/// Errors: [`EditError`] naming the first op that cannot apply; `nb` is then unchanged.
pub fn apply(nb: &mut Notebook, ops: &[EditOp]) -> Result<EditOutcome, EditError> {
    let mut work = nb.clone();
    let mut outcome = EditOutcome::default();
    for (i, op) in ops.iter().enumerate() {
        apply_one(&mut work, i, op, &mut outcome)?;
    }
    *nb = work;
    Ok(outcome)
}

fn apply_one(
    nb: &mut Notebook,
    op_index: usize,
    op: &EditOp,
    outcome: &mut EditOutcome,
) -> Result<(), EditError> {
    match op {
        EditOp::Insert {
            cell_type,
            source,
            index,
            after,
            before,
        } => {
            let at = place(nb, op_index, *index, after, before, None)?;
            let id = nb.fresh_id();
            let cell = Cell::new(cell_type.unwrap_or(CellType::Code), id.clone(), source);
            nb.cells_mut().insert(at, cell);
            outcome.inserted.push(id);
        }
        EditOp::Replace {
            id,
            source,
            cell_type,
        } => {
            if source.is_none() && cell_type.is_none() {
                return Err(EditError::Invalid {
                    op: op_index,
                    reason: "replace needs `source`, `cell_type` or both".into(),
                });
            }
            let i = find(nb, op_index, id)?;
            let cell = &mut nb.cells_mut()[i];
            if let Some(s) = source {
                cell.set_source(s);
            }
            if let Some(t) = cell_type {
                cell.set_cell_type(*t);
            }
            outcome.replaced.push(id.clone());
        }
        EditOp::Delete { id } => {
            let i = find(nb, op_index, id)?;
            nb.cells_mut().remove(i);
            outcome.deleted.push(id.clone());
        }
        EditOp::Move {
            id,
            index,
            after,
            before,
        } => {
            let from = find(nb, op_index, id)?;
            let cell = nb.cells_mut().remove(from);
            let at = place(nb, op_index, *index, after, before, Some(id))?;
            nb.cells_mut().insert(at, cell);
            outcome.moved.push(id.clone());
        }
    }
    Ok(())
}

/// The index a cell goes to: `index` (clamped to the end), right after `after`, right before
/// `before`, or the end. `moving`: the id of the cell being moved (it cannot be its own
/// anchor).
fn place(
    nb: &Notebook,
    op: usize,
    index: Option<usize>,
    after: &Option<String>,
    before: &Option<String>,
    moving: Option<&String>,
) -> Result<usize, EditError> {
    let given =
        usize::from(index.is_some()) + usize::from(after.is_some()) + usize::from(before.is_some());
    if given > 1 {
        return Err(EditError::Invalid {
            op,
            reason: "give at most one of `index`, `after` and `before`".into(),
        });
    }
    if let Some(anchor) = after.as_ref().or(before.as_ref())
        && moving == Some(anchor)
    {
        return Err(EditError::Invalid {
            op,
            reason: format!("cell {anchor:?} cannot be placed relative to itself"),
        });
    }
    Ok(match (index, after, before) {
        (Some(i), _, _) => i.min(nb.cells().len()),
        (_, Some(id), _) => find(nb, op, id)? + 1,
        (_, _, Some(id)) => find(nb, op, id)?,
        _ => nb.cells().len(),
    })
}

fn find(nb: &Notebook, op: usize, id: &str) -> Result<usize, EditError> {
    nb.position(id).ok_or_else(|| {
        if !is_valid_id(id) {
            return EditError::Invalid {
                op,
                reason: format!(
                    "{id:?} is not a cell id (1-64 letters, digits, '-' or '_'); read_cells lists the ids"
                ),
            };
        }
        EditError::UnknownCell {
            op,
            id: id.to_string(),
            known: nb.cells().iter().map(|c| c.id().to_string()).collect(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nb(sources: &[&str]) -> Notebook {
        let cells: Vec<_> = sources
            .iter()
            .enumerate()
            .map(|(i, s)| json!({"cell_type": "code", "id": format!("c{i}"), "metadata": {}, "source": s, "outputs": [], "execution_count": null}))
            .collect();
        let text = json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
        Notebook::parse(text.to_string().as_bytes()).unwrap()
    }

    fn ids(nb: &Notebook) -> Vec<&str> {
        nb.cells().iter().map(Cell::id).collect()
    }

    fn ops(v: serde_json::Value) -> Vec<EditOp> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn insert_replace_delete_and_move_apply_in_order_and_answer_the_new_ids() {
        let mut n = nb(&["a", "b", "c"]);
        let out = apply(
            &mut n,
            &ops(json!([
                {"op": "insert", "source": "# head", "cell_type": "markdown", "index": 0},
                {"op": "insert", "source": "x = 1", "after": "c1"},
                {"op": "replace", "id": "c0", "source": "a2"},
                {"op": "delete", "id": "c2"},
                {"op": "move", "id": "c0", "before": "c1"},
            ])),
        )
        .unwrap();
        assert_eq!(out.inserted.len(), 2);
        let (md, x) = (out.inserted[0].as_str(), out.inserted[1].as_str());
        assert_eq!(ids(&n), vec![md, "c0", "c1", x]);
        assert_eq!(n.cells()[0].cell_type(), CellType::Markdown);
        assert_eq!(n.cells()[1].source(), "a2");
        assert_eq!(out.deleted, vec!["c2"]);
    }

    #[test]
    fn one_bad_op_leaves_the_notebook_untouched() {
        let mut n = nb(&["a", "b"]);
        let before = n.clone();
        let e = apply(
            &mut n,
            &ops(json!([
                {"op": "delete", "id": "c0"},
                {"op": "replace", "id": "nope", "source": "x"},
            ])),
        )
        .unwrap_err();
        assert_eq!(n, before);
        assert!(matches!(e, EditError::UnknownCell { op: 1, .. }), "{e}");
        assert!(e.to_string().contains("c1"), "{e}");
    }

    #[test]
    fn a_place_given_twice_or_a_cell_anchored_to_itself_is_refused() {
        let mut n = nb(&["a", "b"]);
        let e = apply(
            &mut n,
            &ops(json!([{"op": "insert", "source": "x", "index": 0, "after": "c0"}])),
        )
        .unwrap_err();
        assert!(e.to_string().contains("at most one"), "{e}");
        let e = apply(
            &mut n,
            &ops(json!([{"op": "move", "id": "c0", "after": "c0"}])),
        )
        .unwrap_err();
        assert!(e.to_string().contains("itself"), "{e}");
    }

    #[test]
    fn changing_a_code_cell_to_markdown_drops_outputs_and_back_gives_empty_ones() {
        let mut n = nb(&["a"]);
        apply(
            &mut n,
            &ops(json!([{"op": "replace", "id": "c0", "cell_type": "markdown"}])),
        )
        .unwrap();
        assert!(!n.cells()[0].fields().contains_key("outputs"));
        apply(
            &mut n,
            &ops(json!([{"op": "replace", "id": "c0", "cell_type": "code"}])),
        )
        .unwrap();
        assert_eq!(n.cells()[0].outputs().len(), 0);
        assert!(n.cells()[0].fields().contains_key("execution_count"));
    }

    #[test]
    fn an_index_past_the_end_appends() {
        let mut n = nb(&["a"]);
        let out = apply(
            &mut n,
            &ops(json!([{"op": "insert", "source": "z", "index": 99}])),
        )
        .unwrap();
        assert_eq!(ids(&n), vec!["c0", out.inserted[0].as_str()]);
    }
}
