//! The MCP surface: tool parameters ([`params`]), the tools ([`server`]), rendering of records
//! into `CallToolResult`s ([`render`]) and the transports ([`serve`]).

/// `Result<T, SessionError>` → `T`, or return the error as a tool result.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return render::error(&e),
        }
    };
}

/// `Result<T, CallToolResult>` → `T`, or return the tool result.
macro_rules! tri_result {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}

pub mod params;
pub mod render;
pub mod serve;
pub mod server;
mod tools_code;
mod tools_history;

pub use server::KernelMcp;
