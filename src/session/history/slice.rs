//! Index ranges over a session's history, and the one rule for them (docs/semantics.md,
//! "History ranges"): `entries[start:end]` as a Python slice, negative indices counting from
//! the end. Reading ([`RangeUse::Read`]: `get_history`) clamps out-of-range bounds and an
//! empty selection is an empty answer. Acting on entries ([`RangeUse::Act`]:
//! `delete_history`, `rerun_history`, `export_history`) refuses an index that names no entry
//! and an empty selection ([`RangeError`], which says the valid range), so nothing is
//! deleted, restarted or written on indices that do not exist.

use std::fmt;
use std::ops::Range;

/// How a tool uses a history range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeUse {
    /// Reading: a Python slice, clamped; an empty selection is not an error.
    Read,
    /// Deleting, re-running or exporting: every index given names an entry (`start` in
    /// `-len..len`, `end` in `-len..=len`) and the selection is not empty.
    Act,
}

/// Why a range was refused for [`RangeUse::Act`]. `len` is the number of entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    /// `which` (`"start"` or `"end"`) is `value`, which names no entry.
    OutOfRange {
        which: &'static str,
        value: i64,
        len: usize,
    },
    /// The bounds are valid but select nothing (or the history is empty).
    Empty {
        start: Option<i64>,
        end: Option<i64>,
        len: usize,
    },
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = match self {
            RangeError::OutOfRange { which, value, len } => {
                write!(f, "{which}={value} names no history entry")?;
                *len
            }
            RangeError::Empty { len: 0, .. } => return f.write_str("the history is empty"),
            RangeError::Empty { start, end, len } => {
                let shown: Vec<String> = [("start", start), ("end", end)]
                    .iter()
                    .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
                    .collect();
                write!(f, "{} selects no entries", shown.join(", "))?;
                *len
            }
        };
        if len == 0 {
            return f.write_str(": the history is empty");
        }
        let last = len - 1;
        write!(
            f,
            ": the history has {len} entr{}, so start goes from -{len} to {last} and end from -{len} to {len} (get_history lists them with their indices)",
            if len == 1 { "y" } else { "ies" }
        )
    }
}

impl std::error::Error for RangeError {}

/// The entries `[start, end)` a tool selects in a history of `len` entries, by `how`'s rule.
/// Errors: [`RangeError`] for [`RangeUse::Act`] only.
pub fn select_range(
    len: usize,
    start: Option<i64>,
    end: Option<i64>,
    how: RangeUse,
) -> Result<Range<usize>, RangeError> {
    let range = slice_range(len, start, end);
    if how == RangeUse::Read {
        return Ok(range);
    }
    let n = i128::try_from(len).unwrap_or(i128::MAX);
    let check = |which: &'static str, value: Option<i64>, top: i128| match value {
        Some(v) if !(-n..top).contains(&i128::from(v)) => Err(RangeError::OutOfRange {
            which,
            value: v,
            len,
        }),
        _ => Ok(()),
    };
    check("start", start, n)?;
    check("end", end, n + 1)?;
    if range.is_empty() {
        return Err(RangeError::Empty { start, end, len });
    }
    Ok(range)
}

/// The half-open index range `[start, end)` that Python's `entries[start:end]` selects in a
/// list of `len`: negatives count from the end, out-of-range values clamp, `None` = open.
///
/// The result always satisfies `start <= end <= len`; when the slice is empty it is the empty
/// range at the clamped start (as Python's `slice(start, end).indices(len)` gives it).
pub fn slice_range(len: usize, start: Option<i64>, end: Option<i64>) -> Range<usize> {
    let start = start.map_or(0, |i| clamp_index(len, i));
    let end = end.map_or(len, |i| clamp_index(len, i));
    start..end.max(start)
}

/// One slice bound resolved against `len`: negatives from the end, then clamped to `0..=len`.
fn clamp_index(len: usize, i: i64) -> usize {
    if i < 0 {
        len.saturating_sub(usize::try_from(i.unsigned_abs()).unwrap_or(usize::MAX))
    } else {
        usize::try_from(i).unwrap_or(usize::MAX).min(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type SliceCase = (usize, Option<i64>, Option<i64>, usize, usize);

    /// `(len, start, end, expected start, expected end)`, computed once with Python 3:
    /// `list(range(len))[start:end]`, and `slice(start, end).indices(len)[0]` for the empty ones.
    #[rustfmt::skip]
    const SLICE_CASES: &[SliceCase] = &[
        (0, None, None, 0, 0),
        (0, None, Some(-7), 0, 0),
        (0, None, Some(-2), 0, 0),
        (0, None, Some(-1), 0, 0),
        (0, None, Some(0), 0, 0),
        (0, None, Some(1), 0, 0),
        (0, None, Some(3), 0, 0),
        (0, None, Some(7), 0, 0),
        (0, Some(-7), None, 0, 0),
        (0, Some(-7), Some(-7), 0, 0),
        (0, Some(-7), Some(-2), 0, 0),
        (0, Some(-7), Some(-1), 0, 0),
        (0, Some(-7), Some(0), 0, 0),
        (0, Some(-7), Some(1), 0, 0),
        (0, Some(-7), Some(3), 0, 0),
        (0, Some(-7), Some(7), 0, 0),
        (0, Some(-2), None, 0, 0),
        (0, Some(-2), Some(-7), 0, 0),
        (0, Some(-2), Some(-2), 0, 0),
        (0, Some(-2), Some(-1), 0, 0),
        (0, Some(-2), Some(0), 0, 0),
        (0, Some(-2), Some(1), 0, 0),
        (0, Some(-2), Some(3), 0, 0),
        (0, Some(-2), Some(7), 0, 0),
        (0, Some(-1), None, 0, 0),
        (0, Some(-1), Some(-7), 0, 0),
        (0, Some(-1), Some(-2), 0, 0),
        (0, Some(-1), Some(-1), 0, 0),
        (0, Some(-1), Some(0), 0, 0),
        (0, Some(-1), Some(1), 0, 0),
        (0, Some(-1), Some(3), 0, 0),
        (0, Some(-1), Some(7), 0, 0),
        (0, Some(0), None, 0, 0),
        (0, Some(0), Some(-7), 0, 0),
        (0, Some(0), Some(-2), 0, 0),
        (0, Some(0), Some(-1), 0, 0),
        (0, Some(0), Some(0), 0, 0),
        (0, Some(0), Some(1), 0, 0),
        (0, Some(0), Some(3), 0, 0),
        (0, Some(0), Some(7), 0, 0),
        (0, Some(1), None, 0, 0),
        (0, Some(1), Some(-7), 0, 0),
        (0, Some(1), Some(-2), 0, 0),
        (0, Some(1), Some(-1), 0, 0),
        (0, Some(1), Some(0), 0, 0),
        (0, Some(1), Some(1), 0, 0),
        (0, Some(1), Some(3), 0, 0),
        (0, Some(1), Some(7), 0, 0),
        (0, Some(3), None, 0, 0),
        (0, Some(3), Some(-7), 0, 0),
        (0, Some(3), Some(-2), 0, 0),
        (0, Some(3), Some(-1), 0, 0),
        (0, Some(3), Some(0), 0, 0),
        (0, Some(3), Some(1), 0, 0),
        (0, Some(3), Some(3), 0, 0),
        (0, Some(3), Some(7), 0, 0),
        (0, Some(7), None, 0, 0),
        (0, Some(7), Some(-7), 0, 0),
        (0, Some(7), Some(-2), 0, 0),
        (0, Some(7), Some(-1), 0, 0),
        (0, Some(7), Some(0), 0, 0),
        (0, Some(7), Some(1), 0, 0),
        (0, Some(7), Some(3), 0, 0),
        (0, Some(7), Some(7), 0, 0),
        (5, None, None, 0, 5),
        (5, None, Some(-7), 0, 0),
        (5, None, Some(-2), 0, 3),
        (5, None, Some(-1), 0, 4),
        (5, None, Some(0), 0, 0),
        (5, None, Some(1), 0, 1),
        (5, None, Some(3), 0, 3),
        (5, None, Some(7), 0, 5),
        (5, Some(-7), None, 0, 5),
        (5, Some(-7), Some(-7), 0, 0),
        (5, Some(-7), Some(-2), 0, 3),
        (5, Some(-7), Some(-1), 0, 4),
        (5, Some(-7), Some(0), 0, 0),
        (5, Some(-7), Some(1), 0, 1),
        (5, Some(-7), Some(3), 0, 3),
        (5, Some(-7), Some(7), 0, 5),
        (5, Some(-2), None, 3, 5),
        (5, Some(-2), Some(-7), 3, 3),
        (5, Some(-2), Some(-2), 3, 3),
        (5, Some(-2), Some(-1), 3, 4),
        (5, Some(-2), Some(0), 3, 3),
        (5, Some(-2), Some(1), 3, 3),
        (5, Some(-2), Some(3), 3, 3),
        (5, Some(-2), Some(7), 3, 5),
        (5, Some(-1), None, 4, 5),
        (5, Some(-1), Some(-7), 4, 4),
        (5, Some(-1), Some(-2), 4, 4),
        (5, Some(-1), Some(-1), 4, 4),
        (5, Some(-1), Some(0), 4, 4),
        (5, Some(-1), Some(1), 4, 4),
        (5, Some(-1), Some(3), 4, 4),
        (5, Some(-1), Some(7), 4, 5),
        (5, Some(0), None, 0, 5),
        (5, Some(0), Some(-7), 0, 0),
        (5, Some(0), Some(-2), 0, 3),
        (5, Some(0), Some(-1), 0, 4),
        (5, Some(0), Some(0), 0, 0),
        (5, Some(0), Some(1), 0, 1),
        (5, Some(0), Some(3), 0, 3),
        (5, Some(0), Some(7), 0, 5),
        (5, Some(1), None, 1, 5),
        (5, Some(1), Some(-7), 1, 1),
        (5, Some(1), Some(-2), 1, 3),
        (5, Some(1), Some(-1), 1, 4),
        (5, Some(1), Some(0), 1, 1),
        (5, Some(1), Some(1), 1, 1),
        (5, Some(1), Some(3), 1, 3),
        (5, Some(1), Some(7), 1, 5),
        (5, Some(3), None, 3, 5),
        (5, Some(3), Some(-7), 3, 3),
        (5, Some(3), Some(-2), 3, 3),
        (5, Some(3), Some(-1), 3, 4),
        (5, Some(3), Some(0), 3, 3),
        (5, Some(3), Some(1), 3, 3),
        (5, Some(3), Some(3), 3, 3),
        (5, Some(3), Some(7), 3, 5),
        (5, Some(7), None, 5, 5),
        (5, Some(7), Some(-7), 5, 5),
        (5, Some(7), Some(-2), 5, 5),
        (5, Some(7), Some(-1), 5, 5),
        (5, Some(7), Some(0), 5, 5),
        (5, Some(7), Some(1), 5, 5),
        (5, Some(7), Some(3), 5, 5),
        (5, Some(7), Some(7), 5, 5),
        (1, None, None, 0, 1),
        (1, None, Some(-2), 0, 0),
        (1, None, Some(-1), 0, 0),
        (1, None, Some(0), 0, 0),
        (1, None, Some(1), 0, 1),
        (1, None, Some(2), 0, 1),
        (1, Some(-2), None, 0, 1),
        (1, Some(-2), Some(-2), 0, 0),
        (1, Some(-2), Some(-1), 0, 0),
        (1, Some(-2), Some(0), 0, 0),
        (1, Some(-2), Some(1), 0, 1),
        (1, Some(-2), Some(2), 0, 1),
        (1, Some(-1), None, 0, 1),
        (1, Some(-1), Some(-2), 0, 0),
        (1, Some(-1), Some(-1), 0, 0),
        (1, Some(-1), Some(0), 0, 0),
        (1, Some(-1), Some(1), 0, 1),
        (1, Some(-1), Some(2), 0, 1),
        (1, Some(0), None, 0, 1),
        (1, Some(0), Some(-2), 0, 0),
        (1, Some(0), Some(-1), 0, 0),
        (1, Some(0), Some(0), 0, 0),
        (1, Some(0), Some(1), 0, 1),
        (1, Some(0), Some(2), 0, 1),
        (1, Some(1), None, 1, 1),
        (1, Some(1), Some(-2), 1, 1),
        (1, Some(1), Some(-1), 1, 1),
        (1, Some(1), Some(0), 1, 1),
        (1, Some(1), Some(1), 1, 1),
        (1, Some(1), Some(2), 1, 1),
        (1, Some(2), None, 1, 1),
        (1, Some(2), Some(-2), 1, 1),
        (1, Some(2), Some(-1), 1, 1),
        (1, Some(2), Some(0), 1, 1),
        (1, Some(2), Some(1), 1, 1),
        (1, Some(2), Some(2), 1, 1),
    ];

    #[test]
    fn slice_range_matches_python() {
        for &(len, start, end, lo, hi) in SLICE_CASES {
            let got = slice_range(len, start, end);
            assert_eq!(got, lo..hi, "len {len}, [{start:?}:{end:?}]");
            let items: Vec<usize> = (0..len).collect();
            assert_eq!(&items[got.clone()], &(lo..hi).collect::<Vec<_>>()[..]);
        }
    }

    #[test]
    fn acting_ranges_refuse_indices_that_name_no_entry_and_empty_selections() {
        let act = |len, start, end| select_range(len, start, end, RangeUse::Act);
        assert_eq!(act(3, Some(-3), None), Ok(0..3));
        assert_eq!(act(3, Some(2), Some(3)), Ok(2..3));
        assert_eq!(act(3, None, Some(-1)), Ok(0..2));
        assert_eq!(act(3, None, None), Ok(0..3));
        for (start, end, which, value) in [
            (Some(-100), None, "start", -100),
            (Some(-4), None, "start", -4),
            (Some(3), None, "start", 3),
            (Some(0), Some(4), "end", 4),
            (Some(0), Some(-4), "end", -4),
            (Some(i64::MIN), None, "start", i64::MIN),
            (Some(0), Some(i64::MAX), "end", i64::MAX),
        ] {
            assert_eq!(
                act(3, start, end),
                Err(RangeError::OutOfRange {
                    which,
                    value,
                    len: 3
                }),
                "[{start:?}:{end:?}]"
            );
        }
        assert_eq!(
            act(3, Some(2), Some(1)),
            Err(RangeError::Empty {
                start: Some(2),
                end: Some(1),
                len: 3
            })
        );
        assert!(matches!(
            act(0, None, None),
            Err(RangeError::Empty { len: 0, .. })
        ));
        assert!(matches!(
            act(0, Some(0), None),
            Err(RangeError::OutOfRange { len: 0, .. })
        ));
        // Reading never refuses.
        assert_eq!(
            select_range(3, Some(-100), Some(100), RangeUse::Read),
            Ok(0..3)
        );
        assert_eq!(select_range(3, Some(5), None, RangeUse::Read), Ok(3..3));
    }

    #[test]
    fn range_errors_say_the_valid_range() {
        let e = select_range(3, Some(-100), None, RangeUse::Act).unwrap_err();
        assert_eq!(
            e.to_string(),
            "start=-100 names no history entry: the history has 3 entries, so start goes from -3 to 2 and end from -3 to 3 (get_history lists them with their indices)"
        );
        let e = select_range(1, Some(0), Some(0), RangeUse::Act).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("start=0, end=0 selects no entries: the history has 1 entry,"),
            "{e}"
        );
        let e = select_range(0, None, None, RangeUse::Act).unwrap_err();
        assert_eq!(e.to_string(), "the history is empty");
        let e = select_range(0, Some(1), None, RangeUse::Act).unwrap_err();
        assert_eq!(
            e.to_string(),
            "start=1 names no history entry: the history is empty"
        );
    }

    #[test]
    fn slice_range_extremes() {
        assert_eq!(slice_range(5, Some(i64::MIN), Some(i64::MAX)), 0..5);
        assert_eq!(slice_range(5, Some(i64::MAX), Some(i64::MIN)), 5..5);
        assert_eq!(slice_range(5, Some(-2), None), 3..5);
        assert_eq!(slice_range(5, Some(1), Some(-1)), 1..4);
        assert_eq!(slice_range(0, Some(-1), Some(1)), 0..0);
    }
}
