//! A running cell's outputs brought to the run's ([`sync_outputs`]) on an in-memory replica:
//! what stays, what grows, what is replaced, and what waits.

use serde_json::{Value, json};

use super::*;
use crate::notebook::collab::replica::{Outgoing, Replica};
use crate::notebook::collab::schema;

/// A replica holding one code cell `c` with no outputs, its changes taken.
fn replica() -> Replica {
    let mut r = Replica::new();
    let cell = json!({"id": "c", "cell_type": "code", "source": "", "metadata": {},
                      "outputs": [], "execution_count": null});
    r.change(0, |txn, roots| {
        roots
            .cells
            .push_back(txn, schema::cell_prelim(cell.as_object().unwrap()));
        Ok(())
    })
    .unwrap();
    r.take_outgoing();
    r
}

/// Sync to `target`; the outputs the document then holds, whether a stream waits, and the
/// bytes the change sent.
fn sync(r: &mut Replica, target: &[Value], whole: bool) -> (Vec<Value>, bool, usize) {
    let waiting = r
        .change(0, |txn, roots| sync_outputs(txn, roots, "c", target, whole))
        .unwrap();
    let sent = match r.take_outgoing() {
        Outgoing::Updates(u) => u.iter().map(Vec::len).sum(),
        _ => 0,
    };
    let nb = r.read(|txn, roots| schema::snapshot(txn, roots)).unwrap();
    (nb.cells()[0].outputs().to_vec(), waiting, sent)
}

fn stream(text: &str) -> Value {
    json!({"output_type": "stream", "name": "stdout", "text": text})
}

fn display(text: &str) -> Value {
    json!({"output_type": "display_data", "data": {"text/plain": text}, "metadata": {}})
}

#[test]
fn a_stream_grows_by_its_new_text_and_an_updated_display_is_replaced_in_place() {
    let mut r = replica();
    let head = "x".repeat(2000);
    let (now, _, _) = sync(&mut r, &[stream(&head), display("0%")], false);
    assert_eq!(now, [stream(&head), display("0%")]);
    // The stream grew: only its new text travels, the display after it stays.
    let grown = format!("{head}y");
    let (now, _, sent) = sync(&mut r, &[stream(&grown), display("0%")], false);
    assert_eq!(now, [stream(&grown), display("0%")]);
    assert!(sent < 200, "an append, not a rewrite of 2000 bytes: {sent}");
    // The display was updated by its display_id: same place, new data, nothing appended.
    let (now, _, _) = sync(&mut r, &[stream(&grown), display("50%")], false);
    assert_eq!(now, [stream(&grown), display("50%")]);
    // Nothing changed: nothing is sent.
    let (_, _, sent) = sync(&mut r, &[stream(&grown), display("50%")], false);
    assert_eq!(sent, 0);
}

#[test]
fn cleared_outputs_are_removed_and_a_short_rewritten_stream_is_replaced_at_once() {
    let mut r = replica();
    sync(&mut r, &[display("plot"), stream("10%")], false);
    // A progress line drawn with \r: the cleaned text no longer extends the old one.
    let (now, waiting, _) = sync(&mut r, &[display("plot"), stream("20%")], false);
    assert_eq!(now, [display("plot"), stream("20%")]);
    assert!(!waiting);
    // clear_output: everything goes.
    let (now, _, _) = sync(&mut r, &[], false);
    assert!(now.is_empty(), "{now:?}");
}

#[test]
fn a_long_stream_cut_at_the_bound_waits_for_a_whole_write_and_what_follows_still_shows() {
    let mut r = replica();
    let long = "a".repeat(LIVE_REWRITE_BYTES + 10);
    sync(&mut r, &[stream(&long)], false);
    let cut = format!("{}[… omitted …]b", &long[..LIVE_REWRITE_BYTES]);
    let (now, waiting, _) = sync(&mut r, &[stream(&cut), display("d")], false);
    assert!(waiting);
    assert_eq!(
        now,
        [stream(&long), display("d")],
        "shown as it was, then the display"
    );
    let (now, waiting, _) = sync(&mut r, &[stream(&cut), display("d")], true);
    assert!(!waiting);
    assert_eq!(now, [stream(&cut), display("d")]);
}

#[test]
fn a_cell_that_is_gone_is_an_error_and_nothing_changes() {
    let mut r = replica();
    let e = r
        .change(0, |txn, roots| {
            sync_outputs(txn, roots, "zz", &[display("d")], true)
        })
        .unwrap_err();
    assert!(matches!(e, CollabError::UnknownCell { .. }), "{e}");
    assert!(matches!(r.take_outgoing(), Outgoing::Nothing));
}
