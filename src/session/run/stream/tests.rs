//! A spilled stream reads back exactly as the same stream kept in memory.

use super::*;
use crate::session::run::spool::{self, SpoolDir};
use crate::session::text::{head_tail, page};

fn spool_dir() -> (tempfile::TempDir, SpoolDir) {
    let base = tempfile::tempdir().expect("temp dir");
    let dir = spool::open(base.path(), "test").expect("spool dir");
    (base, dir)
}

/// More than a thousand lines with what cleaning interprets: carriage returns, colours,
/// erase-line, tabs, backspaces, multi-byte characters, CRLF — in chunks that end anywhere.
fn chunks() -> Vec<String> {
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&match i % 6 {
            0 => format!("line {i} é漢\n"),
            1 => format!("\x1b[31mred {i}\x1b[0m\tcol\r\n"),
            2 => format!("{i}%\r{}%\r100%\n", i + 1),
            3 => format!("ab\u{8}c {i}\n"),
            4 => format!("loading\r\x1b[2Kdone {i}\n"),
            _ => "x".repeat(i % 97) + "\n",
        });
    }
    // Cut at fixed byte steps moved to character boundaries, so chunks split lines, CRLFs
    // and escapes.
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + 777).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(text[at..end].to_string());
        at = end;
    }
    out
}

fn filled(spill_after: Option<usize>, dir: &SpoolDir) -> StreamStore {
    let mut s = StreamStore::default();
    for (i, c) in chunks().iter().enumerate() {
        if spill_after == Some(i) {
            let f = SpoolFile::create(dir, &format!("s{i}")).expect("file");
            s.spill(f).expect("spill");
        }
        s.append(c).expect("append");
    }
    s
}

#[test]
fn a_spilled_stream_reads_back_exactly_as_the_one_in_memory() {
    let (_base, dir) = spool_dir();
    let mut memory = filled(None, &dir);
    let whole = memory.full_text();
    assert_eq!(whole, clean_text(&chunks().concat()));
    for spill_after in [0, 1, chunks().len() / 2] {
        let mut spilled = filled(Some(spill_after), &dir);
        assert!(spilled.is_spilled());
        assert!(
            spilled.mem_bytes() < 1024,
            "only the last line stays in memory"
        );
        assert_eq!(
            spilled.full_text(),
            whole,
            "spilled after chunk {spill_after}"
        );
        assert_eq!(spilled.len(), whole.len());
        assert_eq!(spilled.raw_len(), memory.raw_len());
        for limit in [0, 1, 100, 20_000, whole.len() + 1] {
            assert_eq!(
                spilled.head_tail(limit),
                head_tail(&whole, limit),
                "limit {limit}"
            );
        }
        for (offset, limit) in [(0, 10), (5, 1), (1000, 4096), (whole.len() - 3, 100)] {
            let (a, b) = (spilled.page(offset, limit), page(&whole, offset, limit));
            assert_eq!(
                (a.offset, a.next_offset, a.total_bytes),
                (b.offset, b.next_offset, b.total_bytes)
            );
            assert_eq!(a.text, b.text);
        }
        assert_eq!(spilled.last_line(), memory.last_line());
        assert_eq!(spilled.find_line("done 10"), Some("done 10".to_string()));
    }
}

#[test]
fn pages_of_a_spilled_stream_cover_it_without_splitting_characters() {
    let (_base, dir) = spool_dir();
    let mut s = StreamStore::default();
    s.spill(SpoolFile::create(&dir, "p").expect("file"))
        .expect("spill");
    let text = "aé漢\n".repeat(100) + "tail é";
    s.append(&text).expect("append");
    let mut joined = String::new();
    let mut offset = 0;
    loop {
        let p = s.page(offset, 4);
        if p.text.is_empty() {
            break;
        }
        joined.push_str(&p.text);
        offset = p.next_offset;
    }
    assert_eq!(joined, text);
}

#[test]
fn an_endless_progress_line_stays_bounded_and_keeps_its_last_frame() {
    let (_base, dir) = spool_dir();
    let mut s = StreamStore::default();
    s.spill(SpoolFile::create(&dir, "bar").expect("file"))
        .expect("spill");
    for i in 0..200_000 {
        s.append(&format!("\rprogress {i:>7}")).expect("append");
        assert!(s.mem_bytes() <= PENDING_MAX + 32);
    }
    assert_eq!(s.full_text(), "progress  199999");
}

#[test]
fn clearing_a_spilled_stream_removes_its_file() {
    let (_base, dir) = spool_dir();
    let mut s = StreamStore::default();
    s.spill(SpoolFile::create(&dir, "c").expect("file"))
        .expect("spill");
    s.append("a\nb").expect("append");
    let path = s.spool_path().expect("spilled").to_path_buf();
    assert!(path.exists());
    s.clear();
    assert!(!path.exists());
    assert!(!s.is_spilled());
    assert_eq!(s.full_text(), "");
}
