//! The per-user service: sessions that outlive any one MCP client.
//!
//! `kernel-mcp service` runs the process registry behind a Unix socket ([`listener`]): each
//! connection is a full MCP session over the same handler as stdio, named sessions are shared
//! by every connection, and each connection's `default` session is its own
//! ([`crate::registry::scope`]). `kernel-mcp serve --shared` is the stdio entry point turned into a
//! byte relay to that socket, starting the service when none listens ([`relay`]); the relay
//! and the commands for people trust the socket only after [`crate::trust`]'s checks. With
//! `--http` the service also serves streamable HTTP, always behind a token ([`http`]). Where
//! the socket, its locks, the token and the log live is [`paths`]; logging is [`log`]. A
//! client that asks for stricter floors than the service's (a relay's `--sandbox`) says so
//! in a [`hello`] before any MCP byte; `kernel-mcp service status | stop | restart` sends a
//! [`control`] line instead.

pub mod control;
pub mod hello;
pub mod http;
pub mod listener;
pub mod log;
pub mod paths;
pub mod relay;

/// The service's default `--idle-exit-s`: 15 minutes with no session and no connection.
pub const DEFAULT_IDLE_EXIT_S: u64 = 900;
