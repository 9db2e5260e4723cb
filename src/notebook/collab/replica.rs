//! Our copy of a room's document: updates from the room applied to it, our changes made in
//! it and kept until they are sent.
//!
//! Every change of ours is one transaction, sent as one update, so a person sees an edit of
//! several cells at once or not at all. Updates from the room are decoded before they are
//! applied and applied under a panic guard: bytes from a peer that the CRDT library cannot
//! take are an error for this copy (which is then dropped and synced afresh), never a
//! crash. The document is held to [`MAX_DOC_BYTES`]: its encoded size is tracked from the
//! updates that reach it and measured exactly when the tracked size passes the bound.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;
use yrs::updates::decoder::Decode;
use yrs::{Doc, OffsetKind, Options, ReadTxn, StateVector, Transact, TransactionMut, Update};

use super::CollabError;
use super::schema::Roots;
use crate::notebook::model::MAX_NOTEBOOK_BYTES;

/// The largest document kept (its encoded state): as large as a notebook file may be.
pub const MAX_DOC_BYTES: usize = MAX_NOTEBOOK_BYTES;
/// Our changes kept unsent at most (bytes); past it, the whole state is sent on reconnect
/// instead of the list.
const MAX_PENDING_BYTES: usize = 16 * 1024 * 1024;

/// What of our changes is still to send.
#[derive(Debug, Default)]
pub enum Outgoing {
    #[default]
    Nothing,
    /// Updates, oldest first.
    Updates(Vec<Vec<u8>>),
    /// Too many to keep: everything we have (the room ignores what it holds already).
    Everything(Vec<u8>),
}

/// A room's document, ours.
pub struct Replica {
    doc: Doc,
    roots: Roots,
    pending: Vec<Vec<u8>>,
    pending_bytes: usize,
    overflow: bool,
    /// The encoded size as last measured plus every update since (an upper bound).
    approx: usize,
}

impl Replica {
    /// An empty document with a fresh client id (32 bits, as Yjs 13 makes them, never 0:
    /// the server writes a file's content as client 0).
    pub fn new() -> Replica {
        let client = loop {
            let n = u64::from(uuid::Uuid::new_v4().as_u128() as u32);
            if n != 0 {
                break n;
            }
        };
        let doc = Doc::with_options(Options {
            client_id: yrs::ClientID::new(client),
            offset_kind: OffsetKind::Bytes,
            ..Options::default()
        });
        let roots = Roots::of(&doc);
        Replica {
            doc,
            roots,
            pending: Vec::new(),
            pending_bytes: 0,
            overflow: false,
            approx: 0,
        }
    }

    pub fn client_id(&self) -> u64 {
        self.doc.client_id().get()
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// Read the document.
    pub fn read<R>(&self, f: impl FnOnce(&yrs::Transaction, &Roots) -> R) -> R {
        let txn = self.doc.transact();
        f(&txn, &self.roots)
    }

    pub fn state_vector(&self) -> StateVector {
        self.doc.transact().state_vector()
    }

    /// What a peer with state vector `sv` lacks (sync step 2). Our unsent changes are in it,
    /// so they count as sent.
    pub fn diff_for(&mut self, sv: &StateVector) -> Vec<u8> {
        self.pending.clear();
        self.pending_bytes = 0;
        self.overflow = false;
        self.doc.transact().encode_diff_v1(sv)
    }

    /// Our changes not yet sent, taken.
    pub fn take_outgoing(&mut self) -> Outgoing {
        if self.overflow {
            self.overflow = false;
            self.pending.clear();
            self.pending_bytes = 0;
            let all = self.doc.transact().encode_diff_v1(&StateVector::default());
            return Outgoing::Everything(all);
        }
        if self.pending.is_empty() {
            return Outgoing::Nothing;
        }
        self.pending_bytes = 0;
        Outgoing::Updates(std::mem::take(&mut self.pending))
    }

    /// Apply an update from the room.
    ///
    /// Errors: [`CollabError::Protocol`] when it does not decode or the CRDT library refuses
    /// it (this copy may then be inconsistent: drop it and sync afresh);
    /// [`CollabError::TooLarge`] when the document passed [`MAX_DOC_BYTES`].
    pub fn apply_remote(&mut self, bytes: &[u8]) -> Result<(), CollabError> {
        let doc = &self.doc;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let update = Update::decode_v1(bytes).map_err(|e| e.to_string())?;
            doc.transact_mut()
                .apply_update(update)
                .map_err(|e| e.to_string())
        }));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(CollabError::Protocol(format!(
                    "an update from the room does not apply: {e}"
                )));
            }
            Err(_) => {
                return Err(CollabError::Protocol(
                    "an update from the room broke the document library; the copy is synced afresh"
                        .into(),
                ));
            }
        }
        self.approx = self.approx.saturating_add(bytes.len());
        self.check_size(0)
    }

    /// Make a change of ours in one transaction; what it changed is kept to send. `extra`:
    /// bytes the change adds (checked against [`MAX_DOC_BYTES`] before anything changes).
    /// `f` must check everything that could fail before it changes anything.
    ///
    /// Errors: `f`'s, or [`CollabError::TooLarge`].
    pub fn change<R>(
        &mut self,
        extra: usize,
        f: impl FnOnce(&mut TransactionMut, &Roots) -> Result<R, CollabError>,
    ) -> Result<R, CollabError> {
        self.check_size(extra)?;
        let mut txn = self.doc.transact_mut();
        let out = f(&mut txn, &self.roots)?;
        let update = txn.encode_update_v1();
        drop(txn);
        // An empty update is two zero bytes (no structs, no deletions).
        if update.len() > 2 {
            self.approx = self.approx.saturating_add(update.len());
            self.pending_bytes += update.len();
            self.pending.push(update);
            if self.pending_bytes > MAX_PENDING_BYTES {
                self.overflow = true;
                self.pending.clear();
                self.pending_bytes = 0;
            }
        }
        Ok(out)
    }

    /// Err when the document, plus `extra` bytes, would pass [`MAX_DOC_BYTES`].
    fn check_size(&mut self, extra: usize) -> Result<(), CollabError> {
        if self.approx.saturating_add(extra) <= MAX_DOC_BYTES {
            return Ok(());
        }
        self.approx = self
            .doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default())
            .len();
        if self.approx.saturating_add(extra) <= MAX_DOC_BYTES {
            return Ok(());
        }
        Err(CollabError::TooLarge {
            limit_mib: MAX_DOC_BYTES >> 20,
        })
    }
}

impl Default for Replica {
    fn default() -> Self {
        Replica::new()
    }
}

/// The bytes `v` adds to a document, roughly (its JSON).
pub fn weight(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}
