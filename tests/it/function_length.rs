//! No function in `src/` is longer than [`MAX_LINES`] lines (from its `fn` line to its closing
//! brace), the fake kernel's and test functions included: a longer one is split where its steps
//! divide. The counter reads Rust text just well enough for this: comments, strings (raw ones
//! too) and character literals are skipped, so braces inside them do not count.
//!
//! Run with `--nocapture` to print the longest functions.

use std::path::{Path, PathBuf};

/// The most lines a function may have.
const MAX_LINES: usize = 100;

/// One function: where it starts and how many lines it spans.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function of `text` with a body (trait method declarations have none).
fn functions(text: &str) -> Vec<Function> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut depth = 0usize;
    // A `fn NAME` whose body has not started: its name, line, and ( [ depth since.
    let mut pending: Option<(String, usize, usize)> = None;
    // Functions whose body is open: name, first line, the brace depth outside the body.
    let mut open: Vec<(String, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        match ch {
            '\n' => line += 1,
            '/' if next == Some('/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if next == Some('*') => {
                i = skip_block_comment(&c, i, &mut line);
                continue;
            }
            '"' => {
                i = skip_string(&c, i + 1, None, &mut line);
                continue;
            }
            'r' | 'b' if starts_raw_string(&c, i) => {
                let mut j = i + 1;
                if c[i] == 'b' {
                    j += 1;
                }
                let mut hashes = 0;
                while c[j] == '#' {
                    hashes += 1;
                    j += 1;
                }
                i = skip_string(&c, j + 1, Some(hashes), &mut line);
                continue;
            }
            '\'' => {
                i = skip_char_literal(&c, i);
                continue;
            }
            '(' | '[' => {
                if let Some(p) = pending.as_mut() {
                    p.2 += 1;
                }
            }
            ')' | ']' => {
                if let Some(p) = pending.as_mut() {
                    p.2 = p.2.saturating_sub(1);
                }
            }
            ';' if pending.as_ref().is_some_and(|p| p.2 == 0) => pending = None,
            '{' => {
                if let Some((name, start, 0)) = pending.take() {
                    open.push((name, start, depth));
                } else if let Some(p) = pending.as_mut() {
                    p.2 += 1;
                }
                depth += 1;
            }
            '}' => {
                if let Some(p) = pending.as_mut() {
                    p.2 = p.2.saturating_sub(1);
                }
                depth = depth.saturating_sub(1);
                if open.last().is_some_and(|f| f.2 == depth) {
                    let (name, start, _) = open.pop().unwrap();
                    out.push(Function {
                        name,
                        line: start,
                        lines: line - start + 1,
                    });
                }
            }
            _ if is_ident(ch) && (i == 0 || !is_ident(c[i - 1])) => {
                let start = i;
                while i < c.len() && is_ident(c[i]) {
                    i += 1;
                }
                let word: String = c[start..i].iter().collect();
                if word == "fn" {
                    let mut j = i;
                    while j < c.len() && c[j].is_whitespace() {
                        j += 1;
                    }
                    let name_start = j;
                    while j < c.len() && is_ident(c[j]) {
                        j += 1;
                    }
                    if j > name_start {
                        pending = Some((c[name_start..j].iter().collect(), line, 0));
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `r"`, `r#"`, `br"`, `br#"`… at `i` (not the end of an identifier such as `for"`).
fn starts_raw_string(c: &[char], i: usize) -> bool {
    if i > 0 && is_ident(c[i - 1]) {
        return false;
    }
    let mut j = i + 1;
    if c[i] == 'b' {
        if c.get(j) != Some(&'r') {
            // `b"…"` is an ordinary string after its `b`; `b'…'` a byte.
            return false;
        }
        j += 1;
    }
    while c.get(j) == Some(&'#') {
        j += 1;
    }
    c.get(j) == Some(&'"')
}

/// Past the string whose text starts at `i`: an ordinary one (`raw` is `None`: backslash
/// escapes) or a raw one closed by `"` and `raw` `#`s.
fn skip_string(c: &[char], mut i: usize, raw: Option<usize>, line: &mut usize) -> usize {
    let hashes = raw.unwrap_or(0);
    while i < c.len() {
        match c[i] {
            '\n' => *line += 1,
            '\\' if raw.is_none() => {
                if c.get(i + 1) == Some(&'\n') {
                    *line += 1;
                }
                i += 2;
                continue;
            }
            '"' if (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) => return i + 1 + hashes,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Past a character literal at `i` (`'a'`, `'\n'`, `'\u{1F}'`), or past the `'` of a lifetime
/// or label.
fn skip_char_literal(c: &[char], i: usize) -> usize {
    match (c.get(i + 1), c.get(i + 2)) {
        (Some('\\'), _) => {
            let mut j = i + 2;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            j + 1
        }
        (Some(_), Some('\'')) => i + 3,
        _ => i + 1,
    }
}

/// Past the (nested) block comment at `i`.
fn skip_block_comment(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut nesting = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            nesting += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            nesting -= 1;
            i += 2;
            if nesting == 0 {
                return i;
            }
        } else {
            if c[i] == '\n' {
                *line += 1;
            }
            i += 1;
        }
    }
    i
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_function_in_src_is_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut long: Vec<(String, Function)> = Vec::new();
    let mut counted = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read a source file");
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        for f in functions(&text) {
            counted += 1;
            if f.lines > MAX_LINES {
                long.push((rel.clone(), f));
            }
        }
    }
    long.sort_by_key(|(_, f)| std::cmp::Reverse(f.lines));
    eprintln!("functions in src/: {counted}; over {MAX_LINES} lines:");
    for (file, f) in &long {
        eprintln!("  {:4}  {file}:{}  {}", f.lines, f.line, f.name);
    }
    assert!(counted > 1000, "the counter found only {counted} functions");
    let over: Vec<String> = long
        .iter()
        .map(|(file, f)| format!("{file}:{} {} ({} lines)", f.line, f.name, f.lines))
        .collect();
    assert!(
        over.is_empty(),
        "functions over {MAX_LINES} lines: split each where its steps divide: {over:#?}"
    );
}

#[test]
fn the_counter_skips_braces_in_strings_comments_and_chars() {
    let text = r####"
trait T {
    fn declared(&self) -> [u8; 4];
}
fn one(x: [u8; 2]) -> Result<(), ()> {
    let s = "}}}"; // }
    let r = r#"{ "}" }"#;
    /* } /* nested } */ */
    let c = '}';
    let q = '\'';
    let l: &'static str = "x";
    fn inner() {}
    Ok(())
}
async fn two<'a>(a: &'a str)
where
    'a: 'static,
{
    let _ = br"}\";
    let _ = b'}';
}
"####;
    let got = functions(text);
    let names: Vec<(&str, usize, usize)> = got
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines))
        .collect();
    assert_eq!(
        names,
        [("inner", 12, 1), ("one", 5, 10), ("two", 15, 7)],
        "{got:#?}"
    );
}
