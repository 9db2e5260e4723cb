//! Unit tests of the run output model.

use super::*;
use serde_json::json;

fn display(text: &str, id: &str) -> Message {
    let mut m = Message::new(
        "display_data",
        json!({"data": {"text/plain": text}, "transient": {"display_id": id}}),
        "s",
    );
    m.parent_header = None;
    m
}

#[test]
fn a_display_update_replaces_the_output_with_that_display_id() {
    let mut out = RunOutput::default();
    out.apply_iopub(&display("v1", "d1"), &Quirks::default(), false);
    out.update_display(&json!({"data": {"text/plain": "v2"}, "transient": {"display_id": "d1"}}));
    out.update_display(
        &json!({"data": {"text/plain": "other"}, "transient": {"display_id": "d2"}}),
    );
    assert_eq!(out.outputs().len(), 1);
    assert_eq!(out.outputs()[0].text.as_deref(), Some("v2"));
}

#[test]
fn a_second_display_with_the_same_id_in_one_run_updates_the_first_and_is_shown() {
    let mut out = RunOutput::default();
    let q = Quirks::default();
    out.apply_iopub(&display("v1", "d1"), &q, false);
    out.apply_iopub(&display("other", "d2"), &q, false);
    out.apply_iopub(&display("v2", "d1"), &q, false);
    let texts: Vec<_> = out.outputs().iter().map(|o| o.text.clone()).collect();
    let v2 = Some("v2".to_string());
    assert_eq!(texts, [v2.clone(), Some("other".to_string()), v2]);
}

#[test]
fn output_past_the_cap_is_dropped_with_one_notice_and_late_bytes_are_counted() {
    let mut out = RunOutput::default();
    let q = Quirks::default();
    let chunk = "x".repeat(1024 * 1024);
    let stream = Message::new("stream", json!({"name": "stdout", "text": chunk}), "s");
    for _ in 0..MAX_STORED_BYTES / chunk.len() + 2 {
        out.apply_iopub(&stream, &q, false);
    }
    assert_eq!(out.stored_bytes(), MAX_STORED_BYTES);
    assert!(out.dropped_notice.is_some());
    assert_eq!(out.late_output, 0);
    out.apply_iopub(&stream, &q, true);
    assert_eq!(out.late_output, chunk.len());
}

fn stream(name: &str, text: &str) -> Message {
    Message::new("stream", json!({"name": name, "text": text}), "s")
}

#[test]
fn outputs_keep_the_kernels_order_and_consecutive_stream_chunks_are_one_slot() {
    let mut out = RunOutput::default();
    let q = Quirks::default();
    for m in [
        stream("stdout", "a"),
        stream("stdout", "b\n"),
        stream("stderr", "e\n"),
        display("d", "x"),
        stream("stdout", "c\n"),
    ] {
        out.apply_iopub(&m, &q, false);
    }
    let err = Message::new(
        "error",
        json!({"ename": "E", "evalue": "v", "traceback": []}),
        "s",
    );
    out.apply_iopub(&err, &q, false);
    let texts: Vec<String> = out
        .slots()
        .iter()
        .map(|s| match s {
            Slot::Stream { stderr, start, end } => out
                .stream_slice(*stderr, *start, *end)
                .expect("in memory")
                .into(),
            Slot::Display(i) => format!("display {i}"),
            Slot::Error => "error".into(),
        })
        .collect();
    assert_eq!(texts, ["ab\n", "e\n", "display 0", "c\n", "error"]);
    // The agent's view: one text per stream.
    assert_eq!(out.stream(false).full_text(), "ab\nc\n");
}

#[test]
fn a_text_only_execute_result_is_the_result_and_stays_in_the_model() {
    let mut out = RunOutput::default();
    let r = Message::new(
        "execute_result",
        json!({"data": {"text/plain": "42"}, "execution_count": 3}),
        "s",
    );
    out.apply_iopub(&r, &Quirks::default(), false);
    assert_eq!(out.result.as_deref(), Some("42"));
    assert!(out.outputs().is_empty());
    assert_eq!(out.displays().len(), 1);
    assert_eq!(out.slots(), [Slot::Display(0)]);
}

#[test]
fn clear_output_empties_the_model_and_its_stream_caches() {
    let mut out = RunOutput::default();
    let q = Quirks::default();
    out.apply_iopub(&stream("stdout", "ab\r"), &q, false);
    assert_eq!(out.stream(false).full_text(), "ab");
    let clear = Message::new("clear_output", json!({"wait": false}), "s");
    out.apply_iopub(&clear, &q, false);
    out.apply_iopub(&stream("stdout", "cd\r"), &q, false);
    assert_eq!(out.stream(false).full_text(), "cd");
    assert_eq!(out.slots().len(), 1);
}

/// A spool directory for the life of the test process.
fn test_spool() -> &'static crate::session::run::spool::SpoolDir {
    use std::sync::OnceLock;
    static DIR: OnceLock<(tempfile::TempDir, crate::session::run::spool::SpoolDir)> =
        OnceLock::new();
    let (_, dir) = DIR.get_or_init(|| {
        let base = tempfile::tempdir().expect("temp dir");
        let dir = crate::session::run::spool::open(base.path(), "unit").expect("spool dir");
        (base, dir)
    });
    dir
}

#[test]
fn a_flood_spills_its_stream_and_every_byte_reads_back() {
    let mut out = RunOutput::with_spool("run-flood", Some(test_spool()));
    let q = Quirks::default();
    let line = "x".repeat(999) + "\n";
    let chunk = line.repeat(3000); // ~3 MB per message
    for _ in 0..5 {
        out.apply_iopub(&stream("stdout", &chunk), &q, false);
    }
    out.apply_iopub(&stream("stderr", "warning\n"), &q, false);
    assert!(out.is_spilled(false), "15 MB of stdout went to the spool");
    assert!(!out.is_spilled(true), "a small stderr stays in memory");
    let s = out.stream(false);
    assert!(s.mem_bytes() < 1024);
    assert_eq!(s.len(), chunk.len() * 5);
    assert_eq!(s.full_text(), chunk.repeat(5));
    let last = s.page(chunk.len() * 5 - 1, 10);
    assert_eq!(
        (last.text.as_str(), last.next_offset),
        ("\n", chunk.len() * 5)
    );
    assert_eq!(out.stream(true).full_text(), "warning\n");
    assert_eq!(out.last_line().as_deref(), Some(&line[..200]));
    let clear = Message::new("clear_output", json!({"wait": false}), "s");
    out.apply_iopub(&clear, &q, false);
    assert!(!out.is_spilled(false));
    assert_eq!(
        std::fs::read_dir(test_spool().path())
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("run-flood"))
            .count(),
        0,
        "clear_output removed the spool file"
    );
}

#[test]
fn two_flood_messages_split_mid_line_keep_every_byte() {
    let mut out = RunOutput::with_spool("run-split", Some(test_spool()));
    let q = Quirks::default();
    let line = "x".repeat(999) + "\n";
    let all = line.repeat(50_000);
    let (a, b) = all.split_at(23_334_999);
    out.apply_iopub(&stream("stdout", a), &q, false);
    out.apply_iopub(&stream("stdout", b), &q, false);
    assert_eq!(out.stream(false).len(), all.len());
}

#[test]
fn a_flood_frame_left_raw_by_the_wire_spills_straight_from_the_frame() {
    let signer = crate::wire::Signer::new(b"k");
    let text = ("x".repeat(999) + "\n").repeat(10_000); // 10 MB in one message
    let sent = Message::new("stream", json!({"name": "stdout", "text": text}), "s");
    let msg = crate::wire::decode(crate::wire::encode(&sent, &signer), &signer).expect("decodes");
    assert!(msg.raw_text.is_some(), "a large text stays in the frame");
    let mut out = RunOutput::with_spool("run-raw", Some(test_spool()));
    out.apply_iopub(&msg, &Quirks::default(), false);
    assert!(
        out.is_spilled(false),
        "spilled before any of it was held in memory"
    );
    assert!(out.stream(false).mem_bytes() < 1024);
    assert_eq!(out.stream(false).full_text(), text);
    assert_eq!(out.slots().len(), 1, "one message, one slot");
}
