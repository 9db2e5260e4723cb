//! The repository documents itself: every tool the server lists is described in
//! docs/tools.md, and no file points at planning material outside the repository.

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
