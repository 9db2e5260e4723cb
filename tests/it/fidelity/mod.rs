//! The fidelity test (issue 17): real notebooks from Jupyter-ecosystem packages
//! (tests/fidelity/SOURCES), executed once by nbclient into tests/fidelity/reference/, are run
//! cell by cell through the real binary over MCP; what the agent sees and what the notebook
//! export writes are compared with nbclient's outputs, cell by cell, up to the normalisations
//! in `normalise::NORMALISATIONS` (docs/fidelity.md says why each is intended). A second test
//! re-executes exported notebooks with nbclient and compares again.
//!
//! The parts are the submodules: `normalise` (the intended differences, applied to both
//! sides), `agent_view` (what the agent should see of a cell, and what it saw),
//! `compare` (the reference notebooks, their code cells and the cell-by-cell comparison,
//! shared with the notebook suites through the re-exports here), `corpus` (the test over
//! the reference notebooks) and `reexecute` (the test that re-executes an export).

mod agent_view;
mod compare;
mod corpus;
mod normalise;
mod reexecute;

pub(crate) use compare::{Diff, code_cells, compare_cells, fidelity_dir, reference_notebooks};
pub(crate) use normalise::Applied;
