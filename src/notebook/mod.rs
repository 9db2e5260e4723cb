//! Notebooks as documents an agent works in (docs/tools.md, "Notebooks"; docs/notebooks.md): an
//! `.ipynb` read into memory and addressed by cell id ([`model`]), edited by `edit_cells`'
//! operations all or nothing ([`edit`]), and merged cell by cell with what a person saved
//! meanwhile ([`merge`]), so nothing a person wrote is lost; or worked on live with a person in
//! JupyterLab through a Jupyter Server's collaboration room ([`collab`]).

pub mod bind;
pub mod collab;
pub mod doc;
pub mod edit;
pub mod file;
pub mod merge;
pub mod model;
pub mod run;

pub use edit::{EditError, EditOp, EditOutcome};
pub use file::{NotebookError, NotebookFile, Written};
pub use merge::Conflict;
pub use model::{Cell, CellType, ModelError, Notebook};
