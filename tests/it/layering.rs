//! The layers of `src/` as the code has them, counted over the paths one module names of
//! another (`use` lines and paths written inline: `crate::…`, `super::…`, `self::…`, and a
//! child module's own name): the session layer stays under 35 % of `src/` lines, no module
//! imports from a layer above its own, and no modules import each other in a cycle. A module's
//! references to its own parent or children (re-exports, `super::Type`) are containment, not
//! edges. Test modules (`#[cfg(test)] mod tests`) are not counted.
//!
//! `src/lib.rs`'s list of layers is this test's [`LAYERS`] (the same modules, in the same
//! order). Inside `kernel/`, no module names an item of `kernel/mod.rs` (its own or one it
//! re-exports): children import from the module that defines what they use (`types.rs` for
//! the shared types), and `mod.rs` re-exports for outside users.
//!
//! Run with `--nocapture` to print the figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first; a module may name modules of its own layer or below. `src/lib.rs`
/// lists them top to bottom, the binary's (`cli`, and `main.rs` as "") aside.
const LAYERS: [&[&str]; 11] = [
    &["wire"],
    &[
        "artifacts",
        "config",
        "instance",
        "memory",
        "principal",
        "secrets",
        "telemetry",
        "tls",
        "trust",
    ],
    &["kernel"],
    &["session"],
    &["broker", "registry"],
    &["ops"],
    &["notebook"],
    &["auth"],
    &["jupyter", "mcp"],
    &["service"],
    &["cli", ""],
];

type Module = Vec<String>;

/// Every module of `src/` (the fake kernel's binary aside) and its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path != src.join("bin") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts, path);
        }
    }
    out
}

/// The longest prefix of `path` that is a module.
fn resolve(mods: &BTreeMap<Module, PathBuf>, path: &[String]) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| mods.contains_key(m))
}

/// `text` without comments and without the `#[cfg(test)] mod tests` block at its end.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifier paths in `code`: `a::b::C` as `["a", "b", "C"]`; a group `a::{b, c::D}` as
/// `a::b` and `a::c::D`. A path starts where no identifier or `::` comes just before.
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = ident(bytes[i]) && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        i = path_at(code, i, Vec::new(), &mut out);
    }
    out.retain(|p| p.len() > 1);
    out
}

fn ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Read the path that starts at `i` (after `prefix`) into `out`; returns where it ends.
fn path_at(code: &str, mut i: usize, mut segs: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let bytes = code.as_bytes();
    loop {
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        if i > start {
            segs.push(code[start..i].to_string());
        }
        if !code[i..].starts_with("::") {
            break;
        }
        i += 2;
        if code[i..].starts_with('{') {
            // A group: each item continues this path.
            i += 1;
            loop {
                while i < bytes.len() && (bytes[i] as char).is_whitespace() {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return i + 1;
                }
                if bytes[i] == b',' {
                    i += 1;
                    continue;
                }
                if ident(bytes[i]) {
                    i = path_at(code, i, segs.clone(), out);
                } else {
                    i += 1;
                }
            }
        }
        if i >= bytes.len() || !ident(bytes[i]) {
            break;
        }
    }
    if segs.last().is_some_and(|s| s == "self") {
        segs.pop();
    }
    out.push(segs);
    i
}

/// The full paths `module` names (`crate::…`, `self::…`, `super::…`, and paths through its
/// own children), from the crate root.
fn full_paths(mods: &BTreeMap<Module, PathBuf>, module: &Module, code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for segs in paths(code) {
        let (base, rest): (Module, &[String]) = match segs[0].as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (module.clone(), &segs[1..]),
            "super" => {
                let mut base = module.clone();
                base.pop();
                let mut rest = &segs[1..];
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            child => {
                let mut m = module.clone();
                m.push(child.to_string());
                if !mods.contains_key(&m) {
                    continue;
                }
                (module.clone(), &segs[..])
            }
        };
        let mut full = base;
        full.extend(rest.iter().cloned());
        out.push(full);
    }
    out
}

/// The modules `module` names, its own parent and children left out.
fn references(mods: &BTreeMap<Module, PathBuf>, module: &Module, code: &str) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    for full in full_paths(mods, module, code) {
        let Some(target) = resolve(mods, &full) else {
            continue;
        };
        let family = target.starts_with(module) || module.starts_with(&target);
        if !family {
            out.insert(target);
        }
    }
    out
}

/// The paths by which a module below `parent` names an item of `parent`'s own file (not one
/// of its modules), as `module: path`.
fn imports_from_parent_file(mods: &BTreeMap<Module, PathBuf>, parent: &Module) -> Vec<String> {
    let mut found = Vec::new();
    for (module, path) in mods {
        if module.len() <= parent.len() || !module.starts_with(parent) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(path).expect("read a module"));
        for full in full_paths(mods, module, &code) {
            if full.len() > parent.len() && resolve(mods, &full).as_ref() == Some(parent) {
                found.push(format!("{}: {}", module.join("/"), full.join("::")));
            }
        }
    }
    found
}

fn layer(m: &Module) -> usize {
    let top = m.first().map(String::as_str).unwrap_or("");
    LAYERS
        .iter()
        .position(|l| l.contains(&top))
        .unwrap_or_else(|| panic!("module {m:?} is in no layer: add it to LAYERS"))
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State, v: &Module) {
        let n = s.index.len();
        s.index.insert(v.clone(), n);
        s.low.insert(v.clone(), n);
        s.stack.push(v.clone());
        let next: Vec<Module> = s.edges.get(v).into_iter().flatten().cloned().collect();
        for w in next {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                s.found.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn the_session_layer_is_small_nothing_imports_upwards_and_no_modules_import_in_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut lines: BTreeMap<String, usize> = BTreeMap::new();
    for (module, path) in &mods {
        let text = std::fs::read_to_string(path).expect("read a module");
        *lines
            .entry(module.first().cloned().unwrap_or_default())
            .or_default() += text.lines().count();
        edges.insert(module.clone(), references(&mods, module, &code_of(&text)));
    }
    let total: usize = lines.values().sum();
    let share = |top: &str| 100.0 * lines.get(top).copied().unwrap_or(0) as f64 / total as f64;
    let name = |m: &Module| m.join("/");
    eprintln!("src/ lines (src/bin aside): {total}");
    for (top, n) in &lines {
        eprintln!(
            "  {:10} {n:6} {:5.1} %",
            if top.is_empty() { "(root)" } else { top },
            share(top)
        );
    }
    eprintln!(
        "modules: {}, edges between modules: {}",
        mods.len(),
        edges.values().map(BTreeSet::len).sum::<usize>()
    );
    let upward: Vec<String> = edges
        .iter()
        .flat_map(|(a, bs)| bs.iter().map(move |b| (a, b)))
        .filter(|(a, b)| layer(b) > layer(a))
        .map(|(a, b)| format!("{} -> {}", name(a), name(b)))
        .collect();
    let cycles: Vec<String> = cycles(&edges)
        .iter()
        .map(|c| c.iter().map(name).collect::<Vec<_>>().join(" "))
        .collect();
    eprintln!("upward imports: {upward:?}\ncycles: {cycles:?}");
    assert!(
        share("session") < 35.0,
        "session/ is {:.1} % of src/",
        share("session")
    );
    assert!(
        upward.is_empty(),
        "imports from a lower layer up: {upward:#?}"
    );
    assert!(
        cycles.is_empty(),
        "modules importing each other: {cycles:#?}"
    );
}

#[test]
fn no_module_inside_kernel_imports_from_kernel_mod_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let found = imports_from_parent_file(&mods, &vec!["kernel".to_string()]);
    assert!(
        found.is_empty(),
        "modules inside kernel/ naming items of kernel/mod.rs (import them from the module that defines them): {found:#?}"
    );
}

#[test]
fn the_counter_sees_each_kind_of_path() {
    let mut mods = BTreeMap::new();
    for m in [
        vec!["a"],
        vec!["a", "child"],
        vec!["b"],
        vec!["b", "x"],
        vec!["c"],
    ] {
        mods.insert(
            m.iter().map(|s| s.to_string()).collect::<Module>(),
            PathBuf::new(),
        );
    }
    let m = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Module>();
    let code = "use crate::b::x::Thing;\nfn f() { super::c::go(); child::y(); crate::a::Own; }";
    let got = references(&mods, &m(&["a"]), code);
    assert_eq!(
        got,
        BTreeSet::from([m(&["b", "x"]), m(&["c"])]),
        "a sibling through super, not the module's own children or itself"
    );
    let got = references(
        &mods,
        &m(&["b", "x"]),
        "use super::super::c::Z; fn g() { std::mem::drop(1) }",
    );
    assert_eq!(got, BTreeSet::from([m(&["c"])]));
    let code = code_of("// crate::c::X\nfn h() {}\n#[cfg(test)]\nmod tests { use crate::c::Y; }");
    assert!(references(&mods, &m(&["a"]), &code).is_empty());
    let got = references(
        &mods,
        &m(&["c"]),
        "use crate::{a::child::{self, K}, b::{x, Y}};",
    );
    assert_eq!(
        got,
        BTreeSet::from([m(&["a", "child"]), m(&["b"]), m(&["b", "x"])])
    );
}

/// The modules of each bullet of `src/lib.rs`'s layer list (`- [`a`], [`b`]: …`), top first.
fn documented_layers(lib: &str) -> Vec<BTreeSet<String>> {
    let doc: Vec<&str> = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").trim_start())
        .collect();
    let start = doc
        .iter()
        .position(|l| l.starts_with("Layers, top to bottom"))
        .expect("src/lib.rs has a paragraph starting \"Layers, top to bottom\"");
    doc[start..]
        .iter()
        .skip_while(|l| !l.starts_with("- "))
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("- "))
        .map(|l| {
            let names = l[2..].split(':').next().unwrap_or_default();
            names
                .split(',')
                .map(|n| {
                    n.trim()
                        .trim_matches(|c| matches!(c, '[' | ']' | '`'))
                        .to_string()
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_layer_list_in_lib_rs_is_the_order_this_test_enforces() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("read src/lib.rs");
    let documented = documented_layers(&lib);
    let enforced: Vec<BTreeSet<String>> = LAYERS
        .iter()
        .rev()
        .map(|l| {
            l.iter()
                .filter(|m| !matches!(**m, "cli" | ""))
                .map(|m| m.to_string())
                .collect::<BTreeSet<_>>()
        })
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        documented, enforced,
        "src/lib.rs lists the layers (top first, one bullet per layer) otherwise than LAYERS"
    );
}

#[test]
fn the_lib_rs_reader_finds_one_set_per_bullet() {
    let lib = "//! Intro.\n//!\n//! Layers, top to bottom (see …):\n//! - [`a`]: the top.\n//!   More about a.\n//! - [`b`], [`c`]: below.\n//!\n//! After.\n";
    let got = documented_layers(lib);
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(got, vec![set(&["a"]), set(&["b", "c"])]);
}
