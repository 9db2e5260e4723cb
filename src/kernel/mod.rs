//! One kernel process and its five sockets: discovery, launch, readiness, liveness, shutdown.
//! No queueing policy lives here; that is `session/`.

pub mod argv;
pub mod discovery;
pub mod spec;
