//! Limits and defaults (docs/limits.md). The CLI can override them; `server_info` reports them.

use std::time::Duration;

use serde::Serialize;

/// Server-wide limits. Sizes in bytes, times as noted.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Limits {
    /// Largest `code` accepted by one call (bytes); larger → `LIMIT_EXCEEDED`.
    pub max_code_bytes: usize,
    /// How long `execute` waits before answering `running` (seconds).
    pub default_wait_s: f64,
    /// Text per stream shown in one response (bytes; head + tail).
    pub stream_bytes: usize,
    /// Output kept per run (bytes).
    pub stored_bytes_per_run: usize,
    /// Largest image returned inline (decoded bytes); a larger one is scaled down to fit.
    pub max_image_bytes: usize,
    /// Longest side of an image the agent gets (pixels; `--image-max-px`): a larger one is
    /// scaled down, and the original stays the run's resource.
    pub image_max_px: u32,
    /// Runs waiting per session beyond the running one.
    pub queue_length: usize,
    /// Sessions per server; one more is `LIMIT_EXCEEDED`.
    pub max_sessions: usize,
    /// Memory per session: the kernel's whole process tree (MiB; 0 = none). Enforced by the
    /// kernel's supervisor.
    pub max_memory_mib: u64,
    /// Default kernel start-up timeout (seconds).
    pub startup_timeout_s: u64,
    /// Grace after an interrupt before a timed-out run's kernel is restarted (seconds).
    pub interrupt_grace_s: u64,
    /// Each of the two waits of the shutdown ladder (seconds).
    pub shutdown_grace_s: f64,
    /// Wait for iopub `idle` after `execute_reply` (seconds).
    pub iopub_grace_s: u64,
    /// Idle seconds before a session expires when `create_session` does not say
    /// (`None`: never; the service uses [`SERVICE_EXPIRES_AFTER_S`]).
    pub default_expires_after_s: Option<u64>,
}

/// Output kept per run (bytes); beyond it, output is dropped with a notice.
pub const MAX_STORED_BYTES: usize = 64 * 1024 * 1024;

/// The default of `--image-max-px`: what vision models read images at anyway (about 1.15
/// megapixels for a 4:3 figure), so a larger image only costs the agent's context.
pub const DEFAULT_IMAGE_MAX_PX: u32 = 1568;

/// The service's default idle expiry of a session: one day.
pub const SERVICE_EXPIRES_AFTER_S: u64 = 86_400;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_code_bytes: 1024 * 1024,
            default_wait_s: 50.0,
            stream_bytes: 20_000,
            stored_bytes_per_run: MAX_STORED_BYTES,
            max_image_bytes: 1024 * 1024,
            image_max_px: DEFAULT_IMAGE_MAX_PX,
            queue_length: 64,
            max_sessions: 64,
            max_memory_mib: 4096,
            startup_timeout_s: 60,
            interrupt_grace_s: 5,
            shutdown_grace_s: 2.5,
            iopub_grace_s: 4,
            default_expires_after_s: None,
        }
    }
}

impl Limits {
    pub fn interrupt_grace(&self) -> Duration {
        Duration::from_secs(self.interrupt_grace_s)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs_f64(self.shutdown_grace_s)
    }
    pub fn iopub_grace(&self) -> Duration {
        Duration::from_secs(self.iopub_grace_s)
    }
    /// How long a call waits for a run when it does not say (`default_wait_s`).
    pub fn default_wait(&self) -> Duration {
        Duration::from_secs_f64(self.default_wait_s)
    }
}
