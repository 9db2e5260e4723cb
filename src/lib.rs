//! kernel-mcp: an MCP server giving AI agents named, persistent sessions on real Jupyter kernels.
//!
//! Layers, top to bottom (user-facing reference: `docs/`):
//! - [`mcp`]: tool parameters → session calls; records → `CallToolResult`.
//! - [`service`]: the per-user service (Unix socket), the `--shared` stdio relay.
//! - [`session`]: one actor per session: queue, runs, history, generation, registry.
//! - [`kernel`]: kernelspec discovery, connection file, launch, sockets, readiness, shutdown.
//! - [`wire`]: Jupyter message model, multipart codec, HMAC. Pure.
//!
//! Beside the layers, [`broker`] lets code in a local Python kernel call other MCP servers'
//! tools (`from kernel_mcp import mcp`), hooked into kernel launch and the session actor.
//!
//! [`instance`] is this process's identity (`server_instance`, `started_at`); [`memory`] hands the
//! heap's freed pages back to the OS.

pub mod broker;
pub mod config;
pub mod instance;
pub mod kernel;
pub mod mcp;
pub mod memory;
pub mod service;
pub mod session;
pub mod wire;
