//! The command-line front end for people (not the MCP server): `doctor` checks the setup and
//! `install` writes an MCP client's config entry. These print to stdout; the server never does.

pub mod doctor;
pub mod install;
pub mod ordered_json;
