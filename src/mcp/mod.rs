//! The MCP surface: tool parameters ([`params`]), the tools ([`server`]), rendering of records
//! into `CallToolResult`s ([`render`]) and the transports ([`serve`]).

pub mod params;
pub mod render;
pub mod serve;
pub mod server;

pub use server::KernelMcp;
