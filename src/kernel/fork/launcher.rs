//! The fork session's launcher ([`ForkedLauncher`]): its first kernel is the fork; a restart
//! or a recovery starts a fresh kernel the way the source's launcher does.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::kernel::local::Kernel;
use crate::kernel::sandbox::Sandbox;
use crate::kernel::seam::{KernelIo, KernelLauncher};
use crate::kernel::types::{LaunchOptions, StartError};

/// The fork session's launcher: the fork first, then fresh kernels the way `cold` starts them.
pub struct ForkedLauncher {
    first: Mutex<Option<Kernel>>,
    cold: Arc<dyn KernelLauncher>,
    source: String,
}

impl ForkedLauncher {
    /// `kernel` (the fork of session `source`) first; restarts and recoveries from `cold`.
    pub fn new(kernel: Kernel, cold: Arc<dyn KernelLauncher>, source: String) -> ForkedLauncher {
        ForkedLauncher {
            first: Mutex::new(Some(kernel)),
            cold,
            source,
        }
    }
}

impl KernelLauncher for ForkedLauncher {
    fn start(&self) -> BoxFuture<'static, Result<Box<dyn KernelIo>, StartError>> {
        let first = self.first.lock().unwrap_or_else(|e| e.into_inner()).take();
        match first {
            Some(k) => Box::pin(async move { Ok(Box::new(k) as Box<dyn KernelIo>) }),
            None => self.cold.start(),
        }
    }

    fn launch_options(&self) -> Option<&LaunchOptions> {
        self.cold.launch_options()
    }

    fn forked_from(&self) -> Option<&str> {
        Some(&self.source)
    }

    fn sandbox(&self) -> Sandbox {
        self.cold.sandbox()
    }
}
