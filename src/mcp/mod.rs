//! The MCP surface: tool parameters (`params`), the handler (`server`) and its tools
//! (`tools_*.rs`), errors at the edge (`error`), rendering of records into
//! `CallToolResult`s (`render`) and the transports (`serve`).

pub(crate) mod error;
pub mod http;
pub mod images;
pub mod logging;
pub(crate) mod params;
pub(crate) mod render;
pub mod resources;
pub mod results;
pub mod schema;
pub mod scope;
pub mod serve;
pub mod server;
pub mod sse;
mod tasks;
mod tools_code;
mod tools_env;
mod tools_fresh;
mod tools_history;
mod tools_run;
mod tools_service;
mod tools_session;
mod tools_state;
pub mod toolset;

pub use server::KernelMcp;
pub use toolset::{CODE_TOOLS, DEFAULT_TOOLS, MINIMAL_TOOLS, NamedSet, Toolset};
