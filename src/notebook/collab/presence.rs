//! Awareness: who is in the room, and where their cursors are.
//!
//! Each client has a JSON state and a clock; a higher clock replaces the state, a `null`
//! state at the same clock removes it (y-protocols' awareness rules). Clients re-send their
//! state every 15 s; one not heard from for [`OUTDATED`] counts as gone.
//!
//! What JupyterLab puts there: `user` (`username`, `name`, `display_name`, `initials`,
//! `color`, `avatar_url`) in every room, and in a document room `cursors`, the selections of
//! the cell editor the person last focused: a list of `{anchor, head, primary, empty}`
//! whose ends are Yjs relative positions (`{"type", "tname", "item": {client, clock},
//! "assoc"}`) inside that cell's `source` text. A cell holding someone's cursor is one
//! they are editing ([`Peers::editing`]). In the `JupyterLab:globalAwareness` room, which
//! feeds JupyterLab's collaborators panel, `current` (`"notebook:PATH"`) and `documents`
//! (paths) say what each one has open.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};
use yrs::{Assoc, ClientID, ID, IndexScope, ReadTxn, StickyIndex};

use super::schema::{self, Roots};
use yrs::branch::BranchPtr;
use yrs::{Array, Out};

/// A client not heard from for this long counts as gone (Yjs' `outdatedTimeout`).
pub const OUTDATED: Duration = Duration::from_secs(30);
/// How often our own state is sent again so that others keep us.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Clients tracked at most (others are ignored).
pub const MAX_PEERS: usize = 1024;
/// The largest client state kept (bytes of JSON); larger ones are ignored.
pub const MAX_STATE_BYTES: usize = 64 * 1024;
/// Cursors read per client at most.
const MAX_CURSORS: usize = 16;
/// Client ids are 53-bit (JavaScript's safe integers).
const MAX_CLIENT: u64 = (1 << 53) - 1;

/// How the agent appears to others: its name in JupyterLab's collaborators panel and on its
/// cursor, and its color there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collaborator {
    /// Shown name (`display_name`), e.g. "Claude (kernel-mcp)".
    pub name: String,
    /// A CSS color (`#7b61ff`, or JupyterLab's `var(--jp-collaborator-color3)`).
    pub color: String,
}

impl Collaborator {
    /// The awareness `user` of this collaborator; `username` is unique per room join, so
    /// JupyterLab never takes the agent for the person themselves.
    pub fn user(&self, username: &str) -> Value {
        let initials: String = self
            .name
            .split_whitespace()
            .filter_map(|w| w.chars().find(|c| c.is_alphanumeric()))
            .take(2)
            .collect::<String>()
            .to_uppercase();
        json!({
            "username": username,
            "name": self.name,
            "display_name": self.name,
            "initials": if initials.is_empty() { "AI".to_string() } else { initials },
            "color": self.color,
            "avatar_url": null,
        })
    }
}

/// Our own awareness entry.
#[derive(Debug, Clone)]
pub struct Local {
    pub client: u64,
    clock: u32,
    state: Value,
}

impl Local {
    pub fn new(client: u64, state: Value) -> Local {
        Local {
            client,
            clock: 1,
            state,
        }
    }

    /// Our state.
    pub fn state(&self) -> &Value {
        &self.state
    }

    /// The update announcing our state.
    pub fn update(&self) -> AwarenessUpdate {
        self.entry(self.state.to_string())
    }

    /// Count a renewal (or a change): the next update supersedes what others hold.
    pub fn bump(&mut self) {
        self.clock = self.clock.wrapping_add(1).max(1);
    }

    /// Set a field of our state (e.g. our `cursors`), bumping the clock.
    pub fn set_field(&mut self, key: &str, value: Value) {
        if let Value::Object(m) = &mut self.state {
            m.insert(key.to_string(), value);
        }
        self.bump();
    }

    /// The update removing us (a `null` state at a new clock), sent when leaving.
    pub fn removal(&mut self) -> AwarenessUpdate {
        self.bump();
        self.entry("null".to_string())
    }

    fn entry(&self, json: String) -> AwarenessUpdate {
        let mut clients = HashMap::new();
        clients.insert(
            ClientID::new(self.client),
            AwarenessUpdateEntry {
                clock: self.clock,
                json: json.into(),
            },
        );
        AwarenessUpdate { clients }
    }
}

#[derive(Debug)]
struct Peer {
    clock: u32,
    state: Option<Value>,
    seen: Instant,
}

/// The other clients' states.
#[derive(Debug, Default)]
pub struct Peers {
    map: HashMap<u64, Peer>,
}

impl Peers {
    /// Apply an awareness update from the room. Returns true when someone declared us gone
    /// (or claimed our client id with a newer clock): we must announce ourselves again. Our
    /// own state echoed back (the server sends each message to its sender too) is not that.
    pub fn apply(&mut self, update: &AwarenessUpdate, me: &mut Local) -> bool {
        let mut reannounce = false;
        let now = Instant::now();
        for (client, entry) in &update.clients {
            let id = client.get();
            if id == me.client {
                // The server echoes our own messages back: only a removal of us, or a newer
                // clock than ours (another client with our id), calls for an answer.
                let removal = &*entry.json == "null";
                if entry.clock > me.clock || (removal && entry.clock == me.clock) {
                    me.clock = entry.clock;
                    me.bump();
                    reannounce = true;
                }
                continue;
            }
            let state = match &*entry.json {
                "null" => None,
                s if s.len() > MAX_STATE_BYTES => continue,
                s => serde_json::from_str::<Value>(s)
                    .ok()
                    .filter(Value::is_object),
            };
            let peer = Peer {
                clock: entry.clock,
                state,
                seen: now,
            };
            let full = self.map.len() >= MAX_PEERS;
            match self.map.get_mut(&id) {
                Some(p)
                    if peer.clock > p.clock || (peer.clock == p.clock && peer.state.is_none()) =>
                {
                    *p = peer;
                }
                Some(_) => {}
                None if !full => {
                    self.map.insert(id, peer);
                }
                None => {}
            }
        }
        reannounce
    }

    /// The states of the clients present (heard from within [`OUTDATED`], not gone).
    pub fn present(&self) -> impl Iterator<Item = (u64, &Value)> {
        self.map
            .iter()
            .filter(|(_, p)| p.seen.elapsed() < OUTDATED)
            .filter_map(|(id, p)| p.state.as_ref().map(|s| (*id, s)))
    }

    /// The cells someone has a cursor or selection in, each with who (their shown names).
    pub fn editing<T: ReadTxn>(&self, txn: &T, roots: &Roots) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let sources = source_branches(txn, roots);
        if sources.is_empty() {
            return out;
        }
        for (id, state) in self.present() {
            let who = display_name(id, state);
            let cursors = state["cursors"].as_array().map_or(&[][..], Vec::as_slice);
            for cursor in cursors.iter().take(MAX_CURSORS) {
                for end in ["anchor", "head"] {
                    let Some(branch) = sticky(&cursor[end]).and_then(|s| s.get_offset(txn)) else {
                        continue;
                    };
                    if let Some(cell) = sources.get(&branch.branch) {
                        let names = out.entry(cell.clone()).or_default();
                        if !names.contains(&who) {
                            names.push(who.clone());
                        }
                    }
                }
            }
        }
        out
    }
}

/// Each cell's `source` text, to the cell's id.
fn source_branches<T: ReadTxn>(txn: &T, roots: &Roots) -> HashMap<BranchPtr, String> {
    let Ok(ids) = schema::ids(txn, roots) else {
        return HashMap::new();
    };
    roots
        .cells
        .iter(txn)
        .zip(ids)
        .filter_map(|(cell, id)| match cell {
            Out::YMap(m) => schema::source_text(txn, &m).map(|t| (branch_of(&t), id)),
            _ => None,
        })
        .collect()
}

/// The branch of a shared text (what a sticky index resolves to).
pub fn branch_of(text: &yrs::TextRef) -> BranchPtr {
    let branch: &yrs::branch::Branch = text.as_ref();
    BranchPtr::from(branch)
}

/// How a client is named: its `user.display_name`, `name` or `username`.
pub fn display_name(id: u64, state: &Value) -> String {
    let user = &state["user"];
    ["display_name", "name", "username"]
        .iter()
        .find_map(|k| user[*k].as_str().filter(|s| !s.trim().is_empty()))
        .map(String::from)
        .unwrap_or_else(|| format!("client {id}"))
}

/// A Yjs relative position (`{"item": {client, clock}}` or `{"type": {client, clock}}`,
/// `assoc` 0 or -1) as a sticky index; `None` when it is not one.
fn sticky(v: &Value) -> Option<StickyIndex> {
    let id = |x: &Value| -> Option<ID> {
        let client = x["client"].as_u64().filter(|c| *c <= MAX_CLIENT)?;
        let clock = u32::try_from(x["clock"].as_u64()?).ok()?;
        Some(ID::new(ClientID::new(client), clock))
    };
    let assoc = match v["assoc"].as_i64() {
        Some(n) if n < 0 => Assoc::Before,
        _ => Assoc::After,
    };
    let scope = if let Some(item) = id(&v["item"]) {
        IndexScope::Relative(item)
    } else {
        IndexScope::Nested(id(&v["type"])?)
    };
    Some(StickyIndex::new(scope, assoc))
}

#[cfg(test)]
#[path = "presence_tests.rs"]
mod tests;
