//! Python-slice index ranges over a session's history: `entries[start:end]` with negative
//! indices counting from the end and out-of-range bounds clamped, as `history`,
//! `delete_history` and `rerun_history` take them.

use std::ops::Range;

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
    fn slice_range_extremes() {
        assert_eq!(slice_range(5, Some(i64::MIN), Some(i64::MAX)), 0..5);
        assert_eq!(slice_range(5, Some(i64::MAX), Some(i64::MIN)), 5..5);
        assert_eq!(slice_range(5, Some(-2), None), 3..5);
        assert_eq!(slice_range(5, Some(1), Some(-1)), 1..4);
        assert_eq!(slice_range(0, Some(-1), Some(1)), 0..0);
    }
}
