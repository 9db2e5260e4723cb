//! The warm pool (`--pool KERNEL=N`): N started, ready kernels per kernelspec, so a
//! `create_session` that matches takes one instead of waiting for the kernel's start-up.
//!
//! A pooled kernel is launched as a session with no `cwd`, `env` or memory limit of its own
//! would launch it: the server's working directory, no extra environment, the server's
//! default memory limit and supervisor, the same kernelspec. It has only answered
//! `kernel_info_request`, so its namespace is empty and its first execute has
//! execution_count 1. A session that asks for its own working directory, environment
//! variables or memory limit still gets a pooled kernel, adapted as it is taken (see
//! [`super::adapt`]: one silent request that leaves no history, names or execution count);
//! a session that differs in what is fixed at launch (another interpreter, a sandbox,
//! variables read at start-up, a language without an adapter) starts cold.
//!
//! Pool kernels count toward `max_sessions` (the pool does not refill past it, and gives a
//! kernel up when a cold session needs its room); each is supervised like a session's
//! kernel; [`Pool::shutdown`] stops every one, and aborts the starts in progress (a dropped
//! start kills its process group), so none is orphaned.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use super::adapt::{self, Adaptation};
use crate::kernel::{Kernel, KernelIo, KernelLauncher, LaunchOptions, LocalLauncher, StartError};

/// How long a failed pool start waits before the pool tries that kernelspec again.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// Why a `--pool` option cannot be used; each message names the option as given.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("--pool {0:?}: expected KERNEL=N, e.g. python3=1")]
    NotKernelEqualsN(String),
    #[error("--pool {0:?}: N must be a whole number")]
    NotACount(String),
    #[error("--pool {0:?}: the kernelspec name is empty")]
    NoName(String),
    #[error("--pool {name}={wanted}: {source}")]
    NotFound {
        name: String,
        wanted: usize,
        source: crate::kernel::discovery::KernelNotFound,
    },
}

/// `KERNEL=N` from the command line. Errors: [`PoolError`] naming the bad part.
pub fn parse_pool_arg(s: &str) -> Result<(String, usize), PoolError> {
    let (name, n) = s
        .split_once('=')
        .ok_or_else(|| PoolError::NotKernelEqualsN(s.to_string()))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| PoolError::NotACount(s.to_string()))?;
    if name.trim().is_empty() {
        return Err(PoolError::NoName(s.to_string()));
    }
    Ok((name.trim().to_lowercase(), n))
}

/// One kernelspec's pool: how it launches, the ready kernels and the starts under way.
struct Slot {
    launcher: LocalLauncher,
    wanted: usize,
    ready: Vec<Kernel>,
    starting: Vec<tokio::task::JoinHandle<()>>,
    /// Set after a failed start: no refill before this.
    paused_until: Option<tokio::time::Instant>,
}

/// The warm pool of one server process (empty when no `--pool` was given).
#[derive(Clone, Default)]
pub struct Pool {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    slots: Mutex<BTreeMap<String, Slot>>,
    runtime: Mutex<Option<tokio::runtime::Handle>>,
    closed: AtomicBool,
}

/// Counts for `server_info`: ready and starting kernels per kernelspec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PoolCount {
    pub ready: usize,
    pub starting: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// Keep `wanted` kernels of `launcher.spec` (replacing an earlier entry for that name).
    /// Nothing starts before [`Pool::fill`].
    pub fn add(&self, launcher: LocalLauncher, wanted: usize) {
        let name = launcher.spec.name.clone();
        lock(&self.inner.slots).insert(
            name,
            Slot {
                launcher,
                wanted,
                ready: Vec::new(),
                starting: Vec::new(),
                paused_until: None,
            },
        );
    }

    /// Start filling on `runtime` (where session kernels run); `room` is how many more
    /// kernels the limits allow right now (sessions already count against it).
    pub fn fill(&self, runtime: &tokio::runtime::Handle, room: usize) {
        *lock(&self.inner.runtime) = Some(runtime.clone());
        self.refill(room);
    }

    /// Kernels held (ready + starting), for the limit check.
    pub fn held(&self) -> usize {
        lock(&self.inner.slots)
            .values()
            .map(|s| s.ready.len() + s.starting.len())
            .sum()
    }

    /// Ready and starting kernels per kernelspec.
    pub fn counts(&self) -> BTreeMap<String, PoolCount> {
        lock(&self.inner.slots)
            .iter()
            .map(|(k, s)| {
                let starting = s.starting.iter().filter(|h| !h.is_finished()).count();
                (
                    k.clone(),
                    PoolCount {
                        ready: s.ready.len(),
                        starting,
                    },
                )
            })
            .collect()
    }

    /// Start kernels where a slot is short, as long as `room` allows.
    pub fn refill(&self, mut room: usize) {
        if self.inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let Some(rt) = lock(&self.inner.runtime).clone() else {
            return;
        };
        let mut slots = lock(&self.inner.slots);
        let held: usize = slots
            .values()
            .map(|s| s.ready.len() + s.starting.len())
            .sum();
        room = room.saturating_sub(held);
        let now = tokio::time::Instant::now();
        for (name, slot) in slots.iter_mut() {
            slot.starting.retain(|h| !h.is_finished());
            if slot.paused_until.is_some_and(|t| t > now) {
                continue;
            }
            while slot.ready.len() + slot.starting.len() < slot.wanted && room > 0 {
                room -= 1;
                let pool = self.clone();
                let (spec, opts) = (slot.launcher.spec.clone(), slot.launcher.opts.clone());
                let name = name.clone();
                slot.starting.push(rt.spawn(async move {
                    let result = Kernel::start(&spec, &opts).await;
                    pool.started(&name, result);
                }));
            }
        }
    }

    /// A pool start ended: keep the kernel, or pause the slot after a failure.
    fn started(&self, name: &str, result: Result<Kernel, StartError>) {
        let mut slots = lock(&self.inner.slots);
        let Some(slot) = slots.get_mut(name) else {
            return;
        };
        match result {
            Ok(kernel) if !self.inner.closed.load(Ordering::SeqCst) => {
                tracing::info!(kernel = name, pid = kernel.pid(), "pool kernel ready");
                slot.ready.push(kernel);
            }
            Ok(kernel) => {
                drop(slots);
                // Closed meanwhile: this one goes too (dropping kills its process group).
                drop(kernel);
            }
            Err(e) => {
                tracing::warn!(kernel = name, "pool kernel failed to start: {e}");
                slot.paused_until = Some(tokio::time::Instant::now() + RETRY_AFTER);
            }
        }
    }

    /// A ready kernel for a session launching `launcher`, when the pool has a live one of
    /// that kernelspec that can be made what the session asked for, and what must change in
    /// it (see [`adapt::plan`]; [`PooledLauncher`] applies it). Events it already queued (its
    /// start-up's `kernel_info` replies and status messages) are discarded.
    pub fn take(&self, launcher: &LocalLauncher) -> Option<(Kernel, Adaptation)> {
        let mut slots = lock(&self.inner.slots);
        let slot = slots.get_mut(&launcher.spec.name)?;
        if slot.launcher.spec != launcher.spec {
            return None;
        }
        let mut adaptation = adapt::plan(&launcher.spec, &slot.launcher.opts, &launcher.opts)?;
        while let Some(mut kernel) = slot.ready.pop() {
            if kernel.exit_info().is_some() || !kernel.responsive() {
                tracing::info!(kernel = %launcher.spec.name, "pool kernel died while waiting");
                continue;
            }
            while kernel.try_next_event().is_some() {}
            if let Some(file) = kernel.connection_file() {
                adapt::with_launch_hook(&mut adaptation, &launcher.spec, &launcher.opts, file);
            }
            tracing::info!(kernel = %launcher.spec.name, pid = kernel.pid(), ?adaptation, "session takes a pool kernel");
            return Some((kernel, adaptation));
        }
        None
    }

    /// Give up one ready kernel (a cold session needs its room under the limit).
    /// Returns true when one was given up.
    pub fn evict_one(&self, grace: Duration) -> bool {
        let kernel = lock(&self.inner.slots)
            .values_mut()
            .find_map(|s| s.ready.pop());
        match kernel {
            Some(k) => {
                if let Some(rt) = lock(&self.inner.runtime).clone() {
                    rt.spawn(k.shutdown(grace));
                }
                true
            }
            None => false,
        }
    }

    /// Stop every pool kernel (server exit): no refill any more, starts aborted, ready
    /// kernels shut down along the ladder.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let (ready, starting): (Vec<Kernel>, Vec<_>) = {
            let mut slots = lock(&self.inner.slots);
            let mut ready = Vec::new();
            let mut starting = Vec::new();
            for s in slots.values_mut() {
                ready.append(&mut s.ready);
                starting.append(&mut s.starting);
            }
            (ready, starting)
        };
        for h in &starting {
            h.abort();
        }
        for h in starting {
            let _ = h.await;
        }
        futures::future::join_all(ready.into_iter().map(|k| k.shutdown(grace))).await;
    }
}

impl Pool {
    /// The launcher of a new session that would launch `local`: a pool kernel when one
    /// matches (the pool then refills in the background), else `local` itself (cold), after
    /// giving up a pool kernel if the pool holds the room the limit leaves. `live`: sessions
    /// running now.
    pub fn launcher_for(
        &self,
        local: LocalLauncher,
        live: usize,
        limits: &crate::config::Limits,
    ) -> Arc<dyn KernelLauncher> {
        let taken = self.take(&local);
        crate::telemetry::metrics::pool(taken.is_some());
        if let Some((kernel, adaptation)) = taken {
            self.refill(limits.max_sessions.saturating_sub(live + 1));
            return Arc::new(PooledLauncher::new(kernel, adaptation, local));
        }
        if live + self.held() >= limits.max_sessions {
            self.evict_one(limits.shutdown_grace());
        }
        Arc::new(local)
    }
}

/// A session's launcher whose first kernel came from the pool; every later one (restart,
/// recovery) starts cold, the way the session was asked for.
pub struct PooledLauncher {
    first: Mutex<Option<(Kernel, Adaptation)>>,
    cold: LocalLauncher,
}

impl PooledLauncher {
    pub fn new(kernel: Kernel, adaptation: Adaptation, cold: LocalLauncher) -> PooledLauncher {
        PooledLauncher {
            first: Mutex::new(Some((kernel, adaptation))),
            cold,
        }
    }
}

impl KernelLauncher for PooledLauncher {
    fn sandbox(&self) -> crate::kernel::Sandbox {
        self.cold.opts.sandbox
    }

    /// The pooled kernel, adapted to the session (the one step between taking a kernel and
    /// the session's first code, see [`adapt`]); a cold start when adapting fails.
    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        match lock(&self.first).take() {
            Some((mut k, adaptation)) => {
                let cold = self.cold.start();
                Box::pin(async move {
                    match adapt::apply(&mut k, &adaptation).await {
                        Ok(()) => {
                            crate::telemetry::spans::note_source("pool", true);
                            Ok(Box::new(k) as Box<dyn KernelIo>)
                        }
                        Err(e) => {
                            tracing::warn!(kernel = %k.spec.name, pid = k.pid(), "a pool kernel could not be adapted ({e}); starting one cold");
                            // Dropping it kills its process group.
                            drop(k);
                            cold.await
                        }
                    }
                })
            }
            None => self.cold.start(),
        }
    }

    fn launch_options(&self) -> Option<&LaunchOptions> {
        Some(&self.cold.opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_arg_is_kernel_equals_count() {
        assert_eq!(parse_pool_arg("python3=2").unwrap(), ("python3".into(), 2));
        assert_eq!(parse_pool_arg("Python3=0").unwrap(), ("python3".into(), 0));
        let err = |arg: &str| parse_pool_arg(arg).unwrap_err().to_string();
        assert!(err("python3").contains("KERNEL=N"));
        assert!(err("python3=x").contains("whole number"));
        assert!(err("=1").contains("empty"));
    }
}
