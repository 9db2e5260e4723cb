//! The MCP surface: tool parameters (`params`), the handler (`server`) and its tools
//! (`tools_*.rs`), errors at the edge (`error`), rendering of records into
//! `CallToolResult`s (`render`) and the transports (`serve`), with the HTTP edge (`http`) and
//! its token (`token`).

pub(crate) mod error;
pub mod http;
pub mod logging;
pub(crate) mod params;
pub(crate) mod render;
pub mod resources;
pub mod results;
pub mod schema;
pub mod serve;
pub mod server;
pub mod sse;
mod tasks;
pub mod token;
mod tools_code;
mod tools_env;
mod tools_fresh;
mod tools_history;
mod tools_run;
mod tools_service;
mod tools_session;
mod tools_state;

pub use server::{KernelMcp, MINIMAL_TOOLS, Toolset};
