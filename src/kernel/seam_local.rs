//! [`KernelIo`] for a local [`Kernel`]: what the session actor asks of a kernel process it
//! launched (or adopted by connection file) — send, the next event, interrupt by signal or
//! `interrupt_request` as the kernelspec says, the shutdown ladder, memory and terminal reads;
//! and [`LocalLauncher`], which starts one from a kernelspec.

use std::time::Duration;

use futures::future::BoxFuture;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use super::local::Kernel;
use super::sandbox::Sandbox;
use super::seam::{KernelIo, KernelLauncher};
use super::spec::{InterruptMode, KernelSpec};
use super::types::ShutdownRung;
use super::types::{Channel, KernelEvent};
use super::types::{InterruptError, LaunchOptions, StartError};
use super::{process, usage};

impl KernelIo for Kernel {
    fn info(&self) -> &Value {
        &self.info
    }

    fn connection_file(&self) -> Option<&std::path::Path> {
        Some(&self.connection_file)
    }

    fn responsive(&self) -> bool {
        !self.unresponsive.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn pid(&self) -> Option<u32> {
        Some(self.process.kernel_pid())
    }

    super::channels::channels_io!();

    fn next_event(&mut self) -> BoxFuture<'_, KernelEvent> {
        Box::pin(self.next_event_inner())
    }

    fn try_next_event(&mut self) -> Option<KernelEvent> {
        self.events.try_recv().ok()
    }

    /// Per the kernelspec's `interrupt_mode`: SIGINT to the process group, or
    /// `interrupt_request` on control.
    fn interrupt(&mut self) -> BoxFuture<'_, Result<(), InterruptError>> {
        Box::pin(async move {
            match self.spec.interrupt_mode {
                InterruptMode::Signal => {
                    self.process.signal(Signal::SIGINT);
                    Ok(())
                }
                InterruptMode::Message => {
                    let msg = self.channels.request("interrupt_request", json!({}));
                    Ok(self.channels.send(Channel::Control, &msg).await?)
                }
            }
        })
    }

    fn sandbox(&self) -> Sandbox {
        self.sandbox
    }

    fn shutdown(self: Box<Self>, grace: Duration) -> BoxFuture<'static, ShutdownRung> {
        Box::pin((*self).shutdown(grace))
    }

    fn output_tail(&self) -> String {
        self.process.output_tail()
    }

    fn dropped_messages(&self) -> u64 {
        self.channels
            .dropped
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn memory_bytes(&self) -> Option<u64> {
        if let Some(used) = self.process.report().cgroup.and_then(|g| g.usage_bytes()) {
            return Some(used);
        }
        let root = self.process.pid() as i32;
        // Supervised, the kernel is among the supervisor's descendants; unsupervised, the
        // kernel is the root itself.
        let kernel = if self.process.kernel_pid() as i32 == root {
            usage::pss_bytes(root)
        } else {
            0
        };
        Some(usage::tree_bytes(root) + kernel)
    }

    fn reads_terminal(&self) -> bool {
        process::any_reads_terminal(&process::descendants(self.process.pid() as i32))
    }
}

/// Launches local kernels from a kernelspec (see [`super::local::Kernel::start`]).
#[derive(Debug, Clone)]
pub struct LocalLauncher {
    pub spec: KernelSpec,
    pub opts: LaunchOptions,
}

impl KernelLauncher for LocalLauncher {
    fn sandbox(&self) -> crate::kernel::sandbox::Sandbox {
        self.opts.sandbox
    }

    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let (spec, opts) = (self.spec.clone(), self.opts.clone());
        Box::pin(async move {
            let kernel = Kernel::start(&spec, &opts).await?;
            Ok(Box::new(kernel) as Box<dyn KernelIo>)
        })
    }

    fn launch_options(&self) -> Option<&LaunchOptions> {
        Some(&self.opts)
    }
}
