//! kernel-mcp: an MCP server giving AI agents named, persistent sessions on real Jupyter kernels.
//!
//! Layers, top to bottom (user-facing reference: `docs/`):
//! - [`mcp`]: tool parameters → session calls; records → `CallToolResult`.
//! - [`service`]: the per-user service (Unix socket, and HTTP behind a token), the `--shared`
//!   stdio relay.
//! - [`jupyter`]: the service's Jupyter face (the Jupyter Server kernels API and channels
//!   websocket beside `/mcp`), so Jupyter's own clients reach the sessions.
//! - [`session`]: one actor per session: queue, runs, history, generation, registry.
//! - [`kernel`]: kernelspec discovery, connection file, launch, sockets, readiness, shutdown.
//! - [`wire`]: Jupyter message model, multipart codec, HMAC. Pure.
//!
//! [`secrets`] keeps kernel-mcp's tokens out of every process it starts for code. [`trust`]
//! says whether a directory or a socket's peer may be trusted with our code (the service's
//! socket; both its ends check). [`instance`] is this process's identity (`server_instance`,
//! `started_at`); [`memory`] hands the heap's freed pages back to the OS.

pub mod config;
pub mod instance;
pub mod jupyter;
pub mod kernel;
pub mod mcp;
pub mod memory;
pub mod ops;
pub mod registry;
pub mod secrets;
pub mod service;
pub mod session;
pub mod trust;
pub mod wire;
