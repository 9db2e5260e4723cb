//! A notebook's collaboration room, joined: what the notebook tools call (docs/notebooks.md).
//!
//! [`Room::join`] opens the notebook's room and syncs it, and joins JupyterLab's global
//! awareness room too (what its collaborators panel lists), announcing the agent in both
//! with a name and a color. Changes ([`Room::apply`], the run methods) are made in our
//! copy at once and sent by the room's task right after; reads ([`Room::snapshot`],
//! [`Room::editing`]) see everything that has arrived. [`Room::sync`] waits for a round trip
//! with the server, so a read after it sees every change the server had when it was asked.
//! Changes made while the websocket is down are kept and exchanged when it is back; a room
//! that cannot be reached again is [`CollabError::Lost`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use yrs::IndexScope;

use super::connect::{self, RoomAddress};
use super::link::{self, Shared, Target};
use super::presence::{self, Collaborator};
use super::replica::weight;
use super::schema;
use super::{CollabError, ExecutionState, LinkState, ops};
use crate::kernel::remote::Gateway;
use crate::notebook::edit::{EditOp, EditOutcome};
use crate::notebook::model::Notebook;

/// How long the first sync of a room may take (a large notebook arrives whole).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long leaving may take before the task is stopped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Someone else in the room, from their awareness state.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub client_id: u64,
    /// Their shown name.
    pub name: String,
    /// Their whole awareness state (`user`, `cursors`, …).
    pub state: Value,
}

/// A joined room. Dropping it leaves the room in the background; [`Room::close`] waits.
pub struct Room {
    path: String,
    doc: Arc<Shared>,
    global: Option<Arc<Shared>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Room {
    /// Join the room of the notebook at `path` (relative to the server's root) on `server`
    /// as `who`, and wait for its document.
    ///
    /// Errors: [`CollabError::NotFound`], [`CollabError::NotCollaborative`],
    /// [`CollabError::Unauthorized`], [`CollabError::Unavailable`], [`CollabError::Timeout`].
    pub async fn join(
        server: &Gateway,
        path: &str,
        who: &Collaborator,
    ) -> Result<Room, CollabError> {
        let path = path.trim_matches('/').to_string();
        let username = format!(
            "kernel-mcp-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let user = who.user(&username);
        let http = connect::http_client(server)?;
        let target = |room| Target {
            gateway: server.clone(),
            room,
            http: http.clone(),
        };
        let doc = Shared::new(json!({ "user": user }));
        let t = target(RoomAddress::Notebook { path: path.clone() });
        let (socket, session) = link::open(&doc, &t, JOIN_TIMEOUT).await?;
        let mut tasks = vec![tokio::spawn(link::run(doc.clone(), t, socket, session))];
        // The collaborators panel reads the global room; without it the agent still edits.
        let global = Shared::new(json!({
            "user": user,
            "current": format!("notebook:{path}"),
            "documents": [path],
        }));
        let t = target(RoomAddress::GlobalAwareness);
        let global = match link::open(&global, &t, JOIN_TIMEOUT).await {
            Ok((socket, _)) => {
                tasks.push(tokio::spawn(link::run(global.clone(), t, socket, None)));
                Some(global)
            }
            Err(e) => {
                tracing::warn!(server = %server.name, "JupyterLab's collaborators panel will not list the agent: {e}");
                None
            }
        };
        Ok(Room {
            path,
            doc,
            global,
            tasks,
        })
    }

    /// The notebook's path on the server.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Our client id in the document (what others see in their awareness table).
    pub fn client_id(&self) -> u64 {
        self.doc.lock().local.client
    }

    /// Where the connection stands.
    pub fn state(&self) -> LinkState {
        self.doc.state.borrow().clone()
    }

    /// Counts changes of the document, ours and others' (one of ours may count twice: the
    /// server sends it back).
    pub fn version(&self) -> u64 {
        *self.doc.version.borrow()
    }

    /// Wait until the version passes `seen`.
    ///
    /// Errors: [`CollabError::Lost`] / [`CollabError::Closed`] when the room ends first.
    pub async fn changed(&self, seen: u64) -> Result<u64, CollabError> {
        let mut rx = self.doc.version.subscribe();
        let mut state = self.doc.state.subscribe();
        loop {
            let v = *rx.borrow_and_update();
            if v > seen {
                return Ok(v);
            }
            self.usable()?;
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err(CollabError::Closed) },
                _ = state.changed() => {}
            }
        }
    }

    /// A round trip with the server: afterwards our copy holds everything the server held
    /// when it was asked (and the server everything we changed before).
    ///
    /// Errors: [`CollabError::Timeout`] after `timeout`; [`CollabError::Lost`].
    pub async fn sync(&self, timeout: Duration) -> Result<(), CollabError> {
        self.usable()?;
        let want = self.doc.request_sync();
        let mut rx = self.doc.synced.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n > want))
            .await
            .map_err(|_| CollabError::Timeout {
                what: "a sync with the collaboration room".into(),
            })?
            .map_err(|_| CollabError::Closed)?;
        Ok(())
    }

    /// Ask the server to write the notebook to its file now (it also saves on its own, a
    /// second after changes); returns its answer: `success`, `skipped` (a save was under
    /// way) or `failed`.
    ///
    /// Errors: [`CollabError::Timeout`], [`CollabError::Lost`].
    pub async fn save(&self, timeout: Duration) -> Result<String, CollabError> {
        self.usable()?;
        let rx = self.doc.request_save();
        tokio::time::timeout(timeout, rx)
            .await
            .map_err(|_| CollabError::Timeout {
                what: "saving the notebook on the server".into(),
            })?
            .map_err(|_| CollabError::Closed)
    }

    /// The notebook as it is now: cells with ids, sources, outputs and counts.
    ///
    /// Errors: [`CollabError::Document`] when it holds something that is not a cell.
    pub async fn snapshot(&self) -> Result<Notebook, CollabError> {
        let shared = self.doc.clone();
        let read = tokio::task::spawn_blocking(move || {
            shared
                .lock()
                .replica
                .read(|txn, roots| schema::snapshot(txn, roots))
        });
        Ok(read
            .await
            .map_err(|e| CollabError::Protocol(e.to_string()))??)
    }

    /// The cells others have their cursor or selection in, each with who.
    pub fn editing(&self) -> BTreeMap<String, Vec<String>> {
        let g = self.doc.lock();
        g.replica.read(|txn, roots| g.peers.editing(txn, roots))
    }

    /// The others in the notebook's room.
    pub fn peers(&self) -> Vec<Peer> {
        peers_of(&self.doc)
    }

    /// The others in JupyterLab's global awareness room (what its collaborators panel
    /// lists); empty when that room could not be joined.
    pub fn online(&self) -> Vec<Peer> {
        self.global.as_deref().map(peers_of).unwrap_or_default()
    }

    /// Apply `edit_cells`' operations, all or nothing, in one change others see at once.
    /// A cell someone has their cursor in is not replaced, deleted or moved.
    ///
    /// Errors: [`CollabError::CellBeingEdited`], [`CollabError::Edit`], [`CollabError::Lost`].
    pub fn apply(&self, ops: &[EditOp]) -> Result<EditOutcome, CollabError> {
        self.usable()?;
        let extra: usize = ops
            .iter()
            .map(|op| match op {
                EditOp::Insert { source, .. } => source.len() + 64,
                EditOp::Replace { source, .. } => source.as_ref().map_or(0, String::len),
                _ => 0,
            })
            .sum();
        let outcome = self.change(extra, |txn, roots, editing| {
            ops::edit(txn, roots, ops, editing)
        })?;
        if let Some(id) = outcome.inserted.last().or(outcome.replaced.last()) {
            self.point_at(id);
        }
        Ok(outcome)
    }

    /// Replace a cell's outputs and execution count.
    ///
    /// Errors: [`CollabError::UnknownCell`], [`CollabError::TooLarge`], [`CollabError::Lost`].
    pub fn set_outputs(
        &self,
        cell: &str,
        outputs: &[Value],
        count: Option<i64>,
    ) -> Result<(), CollabError> {
        self.usable()?;
        let extra = outputs.iter().map(weight).sum();
        self.change(extra, |txn, roots, _| {
            ops::set_outputs(txn, roots, cell, outputs, count)
        })
    }

    /// Append one output to a cell as it arrives (a stream's text grows the stream output
    /// before it, as JupyterLab shows it).
    ///
    /// Errors: as [`Room::set_outputs`].
    pub fn append_output(&self, cell: &str, output: &Value) -> Result<(), CollabError> {
        self.usable()?;
        self.change(weight(output), |txn, roots, _| {
            ops::append_output(txn, roots, cell, output)
        })
    }

    /// Bring a cell's outputs to `outputs` (its run's so far) by the least change; without
    /// `whole` a long stream cut at the output bound waits (see [`ops::sync_outputs`]);
    /// returns true when one did.
    ///
    /// Errors: as [`Room::set_outputs`].
    pub fn show_outputs(
        &self,
        cell: &str,
        outputs: &[Value],
        whole: bool,
    ) -> Result<bool, CollabError> {
        self.usable()?;
        let extra = outputs.iter().map(weight).sum();
        self.change(extra, |txn, roots, _| {
            ops::sync_outputs(txn, roots, cell, outputs, whole)
        })
    }

    /// Set a cell's execution state (`[*]` in JupyterLab while running).
    ///
    /// Errors: [`CollabError::UnknownCell`], [`CollabError::Lost`].
    pub fn set_execution_state(
        &self,
        cell: &str,
        state: ExecutionState,
    ) -> Result<(), CollabError> {
        self.usable()?;
        self.change(0, |txn, roots, _| {
            ops::set_state(txn, roots, cell, state, None)
        })
    }

    /// A run starts: outputs cleared, no count, running; the agent's cursor moves there.
    ///
    /// Errors: as [`Room::set_outputs`].
    pub fn begin_run(&self, cell: &str) -> Result<(), CollabError> {
        self.usable()?;
        self.change(0, |txn, roots, _| {
            ops::set_outputs(txn, roots, cell, &[], None)?;
            ops::set_state(txn, roots, cell, ExecutionState::Running, None)
        })?;
        self.point_at(cell);
        Ok(())
    }

    /// A run ended: its count, idle.
    ///
    /// Errors: as [`Room::set_outputs`].
    pub fn end_run(&self, cell: &str, count: Option<i64>) -> Result<(), CollabError> {
        self.usable()?;
        self.change(0, |txn, roots, _| {
            ops::set_state(txn, roots, cell, ExecutionState::Idle, Some(count))
        })
    }

    /// Leave both rooms (our awareness removed, so JupyterLab drops the agent at once) and
    /// wait for their tasks.
    pub async fn close(mut self) {
        self.doc.close();
        if let Some(g) = &self.global {
            g.close();
        }
        for t in self.tasks.drain(..) {
            let abort = t.abort_handle();
            if tokio::time::timeout(CLOSE_TIMEOUT, t).await.is_err() {
                abort.abort();
            }
        }
    }

    /// Make a change with the editing table at hand.
    fn change<R>(
        &self,
        extra: usize,
        f: impl FnOnce(
            &mut yrs::TransactionMut,
            &schema::Roots,
            &BTreeMap<String, Vec<String>>,
        ) -> Result<R, CollabError>,
    ) -> Result<R, CollabError> {
        let mut g = self.doc.lock();
        let editing = g.replica.read(|txn, roots| g.peers.editing(txn, roots));
        let out = g
            .replica
            .change(extra, |txn, roots| f(txn, roots, &editing))?;
        drop(g);
        self.doc.bump();
        self.doc.kick();
        Ok(out)
    }

    /// Put the agent's cursor at the end of `cell`'s source, so JupyterLab shows where it
    /// works (best effort).
    fn point_at(&self, cell: &str) {
        let mut g = self.doc.lock();
        let cursor = g.replica.read(|txn, roots| {
            let (_, map) = schema::find(txn, roots, cell)?;
            end_of(&schema::source_text(txn, &map)?)
        });
        if let Some(pos) = cursor {
            g.local.set_field(
                "cursors",
                json!([{ "anchor": pos, "head": pos, "primary": true, "empty": true }]),
            );
            drop(g);
            self.doc.announce();
        }
    }

    fn usable(&self) -> Result<(), CollabError> {
        match &*self.doc.state.borrow() {
            LinkState::Lost(reason) => Err(CollabError::Lost {
                reason: reason.clone(),
            }),
            LinkState::Closed => Err(CollabError::Closed),
            _ => Ok(()),
        }
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.doc.close();
        if let Some(g) = &self.global {
            g.close();
        }
    }
}

/// A Yjs relative position at the end of `text` (what a cursor there is in awareness).
fn end_of(text: &yrs::TextRef) -> Option<Value> {
    match IndexScope::from_branch(presence::branch_of(text)) {
        IndexScope::Nested(id) => Some(json!({
            "type": {"client": id.client.get(), "clock": id.clock},
            "tname": null,
            "item": null,
            "assoc": 0,
        })),
        _ => None,
    }
}

fn peers_of(shared: &Shared) -> Vec<Peer> {
    let g = shared.lock();
    g.peers
        .present()
        .map(|(id, state)| Peer {
            client_id: id,
            name: presence::display_name(id, state),
            state: state.clone(),
        })
        .collect()
}
