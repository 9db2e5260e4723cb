//! No integration test bounds wall-clock time under [`MIN_BOUND`]: under two test threads on a
//! loaded machine a tighter bound fails by chance. A bound says "returns instead of hanging";
//! a figure that matters belongs in the bench. The scan reads `took < …`, `elapsed() < …` and
//! `wait_until(…)` bounds written as `Duration::from_secs(N)`, `from_millis(N)` or a `const`
//! of the same file; suites that run under paused time (`start_paused`) are left out.

use std::path::Path;
use std::time::Duration;

/// The tightest wall-clock bound an integration test may set.
const MIN_BOUND: Duration = Duration::from_secs(5);

/// `Duration::from_secs(N)` or `Duration::from_millis(N)` at the start of `text`, or a
/// `const` of `consts` named there.
fn duration_at(text: &str, consts: &[(String, Duration)]) -> Option<Duration> {
    let text = text.trim_start();
    let number = |rest: &str| -> Option<u64> {
        rest.split(')').next()?.trim().replace('_', "").parse().ok()
    };
    if let Some(rest) = text.strip_prefix("Duration::from_secs(") {
        return number(rest).map(Duration::from_secs);
    }
    if let Some(rest) = text.strip_prefix("Duration::from_millis(") {
        return number(rest).map(Duration::from_millis);
    }
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
        .collect();
    consts
        .iter()
        .find(|(n, _)| !name.is_empty() && *n == name)
        .map(|(_, d)| *d)
}

/// The `const NAME: Duration = …;` of `text`.
fn consts(text: &str) -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start().trim_start_matches("pub ");
        let Some(rest) = line.strip_prefix("const ") else {
            continue;
        };
        let Some((name, value)) = rest.split_once(": Duration =") else {
            continue;
        };
        if let Some(d) = duration_at(value, &[]) {
            out.push((name.trim().to_string(), d));
        }
    }
    out
}

/// The lines (1-based) of `text` with a wall-clock bound under [`MIN_BOUND`], and the bound.
/// The lines are trimmed and joined first, so a bound may wrap.
fn tight_bounds(text: &str) -> Vec<(usize, Duration)> {
    let consts = consts(text);
    let mut flat = String::new();
    // Where each line starts in `flat`.
    let mut starts = Vec::new();
    for line in text.lines() {
        starts.push(flat.len());
        flat.push_str(line.trim());
        flat.push(' ');
    }
    let mut out = Vec::new();
    for needle in ["took <", "elapsed() <", "wait_until(", "wait_until_async("] {
        for (i, _) in flat.match_indices(needle) {
            let rest = flat[i + needle.len()..].trim_start_matches('=');
            if let Some(d) = duration_at(rest, &consts).filter(|d| *d < MIN_BOUND) {
                out.push((starts.partition_point(|&s| s <= i), d));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_scan_finds_tight_bounds_over_lines_and_through_consts() {
    let text = "const QUICK: Duration = Duration::from_millis(500);\n\
                assert!(took < Duration::from_secs(3));\n\
                assert!(\n    t0.elapsed()\n        < QUICK,\n);\n\
                assert!(took < Duration::from_secs(10));\n\
                assert!(wait_until(Duration::from_secs(2), || true).await);\n";
    assert_eq!(
        tight_bounds(text),
        vec![
            (2, Duration::from_secs(3)),
            (4, Duration::from_millis(500)),
            (8, Duration::from_secs(2)),
        ]
    );
}

#[test]
fn no_integration_test_bounds_wall_clock_time_under_5_s() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut found = Vec::new();
    let mut scanned = 0;
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read tests/it").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains("start_paused") || path.ends_with("wall_clock.rs") {
                continue;
            }
            scanned += 1;
            let rel = path.strip_prefix(&dir).unwrap().display().to_string();
            for (line, d) in tight_bounds(&text) {
                found.push(format!("tests/it/{rel}:{line}: {d:?}"));
            }
        }
    }
    assert!(scanned > 50, "scanned only {scanned} files");
    assert!(
        found.is_empty(),
        "wall-clock bounds under {MIN_BOUND:?} (widen to \"returns instead of hanging\", or move \
         the figure to the bench):\n  {}",
        found.join("\n  ")
    );
}
