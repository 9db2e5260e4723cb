//! What the tasks of one session's endpoint share (see [`super::endpoint`]): the session, its
//! key, its project's downstream servers, its journal, the token that cancels its calls, and
//! its part of the artifact store.
//! The operations ([`super::ops`]) and `explain` read it; the endpoint owns it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::journal::Journal;
use super::project::Project;
use crate::artifacts::Store;
use crate::registry::scope::key::Slot;

/// One session's part of the artifact store: what its kernels' code reaches
/// ([`super::artifacts`]).
#[derive(Clone)]
pub struct SessionArtifacts {
    pub store: Arc<Store<Slot>>,
    /// The session's slot: its artifacts are filed under it, as the agent's tools find them.
    pub slot: Slot,
}

impl SessionArtifacts {
    /// True for the session's own slot (the artifacts a kernel may reach).
    pub fn sees(&self) -> impl Fn(&Slot) -> bool + '_ {
        move |s| s == &self.slot
    }
}

/// What the endpoint's tasks share.
pub struct Shared {
    pub session: String,
    pub(super) key: String,
    pub socket: PathBuf,
    pub project: Arc<Project>,
    pub journal: Mutex<Journal>,
    /// Cancelled (and replaced) when the session cancels what runs in it.
    pub(super) cancel: Mutex<CancellationToken>,
    /// Endpoint files written, newest last.
    pub(super) bindings: Mutex<VecDeque<PathBuf>>,
    /// The session's artifacts, as its kernels' code reaches them.
    pub artifacts: SessionArtifacts,
}

impl Shared {
    /// The token calls made now watch for the session's cancellation.
    pub fn cancel_token(&self) -> CancellationToken {
        super::lock(&self.cancel).clone()
    }

    /// True when `given` is the session's key.
    pub fn key_matches(&self, given: &str) -> bool {
        use subtle::ConstantTimeEq;
        given.len() == self.key.len() && bool::from(given.as_bytes().ct_eq(self.key.as_bytes()))
    }
}
