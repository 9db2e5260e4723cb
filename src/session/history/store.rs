//! The in-memory history of one session: its entries in order, bounded in count and in
//! estimated bytes, oldest out first. The journal on disk keeps every entry (see
//! [`super::journal`]); memory keeps the newest ones, which is what `history`,
//! `delete_history`, `rerun_history` and `export_history` work on. Indices given to and
//! returned by [`History`] are positions in memory: 0 is the oldest entry still held.

use std::collections::VecDeque;

use std::collections::HashSet;

use super::{
    EntrySlot, HistoryEntry, HistoryOutput, RangeError, RangeUse, select_range, slice_range,
    update_entry_display, value_bytes,
};

/// Entries a session keeps in memory.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// Estimated bytes of entries a session keeps in memory (see [`entry_bytes`]).
pub(crate) const MAX_BYTES: usize = 64 * 1024 * 1024;

/// A session's history entries in memory, at most `max_entries` of them and at most
/// `max_bytes` estimated bytes (the newest entry is always kept, even alone over the limit).
/// Pushing past a limit evicts the oldest entries and counts them in [`History::dropped`].
#[derive(Debug)]
pub(crate) struct History {
    /// Each entry with its [`entry_bytes`], oldest first.
    entries: VecDeque<(HistoryEntry, usize)>,
    max_entries: usize,
    max_bytes: usize,
    /// Sum of the sizes in `entries`.
    bytes: usize,
    /// Entries evicted since the history was created or last cleared.
    dropped: usize,
    /// Every `display_id` an entry was pushed with (so updates for others cost nothing).
    display_ids: HashSet<String>,
}

impl Default for History {
    /// A history with the standard limits, [`MAX_ENTRIES`] and [`MAX_BYTES`].
    fn default() -> Self {
        History::new(MAX_ENTRIES, MAX_BYTES)
    }
}

impl History {
    /// An empty history holding at most `max_entries` entries (at least 1) and `max_bytes`
    /// estimated bytes.
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> History {
        History {
            entries: VecDeque::new(),
            max_entries: max_entries.max(1),
            max_bytes,
            bytes: 0,
            dropped: 0,
            display_ids: HashSet::new(),
        }
    }

    /// Append `entry` as the newest, then evict the oldest entries while over either limit
    /// (never the one just pushed).
    pub(crate) fn push(&mut self, entry: HistoryEntry) {
        let size = entry_bytes(&entry);
        self.bytes += size;
        self.display_ids
            .extend(entry.outputs.iter().filter_map(|o| o.display_id.clone()));
        self.entries.push_back((entry, size));
        while self.entries.len() > self.max_entries
            || (self.bytes > self.max_bytes && self.entries.len() > 1)
        {
            let Some((_, size)) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= size;
            self.dropped += 1;
        }
    }

    /// Apply a display update to every entry holding an output with its `display_id`
    /// (see [`update_entry_display`]). Returns true when one did.
    pub(crate) fn update_display(&mut self, update: &HistoryOutput) -> bool {
        if !update
            .display_id
            .as_ref()
            .is_some_and(|id| self.display_ids.contains(id))
        {
            return false;
        }
        let mut any = false;
        for (entry, size) in self.entries.iter_mut() {
            if update_entry_display(entry, update) {
                let new = entry_bytes(entry);
                self.bytes = self.bytes + new - *size;
                *size = new;
                any = true;
            }
        }
        any
    }

    /// Entries in memory.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Python's `entries[start:end]` over the entries in memory, each with its index there.
    pub(crate) fn slice(&self, start: Option<i64>, end: Option<i64>) -> Vec<(usize, HistoryEntry)> {
        slice_range(self.entries.len(), start, end)
            .map(|i| (i, self.entries[i].0.clone()))
            .collect()
    }

    /// Remove `entries[start:end]` and return their run ids in order. With `end` `None` only
    /// the entry at `start` goes (not everything after it). Evicted entries are out of reach:
    /// only memory is searched.
    /// Errors: [`RangeError`] for an index that names no entry or an empty selection
    /// ([`RangeUse::Act`]); nothing is removed then.
    pub(crate) fn delete(
        &mut self,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<Vec<String>, RangeError> {
        let len = self.entries.len();
        let mut range = select_range(len, start, end, RangeUse::Act)?;
        if end.is_none() {
            range.end = range.start + 1;
        }
        let removed: Vec<String> = self
            .entries
            .drain(range)
            .map(|(entry, size)| {
                self.bytes -= size;
                entry.run_id
            })
            .collect();
        Ok(removed)
    }

    /// Forget every entry, and the count of evicted ones (a clear empties the history the
    /// journal replays too).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
        self.dropped = 0;
        self.display_ids.clear();
    }

    /// Entries evicted from memory by the limits since creation or the last [`History::clear`].
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> usize {
        self.dropped
    }

    /// Estimated bytes of the entries in memory (the sum of their [`entry_bytes`]).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The estimated memory of an entry: its strings (run id, code, streams, result, error,
/// timestamp), the MIME types and values of its outputs, plus the fixed size of the records.
pub(crate) fn entry_bytes(entry: &HistoryEntry) -> usize {
    let error = entry.error.as_ref().map_or(0, |e| {
        e.ename.len() + e.evalue.len() + e.traceback.iter().map(String::len).sum::<usize>()
    });
    let outputs: usize = entry
        .outputs
        .iter()
        .map(|o| {
            std::mem::size_of_val(o)
                + o.kind.len()
                + o.data
                    .iter()
                    .chain(&o.metadata)
                    .map(|(mime, v)| mime.len() + value_bytes(v))
                    .sum::<usize>()
        })
        .sum();
    let order: usize = entry
        .order
        .iter()
        .flatten()
        .map(|s| match s {
            EntrySlot::Stream { name, text } => name.len() + text.len() + 16,
            _ => 16,
        })
        .sum();
    std::mem::size_of::<HistoryEntry>()
        + order
        + entry.run_id.len()
        + entry.code.len()
        + entry.stdout.len()
        + entry.stderr.len()
        + entry.result.as_ref().map_or(0, String::len)
        + error
        + outputs
        + entry.finished_at.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::history::sample_entry;
    use crate::session::types::RunStatus;

    fn entry(run_id: &str, code_bytes: usize) -> HistoryEntry {
        sample_entry(run_id, &"x".repeat(code_bytes), RunStatus::Ok)
    }

    fn ids(h: &History) -> Vec<String> {
        h.slice(None, None)
            .into_iter()
            .map(|(_, e)| e.run_id)
            .collect()
    }

    #[test]
    fn the_oldest_entries_go_first_past_the_entry_limit() {
        let mut h = History::new(3, usize::MAX);
        for i in 1..=5 {
            h.push(entry(&format!("r{i}"), 10));
        }
        assert_eq!(h.len(), 3);
        assert_eq!(h.dropped(), 2);
        assert_eq!(ids(&h), ["r3", "r4", "r5"]);
        let indices: Vec<usize> = h.slice(None, None).iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, [0, 1, 2], "indices are positions in memory");
        assert_eq!(h.bytes(), 3 * entry_bytes(&entry("r3", 10)));
    }

    #[test]
    fn the_oldest_entries_go_first_past_the_byte_limit() {
        let one = entry_bytes(&entry("r1", 1000));
        assert!(one > 1000);
        let mut h = History::new(100, one * 5 / 2);
        for i in 1..=4 {
            h.push(entry(&format!("r{i}"), 1000));
        }
        assert_eq!(ids(&h), ["r3", "r4"]);
        assert_eq!(h.dropped(), 2);
        assert_eq!(h.bytes(), 2 * one);

        // A bigger entry pushes out as many as it needs to.
        h.push(entry("big", 2000));
        assert_eq!(ids(&h), ["big"]);
        assert_eq!(h.dropped(), 4);

        // One entry over the limit on its own is still kept: it is the newest.
        h.push(entry("huge", one * 10));
        assert_eq!(ids(&h), ["huge"]);
        assert!(h.bytes() > one * 5 / 2);
        assert_eq!(h.dropped(), 5);
    }

    #[test]
    fn output_data_counts_towards_the_byte_limit() {
        let mut with_image = entry("r1", 0);
        let mut data = serde_json::Map::new();
        data.insert(
            "image/png".into(),
            serde_json::Value::String("A".repeat(100_000)),
        );
        with_image
            .outputs
            .push(crate::session::history::HistoryOutput {
                kind: "display_data".into(),
                data,
                ..Default::default()
            });
        assert!(entry_bytes(&with_image) >= entry_bytes(&entry("r0", 0)) + 100_000);
        let mut h = History::new(100, 150_000);
        h.push(with_image.clone());
        h.push(HistoryEntry {
            run_id: "r2".into(),
            ..with_image
        });
        assert_eq!(ids(&h), ["r2"]);
    }

    #[test]
    fn slice_is_python_slicing_over_memory() {
        let mut h = History::new(10, usize::MAX);
        for i in 0..5 {
            h.push(entry(&format!("r{i}"), 1));
        }
        let got: Vec<(usize, String)> = h
            .slice(Some(-2), None)
            .into_iter()
            .map(|(i, e)| (i, e.run_id))
            .collect();
        assert_eq!(got, [(3, "r3".to_string()), (4, "r4".to_string())]);
        assert_eq!(h.slice(Some(1), Some(3)).len(), 2);
        assert!(h.slice(Some(7), None).is_empty());
        assert!(h.slice(Some(3), Some(1)).is_empty());
    }

    #[test]
    fn delete_takes_one_entry_without_an_end_and_a_range_with_one() {
        let mut h = History::new(10, usize::MAX);
        for i in 0..6 {
            h.push(entry(&format!("r{i}"), 1));
        }
        let full = h.bytes();
        let del = |h: &mut History, start, end| h.delete(start, end).expect("in range");
        assert_eq!(del(&mut h, Some(1), None), ["r1"]);
        assert_eq!(del(&mut h, Some(-1), None), ["r5"]);
        assert_eq!(ids(&h), ["r0", "r2", "r3", "r4"]);
        assert_eq!(del(&mut h, Some(1), Some(3)), ["r2", "r3"]);
        // Indices that name no entry, and empty selections, remove nothing.
        for (start, end) in [
            (Some(9), None),
            (Some(-9), None),
            (Some(0), Some(100)),
            (Some(1), Some(1)),
        ] {
            assert!(h.delete(start, end).is_err(), "[{start:?}:{end:?}]");
        }
        assert_eq!(ids(&h), ["r0", "r4"]);
        assert_eq!(h.bytes(), full / 6 * 2);
        assert_eq!(del(&mut h, Some(0), Some(2)), ["r0", "r4"]);
        assert!(h.is_empty());
        assert_eq!(h.bytes(), 0);
        assert_eq!(h.dropped(), 0, "deleting is not evicting");
    }

    #[test]
    fn clear_empties_memory_and_the_eviction_count() {
        let mut h = History::new(2, usize::MAX);
        for i in 0..4 {
            h.push(entry(&format!("r{i}"), 1));
        }
        assert_eq!(h.dropped(), 2);
        h.clear();
        assert!(h.is_empty());
        assert_eq!((h.len(), h.bytes(), h.dropped()), (0, 0, 0));
        h.push(entry("r9", 1));
        assert_eq!(ids(&h), ["r9"]);
    }

    #[test]
    fn the_standard_limits() {
        let h = History::default();
        assert_eq!((h.max_entries, h.max_bytes), (10_000, 64 * 1024 * 1024));
        assert_eq!(History::new(0, 0).max_entries, 1);
    }
}
