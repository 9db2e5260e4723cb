//! The command-line front end for people (not the MCP server): `doctor` checks the setup,
//! `install` writes an MCP client's config entry, `env` manages named Python environments. These print to stdout; the server never does.

pub mod doctor;
pub mod env;
pub mod install;
pub mod ordered_json;
