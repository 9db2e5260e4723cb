//! kernel-mcp: an MCP server giving AI agents named, persistent sessions on real Jupyter kernels.
//!
//! Layers, top to bottom: a module names modules of its own layer or below, never above
//! (`tests/it/layering.rs` enforces this order, and checks this list against it). The
//! binary's command line (`src/cli/`, `src/main.rs`) stands on all of them. User-facing
//! reference: `docs/`.
//! - [`service`]: the per-user service (Unix socket, and HTTP behind a token), the `--shared`
//!   stdio relay.
//! - [`jupyter`], [`mcp`]: the faces, side by side: the Jupyter Server kernels API and
//!   channels websocket beside `/mcp`, so Jupyter's own clients reach the sessions; and the
//!   MCP tools (parameters → registry and session calls; records → `CallToolResult`).
//! - [`auth`]: who a request comes from and how far it may go, under every face (the static
//!   token, OAuth 2.1 access tokens, a socket peer's uid).
//! - [`notebook`]: notebooks as documents an agent works in: cells by id, edits all or
//!   nothing, a merge with what a person saved, live collaboration rooms.
//! - [`ops`]: operations on a session built from several actor calls (files, variables,
//!   packages, history sources and exports, checkpoints).
//! - [`registry`], [`broker`]: which sessions exist and who may reach them (keys made only by
//!   the caller's scope), the one run index, expiry, and where kernels come from; the broker
//!   lets code in a local Python kernel call other MCP servers' tools
//!   (`from kernel_mcp import mcp`), hooked into kernel launch and the session actor.
//! - [`session`]: one actor per session: queue, runs, history, generation.
//! - [`kernel`]: kernelspec discovery, connection file, launch, sockets, readiness, shutdown.
//! - [`artifacts`], [`config`], [`instance`], [`memory`], [`principal`], [`secrets`], [`telemetry`], [`tls`], [`trust`]:
//!   values sessions keep by reference (the store, filed by any key); limits and defaults; this process's identity (`server_instance`, `started_at`); handing
//!   the heap's freed pages back to the OS; who is calling ([`principal::Principal`]) and how
//!   far they may go ([`principal::Access`]), as plain values every layer may read;
//!   kernel-mcp's tokens kept out of every process it starts for code; OpenTelemetry spans,
//!   metrics and trace context (export off unless `OTEL_*` says); the TLS provider;
//!   whether a directory or a socket's peer may be trusted with our code (the service's
//!   socket; both its ends check).
//! - [`wire`]: Jupyter message model, multipart codec, HMAC. Pure.

pub mod artifacts;
pub mod auth;
pub mod broker;
pub mod config;
pub mod instance;
pub mod jupyter;
pub mod kernel;
pub mod mcp;
pub mod memory;
pub mod notebook;
pub mod ops;
pub mod principal;
pub mod registry;
pub mod secrets;
pub mod service;
pub mod session;
pub mod telemetry;
pub mod tls;
pub mod trust;
pub mod wire;
