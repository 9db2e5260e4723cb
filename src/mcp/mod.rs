//! The MCP surface: tool parameters (`params`), the handler and its tools (`server`,
//! `server/tools_*.rs`), errors at the edge (`error`), rendering of records into
//! `CallToolResult`s (`render`), tasks and resources on runs (`tasks`, `resources`), log
//! forwarding (`logging`), a client's cancellation told from its connection's end (`cancel`),
//! HTTP session lifetimes (`http_sessions`), the transports (`serve`, `http`, `sse`) and what
//! access each call needs under OAuth scopes (`access`). Authentication itself is
//! [`crate::auth`]'s.

pub mod access;
mod arg_names;
pub(crate) mod cancel;
pub(crate) mod error;
pub mod http;
pub mod http_sessions;
pub mod images;
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
pub mod toolset;

pub use server::KernelMcp;
pub use toolset::{CODE_TOOLS, DEFAULT_TOOLS, MINIMAL_TOOLS, NamedSet, Toolset};
