//! Session tools against the real binary and real ipykernel: execute_file (argv, `__file__`,
//! tracebacks, relative paths), interpreters (`python=`, a cwd `.venv`), install_packages,
//! complete/inspect, get_session(include_variables), and rich displays as text.
//!
//! Each tool's tests are a submodule: `execute_file`, `create_session` (the interpreter a
//! session gets, and the `env` it may be given), `packages` (install_packages),
//! `introspection` (complete, inspect, the variables of get_session) and `rich_displays`.

mod create_session;
mod execute_file;
mod introspection;
mod packages;
mod rich_displays;
