//! Test harness: drive the real `kernel-mcp` binary over stdio with the rmcp client,
//! against real ipykernel kernels from the project's `.venv`.
//!
//! Every test starts its own server ([`Server::start`]), talks to it with [`Server::call`]
//! and ends with [`Server::shutdown`], which closes the client (the server sees stdin EOF
//! and shuts its kernels down) and waits for the server process to exit. When a test
//! panics before that, `Drop` prints the server's stderr (logged at `kernel_mcp=debug`) and
//! sends the server SIGTERM so it still cleans up its kernels.
//!
//! Set `KERNEL_MCP_TEST_STDERR=1` to print the server's stderr at every shutdown.
//!
//! Set `KERNEL_MCP_TEST_SHARED=1` to run the same tests in shared mode: each server is then a
//! relay (`serve --shared`) to a service of its own (socket in its temp dir), which
//! [`Server::shutdown`] (or `Drop`) stops after the relay.
//!
//! Deadlines here only turn a hang into a failure: they are generous on purpose. Tests
//! that pin a bound from the acceptance list measure it themselves.
//!
//! This module owns the venv check and the polling helpers; the core of the harness is in
//! `server` (the [`Server`] a test talks to), `spawn` (the server process, standalone or a
//! relay in shared mode), `results` (reading a tool's result) and `procs` (processes and
//! the files kernels leave), all re-exported here so tests name them `crate::common::…`.
//! The other submodules are harnesses of their own (a service, a broker, OAuth, Jupyter
//! servers…).

#![allow(dead_code)] // each test crate uses a different subset of the helpers

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod procs;
mod results;
mod server;
mod spawn;

pub use procs::{descendants, kernel_files, pid_alive, terminate};
pub use results::{dump, ename, images, is_error, status, structured, text};
pub use server::{CALL_TIMEOUT, Client, Server};
pub use spawn::{
    Spawned, server_command, shared_mode, spawn_server, spawn_server_in, spawn_server_limited,
};

/// `<crate>/.venv`, the environment `make test` prepares (ipykernel, matplotlib…).
pub fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv")
}

/// Panics with instructions unless `.venv/bin/python` can import ipykernel. Checked once
/// per test binary.
pub fn require_venv() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = CHECKED.get_or_init(|| {
        let python = venv().join("bin").join("python");
        let ok = std::process::Command::new(&python)
            .args(["-c", "import ipykernel"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{} cannot import ipykernel: run `make test` (it creates .venv with ipykernel, \
                 jupyter_client, matplotlib) instead of plain `cargo test`",
                python.display()
            ))
        }
    });
    if let Err(msg) = outcome {
        panic!("{msg}");
    }
}

/// [`wait_until`] for a condition that awaits: polls `cond` every 200 ms until it holds or
/// `limit` passes; returns whether it held.
pub async fn wait_until_async<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Poll `cond` every 100 ms until it holds (true) or `limit` passes (false).
pub async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub mod broker;
pub mod cli;
pub mod collab;
pub mod fake;
pub mod gateways;
pub mod history;
pub mod http;
pub mod jupyter;
pub mod kernels;
pub mod oauth;
pub mod person;
pub mod phoenix;
pub mod raw;
pub mod schemas;
pub mod scripted;
pub mod service;
pub mod skip;
pub use skip::skip;
pub mod trust;
