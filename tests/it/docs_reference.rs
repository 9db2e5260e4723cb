//! The repository documents itself: docs/tools.md describes exactly the tools the server
//! lists, with their parameters and hints, and no file points at planning material outside
//! the repository.

use std::path::Path;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_in_tools_list_is_described_in_docs_tools_md() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tools.md"))
        .expect("docs/tools.md");
    let server = Server::start().await;
    let tools = tokio::time::timeout(CALL_TIMEOUT, server.client().list_all_tools())
        .await
        .expect("tools/list in time")
        .expect("tools/list");
    assert!(!tools.is_empty());
    let missing: Vec<String> = tools
        .iter()
        .map(|t| t.name.to_string())
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "not in docs/tools.md: {missing:?}");
    server.shutdown().await;
}

/// The first backquoted word of a table row (`| \`name\` | …`), if the line is one.
fn row_name(line: &str) -> Option<&str> {
    line.strip_prefix("| `")?.split('`').next()
}

/// The lines of `doc` under the heading `heading` (a whole line), up to the next heading of
/// the same level or above.
fn under<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    let level = heading.split(' ').next().unwrap_or("##").len();
    doc.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| {
            let hashes = l.len() - l.trim_start_matches('#').len();
            !(hashes > 0 && hashes <= level && l[hashes..].starts_with(' '))
        })
        .collect()
}

/// Each `### tool` section's parameters: the names in its `| parameter |` table (none when
/// it has no such table).
fn documented_params(doc: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_table = false;
    for line in doc.lines() {
        if let Some(name) = line.strip_prefix("### ") {
            current = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_insert_with(Vec::new);
            in_table = false;
        } else if line.starts_with("## ") {
            current = None;
        } else if line.starts_with("| parameter |") {
            in_table = true;
        } else if !line.starts_with('|') {
            in_table = false;
        } else if in_table && let (Some(tool), Some(param)) = (&current, row_name(line)) {
            out.get_mut(tool).unwrap().push(param.to_string());
        }
    }
    out
}

/// A hint cell of the annotation table: empty (not set), `true` or `false`.
fn hint(cell: &str) -> Option<bool> {
    match cell.trim() {
        "" => None,
        "true" => Some(true),
        "false" => Some(false),
        other => panic!("a hint cell says {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_tools_md_lists_exactly_the_tools_of_tools_all_with_their_parameters_and_hints() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tools.md"))
        .expect("docs/tools.md");
    let server = Server::start_with_args(&["serve", "--tools", "all"]).await;
    let tools = tokio::time::timeout(CALL_TIMEOUT, server.client().list_all_tools())
        .await
        .expect("tools/list in time")
        .expect("tools/list");
    server.shutdown().await;
    let mut listed: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    listed.sort();

    let mut glance: Vec<String> = under(&doc, "## Tools at a glance")
        .into_iter()
        .filter_map(row_name)
        .map(String::from)
        .collect();
    glance.sort();
    assert_eq!(glance, listed, "\"Tools at a glance\" lists each tool once");

    let params = documented_params(&doc);
    for tool in &tools {
        let name = tool.name.as_ref();
        let mut want: Vec<String> = tool
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        want.sort();
        let mut got = params
            .get(name)
            .unwrap_or_else(|| panic!("docs/tools.md has no `### {name}` section"))
            .clone();
        got.sort();
        assert_eq!(
            got, want,
            "{name}: the parameter table against the input schema"
        );
    }

    let rows: Vec<&str> = under(&doc, "## Tool annotations")
        .into_iter()
        .filter(|l| row_name(l).is_some())
        .collect();
    let mut annotated: Vec<String> = rows
        .iter()
        .filter_map(|l| row_name(l))
        .map(String::from)
        .collect();
    annotated.sort();
    assert_eq!(annotated, listed, "the annotation table has a row per tool");
    for line in rows {
        let name = row_name(line).unwrap();
        let cells: Vec<&str> = line.split('|').skip(2).take(4).collect();
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let a = tool.annotations.clone().unwrap_or_default();
        let want = (
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
        );
        let got = (
            hint(cells[0]),
            hint(cells[1]),
            hint(cells[2]),
            hint(cells[3]),
        );
        assert_eq!(
            got, want,
            "{name}: hints in docs/tools.md against tools/list"
        );
    }
}

#[test]
fn no_tracked_file_refers_to_planning_notes_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output();
    let Some(listed) = listed.ok().filter(|o| o.status.success()) else {
        eprintln!("skipped: not a git checkout (git ls-files failed)");
        return;
    };
    // Spelled in two halves so this file does not match itself.
    let needles = [format!("../{}", "shared"), format!("shared/{}", "notes")];
    let mut hits = Vec::new();
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let Ok(text) = std::fs::read_to_string(root.join(&name)) else {
            continue; // binary or unreadable
        };
        for n in &needles {
            if text.contains(n.as_str()) {
                hits.push(format!("{name}: {n}"));
            }
        }
    }
    assert!(hits.is_empty(), "{hits:#?}");
}
