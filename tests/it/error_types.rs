//! Errors are typed at every seam: no `Result<_, String>` (nor a `FromStr` whose `Err` is a
//! `String`) in `src/` outside the binary's own code (`src/cli/` and `src/main.rs`), test
//! modules included. A failure names each file and line, so the fix is a typed error (a
//! `thiserror` enum, or an error type that already exists) carrying the same message.

use std::path::{Path, PathBuf};

/// The binary's code, where a message for the terminal may stay a `String`.
const EXEMPT: &[&str] = &["src/cli/", "src/main.rs"];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines (1-based) of `text` where a `Result` whose error type is `String` is written, or
/// a `type Err = String;`. Line comments are left out; a `Result` may span lines.
fn string_errors(text: &str) -> Vec<usize> {
    let code: String = text
        .lines()
        .map(|l| match l.trim_start().starts_with("//") {
            true => "\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    let c: Vec<char> = code.chars().collect();
    let line_at = |i: usize| c[..i].iter().filter(|&&ch| ch == '\n').count() + 1;
    let mut out = Vec::new();
    for (start, _) in code.match_indices("Result<") {
        let at = code[..start].chars().count();
        if at > 0 && (c[at - 1].is_alphanumeric() || c[at - 1] == '_') {
            continue;
        }
        let mut args = vec![String::new()];
        let mut depth = 1;
        let mut i = at + "Result<".len();
        while i < c.len() {
            match c[i] {
                '<' => depth += 1,
                '>' if c[i - 1] != '-' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => {
                    args.push(String::new());
                    i += 1;
                    continue;
                }
                _ => {}
            }
            args.last_mut().unwrap().push(c[i]);
            i += 1;
        }
        if args.len() >= 2 && args.last().unwrap().trim() == "String" {
            out.push(line_at(at));
        }
    }
    for (n, l) in code.lines().enumerate() {
        let words: Vec<&str> = l.split_whitespace().collect();
        if words == ["type", "Err", "=", "String;"] {
            out.push(n + 1);
        }
    }
    out.sort();
    out
}

#[test]
fn the_scan_finds_a_string_error_over_lines_and_leaves_other_results_alone() {
    let text = "fn a() -> Result<u8, String> {}\n\
                fn b() -> Option<Result<Vec<u8>,\n    String>> {}\n\
                fn c() -> io::Result<String> {}\n\
                // fn d() -> Result<u8, String>\n\
                fn e() -> Result<String, Error> {}\n\
                fn f(g: impl Fn() -> u8) -> Result<BTreeMap<String, String>, E> {}\n\
                impl FromStr for X {\n    type Err = String;\n}\n";
    assert_eq!(string_errors(text), vec![1, 2, 9]);
}

#[test]
fn no_result_outside_the_cli_has_a_string_for_its_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for path in rust_files(&root.join("src")) {
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        if EXEMPT.iter().any(|e| rel.starts_with(e)) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in string_errors(&text) {
            found.push(format!("{rel}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "a Result whose error is a String (give it a typed error with the same message):\n  {}",
        found.join("\n  ")
    );
}
