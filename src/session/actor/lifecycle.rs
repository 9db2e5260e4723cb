//! Kernel lifecycle for the session actor: starting a kernel in the background (after shutting
//! the old one down), installing it when ready, handling its death (the running run ends
//! `kernel_died`, queued runs are cancelled, a new kernel starts), restart and destroy.

use super::*;

impl Actor {
    /// Start a kernel in the background, after shutting `old` down if given.
    pub(super) fn start_kernel(&mut self, reason: StartReason, old: Option<Kernel>) {
        for (_, waiter) in self.pending.drain() {
            let _ = waiter.send(Err(SessionError::new(
                ErrorCode::SessionBusy,
                "The kernel was replaced before it answered; try again.",
            )));
        }
        self.exit_rx = None;
        let spec = self.spec.clone();
        let opts = self.opts.clone();
        let grace = self.limits.shutdown_grace();
        self.starting = Some((
            reason,
            tokio::spawn(async move {
                if let Some(old) = old {
                    old.shutdown(grace).await;
                }
                Kernel::start(&spec, &opts).await
            }),
        ));
    }

    pub(super) async fn kernel_started(&mut self, result: Result<Kernel, StartError>) {
        let reason = self
            .starting
            .take()
            .map(|(r, _)| r)
            .unwrap_or(StartReason::Recover);
        match result {
            Ok(kernel) => {
                self.generation += 1;
                if self.kernel_info["language_info"] != kernel.info["language_info"] {
                    self.journal_append(&JournalRecord::LanguageInfo(
                        kernel.info["language_info"].clone(),
                    ));
                }
                self.kernel_info = kernel.info.clone();
                self.quirks = Quirks::from_kernel_info(&kernel.info);
                self.exit_rx = Some(kernel.exit_watch());
                self.kernel = Some(kernel);
                tracing::info!(session = %self.id, generation = self.generation, ?reason, "kernel ready");
                let info = self.info();
                if let Some(w) = self.create_waiter.take() {
                    let _ = w.send(Ok(info.clone()));
                }
                for w in self.restart_waiters.drain(..) {
                    let _ = w.send(Ok(info.clone()));
                }
                self.start_next().await;
            }
            Err(e) => {
                tracing::warn!(session = %self.id, "kernel start failed: {e}");
                let err = SessionError::new(ErrorCode::KernelStartFailed, e.to_string())
                    .with_details(json!({"kernel": self.spec.name}));
                if let Some(w) = self.create_waiter.take() {
                    let _ = w.send(Err(err.clone()));
                }
                for w in self.restart_waiters.drain(..) {
                    let _ = w.send(Err(err.clone()));
                }
                let reason = format!("The session's kernel could not be started: {e}");
                self.cancel_queued(&reason);
            }
        }
    }

    /// The kernel process exited on its own (crash, `os._exit`, external kill).
    pub(super) fn kernel_died(&mut self, info: ExitInfo) {
        let Some(mut kernel) = self.kernel.take() else {
            self.exit_rx = None;
            return;
        };
        // Apply what the readers already delivered before declaring the death.
        while let Some(ev) = kernel.try_recv() {
            self.apply_kernel_event_sync(ev);
        }
        let tail = kernel.output_tail();
        tracing::warn!(session = %self.id, "kernel died: {info}");
        if let Some(run_id) = self.current.take() {
            if let Some(run) = self.runs.get_mut(&run_id) {
                if run.interrupted_at.is_some() {
                    run.notices.push(format!(
                        "The kernel exited when it was interrupted ({info}); some kernels (e.g. xeus-python) do that instead of stopping the code."
                    ));
                }
                run.notices.push(format!(
                    "The kernel died ({info}); its state is lost. A new kernel is being started for the next run."
                ));
                if !tail.trim().is_empty() {
                    run.notices.push(format!(
                        "The kernel's last output:\n{}",
                        last_lines(&tail, 20)
                    ));
                }
                run.set_status(RunStatus::KernelDied);
            }
            self.finish_bookkeeping(&run_id);
        }
        self.cancel_queued(&format!(
            "Cancelled: the kernel died ({info}) before this run started; it was not run in the new kernel."
        ));
        self.pending_notices.push(format!(
            "The previous kernel died ({info}); this run executed in a new kernel."
        ));
        drop(kernel);
        self.start_kernel(StartReason::Recover, None);
    }

    pub(super) async fn destroy(&mut self) -> ShutdownRung {
        self.cancel_queued("Cancelled: the session was destroyed.");
        if let Some(run_id) = self.current.take()
            && let Some(run) = self.runs.get_mut(&run_id)
        {
            run.notices
                .push("The session was destroyed while this run was executing.".into());
            run.set_status(RunStatus::Cancelled);
        }
        if let Some((_, handle)) = self.starting.take() {
            handle.abort();
            // Aborting drops the starting kernel, which kills its process group.
            let _ = handle.await;
        }
        let err = SessionError::gone(&self.id);
        if let Some(w) = self.create_waiter.take() {
            let _ = w.send(Err(err.clone()));
        }
        for w in self.restart_waiters.drain(..) {
            let _ = w.send(Err(err.clone()));
        }
        self.exit_rx = None;
        match self.kernel.take() {
            Some(k) => k.shutdown(self.limits.shutdown_grace()).await,
            None => ShutdownRung::Graceful,
        }
    }

    // ---- commands ----

    pub(super) fn restart(&mut self, reply: oneshot::Sender<Result<SessionInfo, SessionError>>) {
        self.restart_waiters.push(reply);
        if self.starting.is_some() {
            return; // A start is under way; its outcome answers this restart too.
        }
        if let Some(run_id) = self.current.take() {
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.notices
                    .push("The session was restarted while this run was executing.".into());
                run.set_status(RunStatus::Cancelled);
            }
            self.finish_bookkeeping(&run_id);
        }
        self.cancel_queued("Cancelled: the session was restarted before this run started.");
        let old = self.kernel.take();
        self.start_kernel(StartReason::Restart, old);
    }
}
