//! The notebook schema and the agent's changes on in-memory documents: a "server" document
//! written the way jupyter_ydoc loads a file, synced into our replica.

use serde_json::{Value, json};
use yrs::updates::decoder::Decode;
use yrs::{
    Any, Array, Assoc, Doc, GetString, IndexedSequence, Map, MapPrelim, Out, ReadTxn, StateVector,
    TextPrelim, Transact, Update,
};

use super::*;
use crate::notebook::collab::CollabError;
use crate::notebook::collab::ops;
use crate::notebook::collab::replica::{self, Replica};
use crate::notebook::edit::EditOp;

/// A document as the server makes it from a file: client 0, floats for nbformat numbers,
/// a stream output whose text is a shared text.
fn server_doc() -> Doc {
    let doc = Doc::with_client_id(1);
    let roots = Roots::of(&doc);
    let mut txn = doc.transact_mut();
    roots.meta.insert(&mut txn, "nbformat", Any::from(4.0));
    roots
        .meta
        .insert(&mut txn, "nbformat_minor", Any::from(5.0));
    let md: MapPrelim = [(
        "kernelspec",
        In::Any(Any::from_json(r#"{"name": "python3", "display_name": "Python 3"}"#).unwrap()),
    )]
    .into();
    roots.meta.insert(&mut txn, "metadata", md);
    for (id, src) in [
        ("a", "x = 1\nprint(x)\n"),
        ("b", "y = 2\n"),
        ("c", "z = 3\n"),
    ] {
        let cell = json!({
            "id": id, "cell_type": "code", "source": src, "metadata": {"tags": ["t"]},
            "execution_count": 4,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}],
        });
        roots
            .cells
            .push_back(&mut txn, cell_prelim(cell.as_object().unwrap()));
    }
    drop(txn);
    doc
}

fn synced(server: &Doc) -> Replica {
    let mut r = Replica::new();
    let all = server
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    r.apply_remote(&all).unwrap();
    r
}

/// Send the replica's pending changes to `server`.
fn push(r: &mut Replica, server: &Doc) {
    if let replica::Outgoing::Updates(list) = r.take_outgoing() {
        for u in list {
            server
                .transact_mut()
                .apply_update(Update::decode_v1(&u).unwrap())
                .unwrap();
        }
    }
}

fn ops(v: Value) -> Vec<EditOp> {
    serde_json::from_value(v).unwrap()
}

fn sources(doc: &Doc) -> Vec<(String, String)> {
    let roots = Roots::of(doc);
    let txn = doc.transact();
    snapshot(&txn, &roots)
        .unwrap()
        .cells()
        .iter()
        .map(|c| (c.id().to_string(), c.source()))
        .collect()
}

#[test]
fn a_document_reads_as_the_notebook_jupyter_would_save() {
    let r = synced(&server_doc());
    let nb = r.read(|txn, roots| snapshot(txn, roots)).unwrap();
    assert_eq!(nb.top()["nbformat"], json!(4));
    assert_eq!(nb.top()["nbformat_minor"], json!(5));
    assert_eq!(nb.kernelspec_name(), Some("python3"));
    let a = &nb.cells()[0];
    assert_eq!(a.id(), "a");
    assert_eq!(a.source(), "x = 1\nprint(x)\n");
    assert_eq!(a.execution_count(), Some(4));
    assert_eq!(a.outputs()[0]["text"], json!("1\n"));
    assert_eq!(a.fields()["metadata"], json!({"tags": ["t"]}));
    assert!(!a.fields().contains_key("execution_state"));
    let nb2 = Notebook::parse(nb.to_text().as_bytes()).unwrap();
    assert_eq!(nb2.cells().len(), 3);
}

#[test]
fn edits_reach_the_server_in_one_update_with_the_files_rules() {
    let server = server_doc();
    let mut r = synced(&server);
    let out = r
        .change(0, |txn, roots| {
            ops::edit(
                txn,
                roots,
                &ops(json!([
                    {"op": "insert", "source": "# Title", "cell_type": "markdown", "index": 0},
                    {"op": "replace", "id": "b", "source": "y = 20\n"},
                    {"op": "delete", "id": "c"},
                    {"op": "move", "id": "a", "after": "b"},
                ])),
                &Default::default(),
            )
        })
        .unwrap();
    assert!(matches!(r.take_outgoing(), replica::Outgoing::Updates(l) if l.len() == 1));
    let mut r2 = synced(&server);
    let out2 = r2.change(0, |txn, roots| {
        ops::edit(
            txn,
            roots,
            &ops(json!([{"op": "insert", "source": "q"}])),
            &Default::default(),
        )
    });
    assert!(out2.is_ok());
    push(&mut r2, &server);
    // Replay ours onto the server as the room would.
    let all = r.read(|txn, _| txn.encode_state_as_update_v1(&StateVector::default()));
    server
        .transact_mut()
        .apply_update(Update::decode_v1(&all).unwrap())
        .unwrap();
    let got = sources(&server);
    let md = out.inserted[0].clone();
    let ids: Vec<&str> = got.iter().map(|(i, _)| i.as_str()).collect();
    assert_eq!(&ids[..3], [md.as_str(), "b", "a"]);
    assert_eq!(got[1].1, "y = 20\n");
    // The moved cell kept its outputs and count.
    let roots = Roots::of(&server);
    let nb = snapshot(&server.transact(), &roots).unwrap();
    assert_eq!(nb.cells()[2].execution_count(), Some(4));
    assert_eq!(nb.cells()[2].outputs().len(), 1);
    assert_eq!(
        nb.cells()[0].cell_type(),
        crate::notebook::CellType::Markdown
    );
}

#[test]
fn a_replaced_source_keeps_a_cursor_placed_in_an_unchanged_line() {
    let server = server_doc();
    let mut r = synced(&server);
    // A person's cursor before "print" in cell a, on the server side.
    let roots = Roots::of(&server);
    let sticky = {
        let txn = server.transact();
        let Some(Out::YMap(a)) = roots.cells.get(&txn, 0) else {
            panic!()
        };
        let text = source_text(&txn, &a).unwrap();
        text.sticky_index(&txn, 6, Assoc::After).unwrap()
    };
    r.change(0, |txn, roots| {
        ops::edit(
            txn,
            roots,
            &ops(json!([{"op": "replace", "id": "a", "source": "x = 100\nprint(x)\n"}])),
            &Default::default(),
        )
    })
    .unwrap();
    push(&mut r, &server);
    let txn = server.transact();
    let off = sticky.get_offset(&txn).unwrap();
    // "x = 100\n" is 8 bytes: the cursor is still before "print".
    assert_eq!(off.index, 8);
    let Some(Out::YMap(a)) = roots.cells.get(&txn, 0) else {
        panic!()
    };
    assert_eq!(
        source_text(&txn, &a).unwrap().get_string(&txn),
        "x = 100\nprint(x)\n"
    );
}

#[test]
fn stream_text_grows_the_stream_before_it_and_other_outputs_follow() {
    let server = server_doc();
    let mut r = synced(&server);
    let out = |v: Value| {
        move |txn: &mut yrs::TransactionMut, roots: &Roots| ops::append_output(txn, roots, "b", &v)
    };
    r.change(0, |t, roots| ops::set_outputs(t, roots, "b", &[], None))
        .unwrap();
    r.change(
        0,
        out(json!({"output_type": "stream", "name": "stdout", "text": "a"})),
    )
    .unwrap();
    r.change(
        0,
        out(json!({"output_type": "stream", "name": "stdout", "text": "b\n"})),
    )
    .unwrap();
    r.change(
        0,
        out(json!({"output_type": "stream", "name": "stderr", "text": "e"})),
    )
    .unwrap();
    r.change(
        0,
        out(json!({"output_type": "display_data", "data": {"text/plain": "d"}, "metadata": {}})),
    )
    .unwrap();
    push(&mut r, &server);
    let roots = Roots::of(&server);
    let txn = server.transact();
    let nb = snapshot(&txn, &roots).unwrap();
    let outputs = nb.cells()[1].outputs();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    assert_eq!(outputs[0]["text"], json!("ab\n"));
    assert_eq!(outputs[1]["name"], json!("stderr"));
    // The stream's text is a shared text, as JupyterLab appends to it.
    let Some(Out::YMap(b)) = roots.cells.get(&txn, 1) else {
        panic!()
    };
    let Some(Out::YArray(o)) = b.get(&txn, "outputs") else {
        panic!()
    };
    let Some(Out::YMap(first)) = o.get(&txn, 0) else {
        panic!()
    };
    assert!(matches!(first.get(&txn, "text"), Some(Out::YText(_))));
}

#[test]
fn an_unknown_cell_changes_nothing() {
    let server = server_doc();
    let mut r = synced(&server);
    let e = r
        .change(0, |t, roots| ops::set_outputs(t, roots, "zz", &[], Some(1)))
        .unwrap_err();
    assert!(matches!(e, CollabError::UnknownCell { .. }), "{e}");
    let e = r
        .change(0, |t, roots| {
            ops::edit(
                t,
                roots,
                &ops(json!([{"op": "delete", "id": "a"}, {"op": "delete", "id": "nope"}])),
                &Default::default(),
            )
        })
        .unwrap_err();
    assert!(matches!(e, CollabError::Edit(_)), "{e}");
    assert!(matches!(r.take_outgoing(), replica::Outgoing::Nothing));
}

#[test]
fn bytes_the_library_cannot_take_are_an_error_not_a_panic() {
    let mut r = Replica::new();
    for bad in [
        &b"\x05\xff\xff\xff"[..],
        b"\x01\x01\xff\xff\xff\xff\x0f\x00",
        b"\x00",
    ] {
        assert!(r.apply_remote(bad).is_err(), "{bad:?}");
    }
    let _ = TextPrelim::new("");
}

#[test]
fn a_change_that_would_pass_the_document_bound_is_refused_before_anything_changes() {
    let server = server_doc();
    let mut r = synced(&server);
    let big = replica::MAX_DOC_BYTES;
    let e = r
        .change(big, |t, roots| {
            ops::set_outputs(t, roots, "a", &[], Some(1))
        })
        .unwrap_err();
    assert!(matches!(e, CollabError::TooLarge { limit_mib: 100 }), "{e}");
    assert!(matches!(r.take_outgoing(), replica::Outgoing::Nothing));
}
