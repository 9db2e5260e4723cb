//! Kernel lifecycle for the session actor: starting a kernel in the background (after shutting
//! the old one down), installing it when ready, handling its death (the running run ends
//! `kernel_died`, queued runs are cancelled, a new kernel starts), restart and destroy.
//!
//! Whether the session may replace its kernel at all is decided in one place,
//! [`Actor::not_ours`]: a kernel someone else started (adopted from a connection file or by
//! kernel id on a gateway) is never restarted, shut down or replaced, whichever path asks
//! (`restart_session`, a `timeout_s` escalation, recovery after a death), and
//! [`Actor::start_kernel`] refuses a replacement it would have to make.

use tracing::Instrument;

use crate::session::StartFailure;

use super::*;

impl Actor {
    /// `Some(why)` when this session must not replace its kernel: it adopted a kernel someone
    /// else started, which kernel-mcp never restarts, shuts down or replaces (docs/semantics.md,
    /// "Adopted kernels"). `why` is a sentence for results and errors. The one place this is
    /// decided: every path that would replace the kernel asks here.
    pub(super) fn not_ours(&self) -> Option<String> {
        if !self.desc.launcher.adopts() {
            return None;
        }
        let how = match self.desc.launcher.location() {
            "local" => "adopted from its connection file".to_string(),
            gateway => format!("adopted by its kernel id on gateway '{gateway}'"),
        };
        Some(format!(
            "Session '{}' drives a kernel someone else started ({how}); kernel-mcp cannot restart a kernel it did not start.",
            self.desc.id
        ))
    }

    /// Start a kernel in the background, after shutting `old` down if given. A replacement
    /// (anything but the first start) of a kernel that is [not ours](Self::not_ours) is
    /// refused: `old` stays the session's kernel.
    pub(super) fn start_kernel(&mut self, reason: StartReason, old: Option<Box<dyn KernelIo>>) {
        if reason != StartReason::Create
            && let Some(why) = self.not_ours()
        {
            tracing::error!(session = %self.desc.id, ?reason, "refused to replace the kernel: {why}");
            if old.is_some() {
                self.kernel = old;
            }
            return;
        }
        for (_, p) in self.pending.drain() {
            let _ = p.reply.send(Err(SessionError::Replaced {
                msg_type: p.msg_type,
            }));
        }
        self.forget_sent_ahead();
        self.end_side_runs(
            RunStatus::Cancelled,
            "Cancelled: the kernel was replaced while this subshell run executed.",
        );
        self.reset_subshells(&SessionError::Replaced {
            msg_type: "a request waiting for the kernel's subshell".into(),
        });
        let launcher = self.desc.launcher.clone();
        let grace = self.limits.shutdown_grace();
        let why = match reason {
            StartReason::Create => "create",
            StartReason::Restart => "restart",
            StartReason::Recover => "recover",
        };
        let span = crate::telemetry::spans::kernel_start(
            &self.desc.id,
            &self.desc.spec.name,
            why,
            self.desc.launcher.location(),
        );
        self.starting = Some((
            reason,
            tokio::spawn(
                async move {
                    let mut started = match old {
                        Some(old) => launcher.replace(old, grace).await,
                        None => launcher.start().await,
                    };
                    if let Ok(kernel) = started.as_mut() {
                        crate::session::trace_env::install(kernel.as_mut()).await;
                    }
                    if started.is_err() {
                        crate::telemetry::spans::failed(&tracing::Span::current(), "start_failed");
                    }
                    crate::telemetry::metrics::kernel_start(
                        launcher.location(),
                        why,
                        started.is_ok(),
                    );
                    started
                }
                // The telemetry span inside the session's (what its log lines are told by).
                .instrument(span)
                .instrument(self.desc.span.clone()),
            ),
        ));
    }

    pub(super) fn kernel_started(&mut self, result: Result<Box<dyn KernelIo>, StartError>) {
        let reason = self
            .starting
            .take()
            .map(|(r, _)| r)
            .unwrap_or(StartReason::Recover);
        match result {
            Ok(kernel) => {
                self.generation += 1;
                let info = kernel.info().clone();
                if self.kernel_info["language_info"] != info["language_info"] {
                    self.journal_append(&JournalRecord::LanguageInfo(
                        info["language_info"].clone(),
                    ));
                }
                self.quirks = Quirks::from_kernel_info(&info);
                self.kernel_info = info;
                if let Some(o) = &self.desc.observer {
                    o.kernel_ready(kernel.connection_file());
                }
                let own = kernel
                    .request("kernel_info_request", json!({}))
                    .header
                    .session;
                self.other_requests.reset(own);
                self.kernel = Some(kernel);
                self.start_failure = None;
                self.others.clear();
                tracing::info!(session = %self.desc.id, generation = self.generation, ?reason, "kernel ready");
                let info = self.info();
                if let Some(w) = self.create_waiter.take() {
                    let _ = w.send(Ok(Started {
                        info: info.clone(),
                        journal: self.journal.as_ref().map(|j| j.path().to_path_buf()),
                    }));
                }
                for w in self.restart_waiters.drain(..) {
                    let _ = w.send(Ok(info.clone()));
                }
            }
            Err(e) => {
                tracing::warn!(session = %self.desc.id, "kernel start failed: {e}");
                let err = match e {
                    StartError::SandboxUnavailable { reason, .. } => {
                        SessionError::SandboxUnavailable(reason)
                    }
                    e => SessionError::KernelStartFailed(StartFailure::Kernel {
                        kernel: self.desc.spec.name.clone(),
                        error: Arc::new(e),
                    }),
                };
                if let Some(w) = self.create_waiter.take() {
                    let _ = w.send(Err(err.clone()));
                }
                for w in self.restart_waiters.drain(..) {
                    let _ = w.send(Err(err.clone()));
                }
                let reason = format!("The session's kernel could not be started: {err}");
                // Its first line: the whole error (with the kernel's output) went to the caller.
                self.start_failure = err.to_string().lines().next().map(str::to_string);
                self.cancel_queued(&reason);
            }
        }
    }

    /// The kernel is gone on its own (crash, `os._exit`, external kill).
    pub(super) fn kernel_died(&mut self, info: crate::kernel::ExitInfo) {
        let Some(mut kernel) = self.kernel.take() else {
            return;
        };
        self.observe_cancel();
        // Apply what the kernel already delivered before declaring the death.
        while let Some(ev) = kernel.try_next_event() {
            if let KernelEvent::Message(channel, msg) = ev {
                self.apply_message(channel, msg);
            }
        }
        let tail = kernel.output_tail();
        self.others.clear();
        self.other_requests.reset(String::new());
        tracing::warn!(session = %self.desc.id, "kernel died: {info}");
        crate::telemetry::metrics::kernel_death(match info.cause {
            crate::kernel::ExitCause::MemoryLimit { .. } => "memory_limit",
            _ => "exited",
        });
        let not_ours = self.not_ours().is_some();
        if let Some(run) = self.runs.current_mut() {
            drop(crate::telemetry::spans::restart(
                Some(&run.trace.span()),
                &run.session_id,
                "kernel_died",
            ));
            if run.phase.was_interrupted() {
                run.notices.push(format!(
                    "The kernel exited when it was interrupted ({info}); some kernels (e.g. xeus-python) do that instead of stopping the code."
                ));
            }
            if let crate::kernel::ExitCause::MemoryLimit {
                used_mib,
                limit_mib,
            } = info.cause
            {
                let ceiling = match self.limits.max_memory_mib {
                    0 => String::new(),
                    c => format!(" (at most this server's ceiling of {c} MiB)"),
                };
                run.notices.push(format!(
                    "kernel-mcp: memory limit exceeded: the kernel's processes {}; they were stopped. Use less memory, or create the session with a larger max_memory_mib{ceiling}.",
                    crate::kernel::memory_use_words(used_mib, limit_mib)
                ));
            }
            run.notices.push(if not_ours {
                format!("The adopted kernel is gone ({info}); the session has no kernel now. destroy_session it.")
            } else {
                format!("The kernel died ({info}); its state is lost. A new kernel is being started for the next run.")
            });
            let last = last_lines(&tail, 20);
            if !last.trim().is_empty() {
                run.notices
                    .push(format!("The kernel's last output:\n{last}"));
            }
            run.set_status(RunStatus::KernelDied);
            self.finish_current();
        }
        self.end_side_runs(
            RunStatus::KernelDied,
            &format!("The kernel died ({info}) while this subshell run executed."),
        );
        let reason = format!(
            "Cancelled: the kernel died ({info}) before this run started; it was not run in the new kernel."
        );
        if not_ours {
            self.cancel_queued(&reason);
        } else {
            self.cancel_queued_but_followers(&reason);
        }
        self.pending_notices.push(format!(
            "The previous kernel died ({info}); this run executed in a new kernel."
        ));
        // Dropping a local kernel kills whatever is left of its process group.
        drop(kernel);
        if not_ours {
            // Not ours to start again: the session stays `dead`.
            return;
        }
        self.start_kernel(StartReason::Recover, None);
    }

    /// Move the session in the sessions-by-state metric when its state changed: `starting`,
    /// `busy` (a run executes), `idle`, or `dead` (no kernel, none starting).
    pub(super) fn count_state(&mut self) {
        let state = if self.starting.is_some() {
            "starting"
        } else if self.kernel.is_none() {
            "dead"
        } else if self.runs.current().is_some() {
            "busy"
        } else {
            "idle"
        };
        if self.counted_state != Some(state) {
            crate::telemetry::metrics::session_state(self.counted_state, Some(state));
            self.counted_state = Some(state);
        }
    }

    /// End the session: cancel its runs, stop a start under way, shut the kernel down.
    pub(super) async fn destroy(&mut self) -> ShutdownRung {
        self.observe_cancel();
        self.cancel_queued("Cancelled: the session was destroyed.");
        self.end_side_runs(
            RunStatus::Cancelled,
            "The session was destroyed while this subshell run was executing.",
        );
        self.reset_subshells(&SessionError::gone(&self.desc.id));
        if let Some(run) = self.runs.current_mut() {
            run.notices
                .push("The session was destroyed while this run was executing.".into());
            run.set_status(RunStatus::Cancelled);
            self.finish_current();
        }
        if let Some((_, handle)) = self.starting.take() {
            handle.abort();
            // Aborting drops the starting kernel, which kills its process group.
            let _ = handle.await;
        }
        let err = SessionError::gone(&self.desc.id);
        if let Some(w) = self.create_waiter.take() {
            let _ = w.send(Err(err.clone()));
        }
        for w in self.restart_waiters.drain(..) {
            let _ = w.send(Err(err.clone()));
        }
        for (_, p) in self.pending.drain() {
            let _ = p.reply.send(Err(err.clone()));
        }
        let rung = match self.kernel.take() {
            Some(k) => k.shutdown(self.limits.shutdown_grace()).await,
            None => ShutdownRung::Graceful,
        };
        // The runs go before the caller hears the session is gone: their spool files are
        // removed with them.
        self.runs = RunTable::new(0);
        rung
    }

    pub(super) fn restart(&mut self, reply: Reply<Result<SessionInfo, SessionError>>) {
        if let Some(why) = self.not_ours() {
            let _ = reply.send(Err(SessionError::Unsupported(format!(
                "{why} Restart it where it was started, or destroy_session to detach."
            ))));
            return;
        }
        self.restart_waiters.push(reply);
        if self.starting.is_some() {
            return; // A start is under way; its outcome answers this restart too.
        }
        if let Some(run) = self.runs.current_mut() {
            drop(crate::telemetry::spans::restart(
                Some(&run.trace.span()),
                &run.session_id,
                "requested",
            ));
            // An earlier "still going" no longer holds: the restart stops the run.
            run.notices
                .retain(|n| !n.contains(super::running::STILL_GOING));
            run.notices.push(
                "The session was restarted while this run was executing; that stopped it.".into(),
            );
            run.set_status(RunStatus::Cancelled);
            self.finish_current();
        }
        self.cancel_queued_but_followers(
            "Cancelled: the session was restarted before this run started.",
        );
        if let Some(cell) = self.other_requests.cell() {
            // The one way an agent stops another client's cell, and it says so.
            self.pending_notices.push(format!(
                "The restart before this run also stopped another client's cell ({}), which had run for {:.0} s; its state is gone too.",
                cell.who,
                cell.since.elapsed().as_secs_f64()
            ));
        }
        self.observe_cancel();
        let old = self.kernel.take();
        self.start_kernel(StartReason::Restart, old);
    }
}
