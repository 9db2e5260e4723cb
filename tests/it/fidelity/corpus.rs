//! The corpus test: every reference notebook run cell by cell through kernel-mcp, two at a
//! time, what the agent saw and the export compared with nbclient's outputs; the report
//! (differences and how often each normalisation applied) goes to stderr and
//! `fidelity-report.txt` under cargo's test scratch directory.

use std::path::Path;

use super::agent_view::{agent_view, expected_agent_view, reply_error};
use super::compare::{Diff, code_cells, compare, compare_cells, export, reference_notebooks};
use super::normalise::{Applied, normalisations_report};
use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

/// Run one reference notebook's code cells in a new session, compare what the agent saw and
/// the export with nbclient's outputs; returns the number of code cells.
async fn run_notebook(
    server: &Server,
    name: &str,
    nb: &Value,
    out_dir: &Path,
    applied: &mut Applied,
    diffs: &mut Vec<Diff>,
) -> usize {
    let cwd = tempfile::tempdir().expect("temp dir");
    let session = name.replace("__", "-");
    create_session_with(server, json!({"session_id": session, "cwd": cwd.path()})).await;
    let cells = code_cells(nb);
    for (i, (source, outputs, _)) in cells.iter().enumerate() {
        let r = server.exec(&session, source).await;
        let want = expected_agent_view(outputs, applied);
        let mut got = agent_view(&r, applied);
        reply_error(&want, &mut got, applied);
        compare(diffs, name, i, "agent view", &want, &got);
    }
    let (_, exported) = export(server, &session, out_dir).await;
    compare_cells(diffs, name, &cells, &code_cells(&exported), applied);
    server.destroy(&session).await;
    cells.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_notebooks_run_through_kernel_mcp_as_nbclient_ran_them() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let notebooks = reference_notebooks();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let packages: std::collections::BTreeSet<String> = notebooks
        .iter()
        .map(|(name, _)| name.split("__").next().unwrap_or("").to_string())
        .collect();
    // Two notebooks at a time (one kernel each), alternating between the two halves.
    let half = |parity: usize| {
        let (server, out_dir) = (&server, out_dir.path());
        let mine: Vec<&(String, Value)> = notebooks
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == parity)
            .map(|(_, nb)| nb)
            .collect();
        async move {
            let mut applied = Applied::default();
            let mut diffs = Vec::new();
            let mut cells_total = 0;
            for (name, nb) in mine {
                cells_total +=
                    run_notebook(server, name, nb, out_dir, &mut applied, &mut diffs).await;
            }
            (applied, diffs, cells_total)
        }
    };
    let ((mut applied, mut diffs, even), (odd_applied, odd_diffs, odd)) =
        tokio::join!(half(0), half(1));
    for (name, n) in odd_applied.0 {
        *applied.0.entry(name).or_default() += n;
    }
    diffs.extend(odd_diffs);
    diffs.sort_by(|a, b| (&a.notebook, a.cell).cmp(&(&b.notebook, b.cell)));
    let cells_total = even + odd;
    server.shutdown().await;

    let differing: std::collections::BTreeSet<(String, usize)> =
        diffs.iter().map(|d| (d.notebook.clone(), d.cell)).collect();
    let bad_notebooks: std::collections::BTreeSet<&String> =
        differing.iter().map(|(n, _)| n).collect();
    let mut report = format!(
        "fidelity: {} notebooks from {} packages ({}), {} code cells; {} notebooks and {} cells differ\n",
        notebooks.len(),
        packages.len(),
        packages.iter().cloned().collect::<Vec<_>>().join(", "),
        cells_total,
        bad_notebooks.len(),
        differing.len()
    );
    report.push_str(&normalisations_report(&applied));
    for d in &diffs {
        report.push_str(&format!(
            "DIFF {} cell {}: {}\n",
            d.notebook, d.cell, d.what
        ));
    }
    eprint!("{report}");
    // Kept where cargo keeps test scratch files, for reading after a passing run too.
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fidelity-report.txt");
    let _ = std::fs::write(&file, &report);
    eprintln!("(report written to {})", file.display());
    assert!(notebooks.len() >= 20 && cells_total >= 100 && packages.len() >= 5);
    assert!(diffs.is_empty(), "{} differences (above)", diffs.len());
}
