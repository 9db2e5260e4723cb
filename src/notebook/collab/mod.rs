//! Real-time collaboration with a person in JupyterLab (docs/notebooks.md): a notebook that
//! lives on a Jupyter Server running `jupyter-collaboration` is worked on through its
//! collaboration room, as a collaborator — a Y-CRDT replica of the document (the `yrs` crate)
//! kept in sync over the room's websocket with the y-sync and awareness protocols.
//!
//! The agent's edits and outputs reach a person's open tab as they are made (a stream's
//! text grows as it arrives), the person's edits reach [`Room::snapshot`], the agent shows
//! in JupyterLab's collaborators panel under a name, and a cell the person has their cursor
//! in is not replaced, deleted or moved ([`CollabError::CellBeingEdited`]).
//!
//! Layout: [`connect`] reaches the room (document session, websocket); [`wire`] reads and
//! writes its messages; [`link`] keeps one room in sync (reconnecting); [`replica`] is our
//! copy of the document; [`schema`] maps it to the project's [`Notebook`]; [`ops`] makes
//! the agent's changes in it; [`diff`] keeps source edits granular; [`presence`] is the
//! awareness side (who is there, where their cursors are); [`room`] is the API.
//!
//! [`Notebook`]: crate::notebook::Notebook

pub mod connect;
pub mod diff;
pub mod link;
pub mod ops;
pub mod presence;
pub mod replica;
pub mod room;
pub mod schema;
pub mod values;
pub mod wire;

pub use connect::RoomAddress;
pub use ops::ExecutionState;
pub use presence::Collaborator;
pub use room::{Peer, Room};

use crate::notebook::edit::EditError;
use crate::notebook::model::ModelError;

/// Where a room's connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// The first connection is being made.
    Connecting,
    Connected,
    /// The websocket dropped; changes are kept and sent once it is back.
    Reconnecting,
    /// Given up: the server could not be reached for a minute, or the document grew past
    /// its bound. Open the notebook again.
    Lost(String),
    /// The room was left.
    Closed,
}

/// Why a collaboration call failed. Texts never hold the server's token.
#[derive(Debug, thiserror::Error)]
pub enum CollabError {
    #[error("Jupyter server '{server}' ({url}) cannot be reached for collaboration: {detail}")]
    Unavailable {
        server: String,
        url: String,
        detail: String,
    },
    #[error("Jupyter server '{server}' refused the token (HTTP {status})")]
    Unauthorized { server: String, status: u16 },
    #[error(
        "Jupyter server '{server}' has no real-time collaboration (no /api/collaboration endpoints): \
         install jupyter-collaboration there, or open the notebook as a file"
    )]
    NotCollaborative { server: String },
    #[error("the Jupyter server has no notebook at {path:?} (paths are relative to its root)")]
    NotFound { path: String },
    #[error("no cell has id {id:?} in the shared notebook; read the cells again for their ids")]
    UnknownCell { id: String },
    #[error(
        "cell {cell:?} is being edited by {by} in JupyterLab (their cursor is in it), so it was not \
         changed; change another cell, or wait until they move out of it"
    )]
    CellBeingEdited { cell: String, by: String },
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error("the shared notebook is not a valid notebook: {0}")]
    Document(#[from] ModelError),
    #[error(
        "the shared notebook would pass {limit_mib} MiB; kernel-mcp keeps notebooks below that"
    )]
    TooLarge { limit_mib: usize },
    #[error("{0}")]
    Protocol(String),
    #[error("{what} did not finish in time")]
    Timeout { what: String },
    #[error("the collaboration room is lost ({reason}); open the notebook again")]
    Lost { reason: String },
    #[error("the collaboration room was closed")]
    Closed,
}
