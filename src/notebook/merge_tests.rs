use serde_json::{Value, json};

use super::*;
use crate::notebook::edit::{EditOp, apply};

fn nb(cells: &[(&str, &str)]) -> Notebook {
    let cells: Vec<Value> = cells
        .iter()
        .map(|(id, s)| json!({"cell_type": "code", "id": id, "metadata": {}, "source": s, "outputs": [], "execution_count": null}))
        .collect();
    let v = json!({"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5});
    Notebook::parse(v.to_string().as_bytes()).unwrap()
}

fn edited(base: &Notebook, ops: Value) -> Notebook {
    let mut n = base.clone();
    let ops: Vec<EditOp> = serde_json::from_value(ops).unwrap();
    apply(&mut n, &ops).unwrap();
    n
}

fn sources(n: &Notebook) -> Vec<String> {
    n.cells().iter().map(Cell::source).collect()
}

#[test]
fn changes_to_different_cells_merge() {
    let base = nb(&[("a", "1"), ("b", "2"), ("c", "3")]);
    let ours = edited(
        &base,
        json!([{"op": "replace", "id": "a", "source": "ONE"}]),
    );
    let theirs = edited(
        &base,
        json!([{"op": "replace", "id": "c", "source": "THREE"}]),
    );
    let m = merge(&base, &ours, &theirs).unwrap();
    assert_eq!(sources(&m), ["ONE", "2", "THREE"]);
}

#[test]
fn the_same_cell_changed_differently_is_a_conflict_naming_it() {
    let base = nb(&[("a", "1"), ("b", "2")]);
    let ours = edited(
        &base,
        json!([{"op": "replace", "id": "b", "source": "agent"}]),
    );
    let theirs = edited(
        &base,
        json!([{"op": "replace", "id": "b", "source": "person"}]),
    );
    assert_eq!(merge(&base, &ours, &theirs).unwrap_err().cells, vec!["b"]);
}

#[test]
fn outputs_written_while_the_person_edits_the_source_merge() {
    let base = nb(&[("a", "x = 1")]);
    let mut ours = base.clone();
    ours.cells_mut()[0].set_run(
        vec![json!({"output_type": "stream", "name": "stdout", "text": "hi"})],
        Some(3),
    );
    let theirs = edited(
        &base,
        json!([{"op": "replace", "id": "a", "source": "x = 2"}]),
    );
    let m = merge(&base, &ours, &theirs).unwrap();
    assert_eq!(m.cells()[0].source(), "x = 2");
    assert_eq!(m.cells()[0].execution_count(), Some(3));
}

#[test]
fn a_cell_deleted_by_one_side_and_changed_by_the_other_conflicts() {
    let base = nb(&[("a", "1"), ("b", "2")]);
    let ours = edited(&base, json!([{"op": "delete", "id": "b"}]));
    let theirs = edited(
        &base,
        json!([{"op": "replace", "id": "b", "source": "kept"}]),
    );
    assert_eq!(merge(&base, &ours, &theirs).unwrap_err().cells, vec!["b"]);
    let untouched = edited(&base, json!([{"op": "replace", "id": "a", "source": "A"}]));
    let m = merge(&base, &ours, &untouched).unwrap();
    assert_eq!(sources(&m), ["A"]);
}

#[test]
fn cells_added_on_both_sides_keep_their_places() {
    let base = nb(&[("a", "1"), ("b", "2")]);
    let ours = edited(
        &base,
        json!([{"op": "insert", "source": "agent", "after": "a"}]),
    );
    let theirs = edited(
        &base,
        json!([{"op": "insert", "source": "person", "after": "b"}, {"op": "insert", "source": "top", "index": 0}]),
    );
    let m = merge(&base, &ours, &theirs).unwrap();
    assert_eq!(sources(&m), ["top", "1", "agent", "2", "person"]);
}

#[test]
fn a_move_on_one_side_is_kept_and_moves_on_both_conflict() {
    let base = nb(&[("a", "1"), ("b", "2"), ("c", "3")]);
    let ours = edited(&base, json!([{"op": "move", "id": "c", "index": 0}]));
    let theirs = edited(&base, json!([{"op": "replace", "id": "b", "source": "B"}]));
    assert_eq!(
        sources(&merge(&base, &ours, &theirs).unwrap()),
        ["3", "1", "B"]
    );
    let theirs_moved = edited(&base, json!([{"op": "move", "id": "a", "index": 2}]));
    let e = merge(&base, &ours, &theirs_moved).unwrap_err();
    assert_eq!(e.cells, vec![ORDER]);
}

#[test]
fn notebook_metadata_merges_key_by_key() {
    let base = nb(&[("a", "1")]);
    let mut ours = base.clone();
    ours.set_kernel_metadata(
        json!({"name": "python3", "display_name": "P"}),
        json!({"name": "python"}),
    );
    let mut theirs = base.clone();
    let mut top = theirs.top().clone();
    top["metadata"]["toc"] = json!(true);
    theirs = Notebook::from_parts(top, theirs.cells().to_vec());
    let m = merge(&base, &ours, &theirs).unwrap();
    assert_eq!(m.top()["metadata"]["toc"], json!(true));
    assert_eq!(
        m.top()["metadata"]["language_info"]["name"],
        json!("python")
    );
}

#[test]
fn nothing_changed_on_either_side_is_the_base() {
    let base = nb(&[("a", "1"), ("b", "2")]);
    assert_eq!(merge(&base, &base, &base).unwrap(), base);
}
