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
        crate::common::skip("not a git checkout (git ls-files failed)");
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

/// GitHub's anchor of a heading: lower case, spaces as `-`, punctuation but `-` and `_`
/// dropped; a repeated anchor gets `-1`, `-2`….
fn anchors(markdown: &str) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut out = std::collections::BTreeSet::new();
    for line in without_code(markdown, false).lines() {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            continue;
        };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_default();
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// `markdown` with its fenced code blocks blanked out, and its inline code spans when `spans`.
fn without_code(markdown: &str, spans: bool) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' && spans {
                    in_code = !in_code;
                }
                out.push(if in_code || (c == '`' && spans) {
                    ' '
                } else {
                    c
                });
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of the inline links (`[text](target)`) of `markdown`.
fn link_targets(markdown: &str) -> Vec<String> {
    let text = without_code(markdown, true);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves_to_a_file_and_heading() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
    {
        if entry.path().extension().is_some_and(|e| e == "md") {
            pages.push(entry.path());
        }
    }
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read a page");
        let dir = page.parent().unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let shown = format!("{}: {target}", page.strip_prefix(root).unwrap().display());
            if !path.exists() {
                broken.push(format!("{shown} (no such file)"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let markdown = std::fs::read_to_string(&path).unwrap_or_default();
            if !anchors(&markdown).contains(anchor) {
                broken.push(format!("{shown} (no such heading)"));
            }
        }
    }
    assert!(checked > 50, "only {checked} links found");
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}

#[test]
fn the_link_checker_makes_githubs_anchors() {
    let got = anchors(
        "# Title\n## `kernel-mcp console [SESSION] [--kernel K]`\n```\n# not a heading\n```\n## Shared mode: sessions that outlive the client\n## Title\n",
    );
    let want = [
        "kernel-mcp-console-session---kernel-k",
        "shared-mode-sessions-that-outlive-the-client",
        "title",
        "title-1",
    ];
    assert_eq!(got, want.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        link_targets("[a](x.md#y) `[b](not)` [c](#z)"),
        ["x.md#y", "#z"]
    );
}

#[test]
fn the_readme_is_short() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; it says what kernel-mcp is and points to docs/, which hold the rest"
    );
}

/// The text files under `dir`, recursively, but those of installed packages (`node_modules`)
/// and hidden directories (virtual environments).
fn text_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "node_modules" || name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            text_files(&path, out);
        } else if path.extension().is_some_and(|e| {
            ["rs", "py", "md", "toml", "js", "html"]
                .iter()
                .any(|x| e == *x)
        }) {
            out.push(path);
        }
    }
}

/// The code and docs a user gets, which may point only at pages they can read.
const READ_BY_USERS: [&str; 4] = ["src", "tests", "examples", "docs"];

#[test]
fn no_source_test_or_doc_cites_the_planning_design() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in READ_BY_USERS {
        text_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    // Spelled in two halves so this file does not match itself.
    let needles = [format!("DESIGN {}", "§"), format!("shared/{}", "DESIGN")];
    let mut hits = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if needles.iter().any(|needle| line.contains(needle.as_str())) {
                let rel = path.strip_prefix(root).unwrap().display();
                hits.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "cite the page of docs/ that states the rule instead:\n  {}",
        hits.join("\n  ")
    );
}

/// The pages of `docs/` that `text` points at, as (page, heading): `docs/<page>.md`, followed
/// by `, "Heading"` when it names a section. Comment markers are dropped and lines joined
/// first, so a pointer may wrap.
fn doc_pointers(text: &str) -> Vec<(String, Option<String>)> {
    let joined: String = text
        .lines()
        .map(|l| {
            let l = l.trim_start();
            ["//!", "///", "//"]
                .iter()
                .find_map(|m| l.strip_prefix(m))
                .unwrap_or(l)
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for (i, _) in joined.match_indices("docs/") {
        let rest = &joined[i + "docs/".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .collect();
        let Some(after) = rest[name.len()..].strip_prefix(".md") else {
            continue;
        };
        let heading = after
            .strip_prefix(", \"")
            .and_then(|h| h.split_once('"'))
            .map(|(h, _)| h.to_string());
        out.push((format!("{name}.md"), heading));
    }
    out
}

#[test]
fn a_pointer_reads_back_over_lines_with_its_heading() {
    let text = "//! See (docs/semantics.md, \"The shared\n//! service\") and docs/cli.md.\n\
                let _ = root.join(\"docs/tools.md\");";
    assert_eq!(
        doc_pointers(text),
        vec![
            ("semantics.md".into(), Some("The shared service".into())),
            ("cli.md".into(), None),
            ("tools.md".into(), None),
        ]
    );
}

#[test]
fn every_docs_page_the_code_points_at_exists_with_the_heading_it_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples"] {
        text_files(&root.join(dir), &mut files);
    }
    let mut pointers = 0;
    let mut broken = Vec::new();
    files.retain(|p| p.extension().is_some_and(|e| e == "rs" || e == "py"));
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (page, heading) in doc_pointers(&text) {
            pointers += 1;
            let rel = path.strip_prefix(root).unwrap().display();
            let Ok(doc) = std::fs::read_to_string(root.join("docs").join(&page)) else {
                broken.push(format!("{rel}: docs/{page} does not exist"));
                continue;
            };
            let Some(heading) = heading else { continue };
            let found = without_code(&doc, false).lines().any(|l| {
                l.starts_with('#') && l.trim_start_matches('#').trim().starts_with(&heading)
            });
            if !found {
                broken.push(format!("{rel}: docs/{page} has no heading {heading:?}"));
            }
        }
    }
    assert!(pointers > 50, "found only {pointers} pointers into docs/");
    assert!(broken.is_empty(), "{broken:#?}");
}
