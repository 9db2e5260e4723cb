//! The command-line front end for people (not the MCP server): `doctor` checks the setup,
//! `install` writes an MCP client's config entry, `env` manages named Python environments;
//! `exec`, `sessions`, `session`, `history` and `console` are MCP clients of the per-user
//! service ([`client`]), so a person sees what the agent sees. These print to stdout; the
//! server never does.

pub mod client;
pub mod console;
pub mod doctor;
pub mod env;
pub mod exec;
pub mod follow;
pub mod install;
pub mod ordered_json;
pub mod sessions;
