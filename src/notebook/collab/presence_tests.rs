//! Awareness: the table's rules and where cursors are.

use std::collections::HashMap;

use serde_json::json;
use yrs::updates::decoder::Decode;
use yrs::{Array, Assoc, Doc, IndexedSequence, StateVector, Transact, Update};

use super::*;
use crate::notebook::collab::schema::{Roots, cell_prelim};

fn update(client: u64, clock: u32, json: &str) -> AwarenessUpdate {
    let mut clients = HashMap::new();
    clients.insert(
        ClientID::new(client),
        AwarenessUpdateEntry {
            clock,
            json: json.into(),
        },
    );
    AwarenessUpdate { clients }
}

#[test]
fn newer_clocks_replace_states_and_a_null_removes_one() {
    let mut me = Local::new(1, json!({"user": {"name": "agent"}}));
    let mut peers = Peers::default();
    peers.apply(&update(2, 1, r#"{"user": {"name": "Ada"}}"#), &mut me);
    peers.apply(
        &update(2, 3, r#"{"user": {"display_name": "Ada L."}}"#),
        &mut me,
    );
    peers.apply(&update(2, 2, r#"{"user": {"name": "old"}}"#), &mut me);
    let names: Vec<String> = peers.present().map(|(id, s)| display_name(id, s)).collect();
    assert_eq!(names, ["Ada L."]);
    peers.apply(&update(2, 3, "null"), &mut me);
    assert_eq!(peers.present().count(), 0);
    // Garbage and oversized states are ignored.
    peers.apply(&update(3, 1, "{not json"), &mut me);
    let big = format!(r#"{{"x": "{}"}}"#, "a".repeat(MAX_STATE_BYTES));
    peers.apply(&update(4, 1, &big), &mut me);
    assert_eq!(peers.present().count(), 0);
}

#[test]
fn someone_declaring_us_gone_makes_us_announce_again_with_a_newer_clock() {
    let mut me = Local::new(1, json!({}));
    let mut peers = Peers::default();
    assert!(peers.apply(&update(1, 5, "null"), &mut me));
    let entry = me.update().clients.values().next().unwrap().clone();
    assert!(entry.clock > 5);
    assert_ne!(&*entry.json, "null");
}

#[test]
fn our_own_state_echoed_back_by_the_server_is_not_answered() {
    let mut me = Local::new(1, json!({"user": {"name": "agent"}}));
    let mut peers = Peers::default();
    let echo = me.update();
    assert!(!peers.apply(&echo, &mut me));
    assert_eq!(peers.present().count(), 0, "we are not our own peer");
    assert_eq!(me.update(), echo, "no new clock");
}

#[test]
fn the_user_jupyterlab_reads_has_initials_name_and_color() {
    let who = Collaborator {
        name: "Claude (kernel-mcp)".into(),
        color: "#7b61ff".into(),
    };
    let u = who.user("kernel-mcp-1");
    assert_eq!(u["initials"], "CK");
    assert_eq!(u["display_name"], "Claude (kernel-mcp)");
    assert_eq!(u["username"], "kernel-mcp-1");
}

/// Two cells; a person's cursor (as JupyterLab writes it, relative positions as JSON) in
/// the second.
#[test]
fn a_cursor_in_a_cells_source_marks_that_cell_as_being_edited() {
    let doc = Doc::with_client_id(1);
    let roots = Roots::of(&doc);
    {
        let mut txn = doc.transact_mut();
        for (id, src) in [("a", "one\n"), ("b", "two\n"), ("c", "")] {
            let cell = json!({"id": id, "cell_type": "code", "source": src, "metadata": {}, "outputs": [], "execution_count": null});
            roots
                .cells
                .push_back(&mut txn, cell_prelim(cell.as_object().unwrap()));
        }
    }
    // The person's own replica, where their editor computes the positions.
    let person = Doc::with_client_id(2);
    let all = doc
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    person
        .transact_mut()
        .apply_update(Update::decode_v1(&all).unwrap())
        .unwrap();
    let proots = Roots::of(&person);
    let (in_b, at_end_of_c) = {
        let txn = person.transact();
        let b = crate::notebook::collab::schema::find(&txn, &proots, "b")
            .unwrap()
            .1;
        let tb = crate::notebook::collab::schema::source_text(&txn, &b).unwrap();
        let pos = tb.sticky_index(&txn, 2, Assoc::After).unwrap();
        let c = crate::notebook::collab::schema::find(&txn, &proots, "c")
            .unwrap()
            .1;
        let tc = crate::notebook::collab::schema::source_text(&txn, &c).unwrap();
        // An empty text: Yjs names the text itself (`type`), as yrs' own sticky index would.
        let end = StickyIndex::new(IndexScope::from_branch(branch_of(&tc)), Assoc::After);
        (
            serde_json::to_value(&pos).unwrap(),
            serde_json::to_value(&end).unwrap(),
        )
    };
    let mut me = Local::new(1, json!({}));
    let mut peers = Peers::default();
    let state = json!({
        "user": {"name": "Ada"},
        "cursors": [{"anchor": in_b, "head": in_b, "primary": true, "empty": true}],
    });
    peers.apply(&update(2, 1, &state.to_string()), &mut me);
    // Yjs writes absent fields as null.
    let state3 = json!({
        "user": {"name": "Bo"},
        "cursors": [{"anchor": {"type": at_end_of_c.get("type"), "tname": null, "item": at_end_of_c.get("item"), "assoc": 0}, "head": null}],
    });
    peers.apply(&update(3, 1, &state3.to_string()), &mut me);
    // A cursor pointing nowhere known is ignored.
    let state4 = json!({"cursors": [{"anchor": {"item": {"client": 99, "clock": 7}}, "head": {"item": {"client": 1u64 << 60, "clock": 1}}}]});
    peers.apply(&update(4, 1, &state4.to_string()), &mut me);
    let txn = doc.transact();
    let editing = peers.editing(&txn, &roots);
    assert_eq!(editing.get("b"), Some(&vec!["Ada".to_string()]));
    assert_eq!(editing.get("c"), Some(&vec!["Bo".to_string()]));
    assert!(!editing.contains_key("a"), "{editing:?}");
}
