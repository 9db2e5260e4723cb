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
            Slot::Stream { stderr, start, end } => out.stream_slice(*stderr, *start, *end).into(),
            Slot::Display(i) => format!("display {i}"),
            Slot::Error => "error".into(),
        })
        .collect();
    assert_eq!(texts, ["ab\n", "e\n", "display 0", "c\n", "error"]);
    // The agent's view: one text per stream.
    assert_eq!(out.stream_text(false), "ab\nc\n");
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
    assert_eq!(out.stream_text(false), "ab");
    let clear = Message::new("clear_output", json!({"wait": false}), "s");
    out.apply_iopub(&clear, &q, false);
    out.apply_iopub(&stream("stdout", "cd\r"), &q, false);
    assert_eq!(out.stream_text(false), "cd");
    assert_eq!(out.slots().len(), 1);
}
