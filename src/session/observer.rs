//! What a module outside the session core is told about one session (the broker, see
//! `crate::broker`): when a kernel of the session is ready, when the session cancels what
//! runs in it, and which sentences a run's result should carry. The actor calls these from
//! its loop, so they must return at once (no waiting, no I/O beyond a small file).

use std::path::Path;

/// Hooks a session's actor calls; every method has a do-nothing default.
pub trait SessionObserver: Send + Sync {
    /// A kernel of the session is ready; `connection_file` is its connection file when the
    /// kernel is local (or adopted), `None` for a remote kernel.
    fn kernel_ready(&self, connection_file: Option<&Path>) {
        let _ = connection_file;
    }

    /// The session interrupted its kernel (interrupt, cancel, deadline), restarted it, lost
    /// it or is being destroyed: whatever the running code waits for on its behalf ends.
    fn run_cancelled(&self) {}

    /// The observer itself, for a module that knows its type (the broker finds a session's
    /// endpoint this way, to forward an artifact). `None` by default.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// Sentences to add to the notices of a run of `code`, when it starts.
    fn run_notices(&self, code: &str) -> Vec<String> {
        let _ = code;
        Vec::new()
    }
}
