//! The comparison's material and its cell-by-cell check: the reference notebooks and their
//! code cells, a session's history exported as a notebook, and the [`Diff`]s between two
//! notebooks' cells (outputs normalised, execution counts).

use std::path::{Path, PathBuf};

use super::normalise::{Applied, coalesced, joined, normal_output};
use crate::common::*;
use serde_json::{Value, json};

pub(crate) fn fidelity_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fidelity")
}

/// A reference notebook's non-empty code cells: (source, outputs, execution_count).
pub(crate) fn code_cells(nb: &Value) -> Vec<(String, Vec<Value>, Value)> {
    let mut none = Applied::default();
    nb["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["cell_type"] == "code")
        .map(|c| {
            (
                joined(&c["source"], &mut none),
                c["outputs"].as_array().cloned().unwrap_or_default(),
                c["execution_count"].clone(),
            )
        })
        .filter(|(s, _, _)| !s.trim().is_empty())
        .collect()
}

/// Export session `session`'s history as a notebook into `dir`; returns its path and JSON.
pub(super) async fn export(server: &Server, session: &str, dir: &Path) -> (PathBuf, Value) {
    let path = dir.join(format!("{session}.ipynb"));
    let r = server
        .call(
            "export_history",
            json!({"session_id": session, "path": path, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    let nb = serde_json::from_str(&std::fs::read_to_string(&path).expect("export"))
        .expect("export is JSON");
    (path, nb)
}

/// A difference found in one cell.
pub(crate) struct Diff {
    pub(crate) notebook: String,
    pub(crate) cell: usize,
    pub(crate) what: String,
}

pub(super) fn compare(
    diffs: &mut Vec<Diff>,
    notebook: &str,
    cell: usize,
    what: &str,
    want: &Value,
    got: &Value,
) {
    if want != got {
        diffs.push(Diff {
            notebook: notebook.to_string(),
            cell,
            what: format!(
                "{what}\n    nbclient: {}\n    ours:     {}",
                serde_json::to_string(want).unwrap_or_default(),
                serde_json::to_string(got).unwrap_or_default()
            ),
        });
    }
}

/// Compare two notebooks' code cells (outputs normalised, execution counts) in order.
pub(crate) fn compare_cells(
    diffs: &mut Vec<Diff>,
    name: &str,
    want: &[(String, Vec<Value>, Value)],
    got: &[(String, Vec<Value>, Value)],
    applied: &mut Applied,
) {
    assert_eq!(got.len(), want.len(), "{name}: one cell per code cell");
    for (i, ((_, want, want_count), (_, got, got_count))) in want.iter().zip(got).enumerate() {
        let mut normal = |outs: &[Value]| -> Value {
            let outs = coalesced(outs, applied);
            Value::Array(outs.iter().map(|o| normal_output(o, applied)).collect())
        };
        let want_outputs = normal(want);
        let got_outputs = normal(got);
        compare(diffs, name, i, "outputs", &want_outputs, &got_outputs);
        compare(diffs, name, i, "execution_count", want_count, got_count);
    }
}

pub(crate) fn reference_notebooks() -> Vec<(String, Value)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fidelity_dir().join("reference"))
        .expect("tests/fidelity/reference")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let nb = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (name, nb)
        })
        .collect()
}
