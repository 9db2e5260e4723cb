//! The binary's command line. [`args`] is its shape (clap: every option, its environment
//! variable and default, once); [`dispatch`] runs a parsed command on the runtime it needs, with the
//! [`context`] every command shares;
//! [`serve`] holds the serving commands (`serve`, `serve --shared`, `service`), [`oauth`] turns
//! the OAuth options into the library's resource server (and checks it for `doctor`).
//!
//! The rest is for people (not the MCP server): `doctor` checks the setup, `install` writes an
//! MCP client's config entry, `env` manages named Python environments, `token` prints the
//! service's HTTP token, `broker login` signs in to the broker's OAuth servers ([`broker`]), `service status | stop | restart` ([`service_ctl`]) hold the running service; `exec`, `sessions`, `session`, `history` and `console` are MCP
//! clients of the per-user service ([`client`]), so a person sees what the agent sees. These
//! print to stdout; the server never does.

pub mod args;
pub mod broker;
pub mod client;
pub mod console;
pub mod context;
pub mod dispatch;
pub mod doctor;
pub mod env;
pub mod env_prefix;
pub mod exec;
pub mod follow;
pub mod install;
pub mod log;
pub mod oauth;
pub mod ordered_json;
pub mod serve;
pub mod service_ctl;
pub mod sessions;
pub mod token;
