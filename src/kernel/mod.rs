//! One kernel process and its sockets: kernelspec discovery, launch, readiness, interrupt and
//! the shutdown ladder. No queueing policy lives here; that is `session/`.
//!
//! This file declares the modules and re-exports what outside users name; no module inside
//! `kernel/` imports from it (a test checks). The shared types are in `types.rs`, a local
//! kernel's start and shutdown in `local.rs`, the seam every kernel is reached through
//! (local, adopted, remote) in `seam.rs`.

pub mod adopted;
pub mod advice;
pub(crate) mod argv;
pub mod cgroup;
pub(crate) mod channels;
pub mod connection;
pub mod discovery;
mod exit;
pub mod fork;
pub mod iopub;
mod local;
pub(crate) mod proc_tree;
pub(crate) mod process;
mod ready;
pub mod remote;
pub mod sandbox;
pub(crate) mod seam;
mod seam_local;
pub(crate) mod spec;
pub mod supervise;
pub mod transit;
mod types;
pub mod usage;

pub use argv::{
    ENV_ENTRY_MAX_BYTES, ENV_TOTAL_MAX_BYTES, IPYTHON_MEMORY_HISTORY, build_argv, env_problem,
    expand_env, keep_ipython_history_in_memory,
};
pub use channels::Channels;
pub use connection::ConnectionInfo;
pub use local::Kernel;
pub use process::{KernelProcess, PARENT_PID_ENV};
pub use sandbox::{Policy as SandboxPolicy, Sandbox, SandboxUnavailable};
pub use seam::{KernelIo, KernelLauncher};
pub use seam_local::LocalLauncher;
pub use spec::{InterruptMode, KernelSpec};
pub use types::{
    Channel, ExitCause, ExitInfo, HookLaunch, InterruptError, KernelEnvHook, KernelEvent,
    LaunchOptions, SendError, ShutdownRung, SocketError, StartError, memory_use_words,
};
