//! The MCP surface: the handler (`server`), the tools, one file per tool or family, with the
//! table of their sets and hints (`tools`), who makes a request (`caller`), errors at the
//! edge (`error`), rendering of runs into `CallToolResult`s (`render`), the compact schemas
//! of `tools/list` (`schema`), tasks and resources on runs (`tasks`, `resources`), log
//! forwarding (`logging`), a client's cancellation told from its connection's end (`cancel`),
//! HTTP session lifetimes (`http_sessions`), the transports (`serve`, `http`, `sse`), what
//! access each call needs under OAuth scopes (`access`), the MCP Apps view (`ui`) and each
//! request's telemetry span (`traced`).
//! Authentication itself is [`crate::auth`]'s.

pub mod access;
mod arg_names;
pub mod audit;
pub mod caller;
pub(crate) mod cancel;
pub(crate) mod error;
pub mod http;
pub mod http_sessions;
pub mod images;
pub mod logging;
pub(crate) mod render;
pub mod resources;
pub mod schema;
pub mod serve;
pub mod server;
pub mod sse;
mod tasks;
pub(crate) mod tools;
pub mod toolset;
mod traced;
pub mod ui;

pub use server::KernelMcp;
pub use toolset::{CODE_TOOLS, DEFAULT_TOOLS, MINIMAL_TOOLS, NamedSet, Toolset};
