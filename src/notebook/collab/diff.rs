//! The smallest practical set of edits that turns a cell's source into a new one, so that
//! replacing a source in a shared document touches only what changed: a person's cursor
//! elsewhere in the cell stays where it was, and their concurrent typing merges.
//!
//! Lines are matched first (the longest common subsequence of the lines that differ, after
//! the common first and last lines are set aside), then each changed run of lines is trimmed
//! to the characters that differ. When the middle is too large to match line by line
//! ([`MAX_LCS_CELLS`]), it is replaced as one run. Offsets are UTF-8 byte offsets into the
//! old text, always on character boundaries.

/// The most line pairs compared when matching lines (the table is `u32`s: 16 MiB).
pub const MAX_LCS_CELLS: usize = 4_000_000;

/// Replace `delete` bytes at byte offset `at` of the old text with `insert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub at: usize,
    pub delete: usize,
    pub insert: String,
}

/// The edits from `old` to `new`, in increasing order of `at`, not overlapping. Apply them
/// from last to first (each leaves the offsets before it valid).
pub fn edits(old: &str, new: &str) -> Vec<Edit> {
    if old == new {
        return Vec::new();
    }
    let a = lines(old);
    let b = lines(new);
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suf = a.len().min(b.len()) - pre;
    let suf = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suf)
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let base = offset(&a, pre);
    let bbase = offset(&b, pre);
    let pairs = if am.len().saturating_mul(bm.len()) <= MAX_LCS_CELLS {
        lcs(am, bm)
    } else {
        Vec::new()
    };
    // Walk the matched line pairs; each gap between them is one changed run.
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut ai, mut bj) = (base, bbase);
    for (mi, mj) in pairs.into_iter().chain([(am.len(), bm.len())]) {
        let old_run: usize = am[i..mi].iter().map(|l| l.len()).sum();
        let new_run: usize = bm[j..mj].iter().map(|l| l.len()).sum();
        if old_run + new_run > 0 {
            out.extend(trimmed(ai, &old[ai..ai + old_run], &new[bj..bj + new_run]));
        }
        ai += old_run;
        bj += new_run;
        if mi < am.len() {
            ai += am[mi].len();
            bj += bm[mj].len();
        }
        (i, j) = (mi + 1, mj + 1);
    }
    out
}

/// `s` split after each `\n` (the last line may lack one).
fn lines(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

/// The byte offset of line `n` of a text split as `lines`.
fn offset(lines: &[&str], n: usize) -> usize {
    lines[..n].iter().map(|l| l.len()).sum()
}

/// The matched index pairs of a longest common subsequence of `a` and `b`, in order.
fn lcs(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let w = m + 1;
    // len[i][j]: LCS length of a[i..] and b[j..].
    let mut len = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[i * w + j] = if a[i] == b[j] {
                len[(i + 1) * w + j + 1] + 1
            } else {
                len[(i + 1) * w + j].max(len[i * w + j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            out.push((i, j));
            i += 1;
            j += 1;
        } else if len[(i + 1) * w + j] >= len[i * w + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// One edit replacing `old` (at byte `at`) by `new`, trimmed of their common first and last
/// characters; none when they are equal.
fn trimmed(at: usize, old: &str, new: &str) -> Option<Edit> {
    let pre: usize = old
        .chars()
        .zip(new.chars())
        .take_while(|(x, y)| x == y)
        .map(|(c, _)| c.len_utf8())
        .sum();
    let (o, n) = (&old[pre..], &new[pre..]);
    let suf: usize = o
        .chars()
        .rev()
        .zip(n.chars().rev())
        .take_while(|(x, y)| x == y)
        .map(|(c, _)| c.len_utf8())
        .sum::<usize>()
        .min(o.len())
        .min(n.len());
    let (o, n) = (&o[..o.len() - suf], &n[..n.len() - suf]);
    if o.is_empty() && n.is_empty() {
        return None;
    }
    Some(Edit {
        at: at + pre,
        delete: o.len(),
        insert: n.to_string(),
    })
}

/// `old` with `edits` applied (what the shared text does with them; for tests).
pub fn apply(old: &str, edits: &[Edit]) -> String {
    let mut s = old.to_string();
    for e in edits.iter().rev() {
        s.replace_range(e.at..e.at + e.delete, &e.insert);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_change_in_one_line_touches_only_its_characters() {
        let old = "import os\nx = 1\nprint(x)\n";
        let new = "import os\nx = 2\nprint(x)\n";
        assert_eq!(
            edits(old, new),
            vec![Edit {
                at: 14,
                delete: 1,
                insert: "2".into()
            }]
        );
    }

    #[test]
    fn two_distant_changes_are_two_edits_leaving_the_lines_between_alone() {
        let old = "a = 1\nb = 2\nc = 3\nd = 4\n";
        let new = "a = 10\nb = 2\nc = 3\nd = 40\n";
        let e = edits(old, new);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e.iter().all(|e| e.delete == 0), "{e:?}");
        assert_eq!(apply(old, &e), new);
    }

    #[test]
    fn inserted_and_deleted_lines_keep_the_rest() {
        let old = "one\ntwo\nthree\n";
        let new = "zero\none\nthree\nfour";
        let e = edits(old, new);
        assert_eq!(apply(old, &e), new);
        // "one\n" is never deleted.
        assert!(e.iter().all(|e| !(e.at == 0 && e.delete >= 4)), "{e:?}");
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let old = "é = 'ü'\n";
        let new = "é = 'ö'\n";
        let e = edits(old, new);
        assert_eq!(apply(old, &e), new);
        for x in &e {
            assert!(old.is_char_boundary(x.at) && old.is_char_boundary(x.at + x.delete));
        }
    }

    proptest! {
        #[test]
        fn applying_the_edits_gives_the_new_text(
            old in "[ab\né\n]{0,40}",
            new in "[ab\né\n]{0,40}",
        ) {
            let e = edits(&old, &new);
            prop_assert_eq!(apply(&old, &e), new);
            for w in e.windows(2) {
                prop_assert!(w[0].at + w[0].delete <= w[1].at);
            }
        }
    }
}
