//! Interrupting: the session's current run for the agent ([`Interrupt`]), or whatever the
//! kernel runs for another client ([`InterruptKernel`]). Neither ever restarts the kernel.

use tokio::time::Instant;

use super::{Activity, Answer, SessionCommand};
use crate::session::actor::Actor;
use crate::session::ids::RunId;
use crate::session::run::{Interrupting, Phase};
use crate::session::types::{RunStatus, SessionInfo};

/// What an interrupt answers.
#[derive(Debug, Clone)]
pub struct Interrupted {
    /// The session after the interrupt was sent.
    pub session: SessionInfo,
    /// The run that was executing, if any.
    pub run: Option<RunId>,
    /// Set when the kernel is in another client's cell, which is not interrupted: whose it is
    /// and what the caller can do (see `foreign.rs`).
    pub notice: Option<String>,
}

/// Interrupt the running run, if any. Never restarts the kernel, and never interrupts another
/// client's cell.
pub struct Interrupt;

impl SessionCommand for Interrupt {
    type Output = Interrupted;
    const ACTIVITY: Activity = Activity::Work;
}

impl Interrupt {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let run = actor.runs.current_id().cloned();
        let notice = match run {
            Some(_) => actor.interrupt_current().await,
            None => actor.other_cell_notice(),
        };
        let session = actor.info();
        let _ = answer.send(Ok(Interrupted {
            session,
            run,
            notice,
        }));
    }
}

/// Interrupt whatever the kernel is running, for `by` (e.g. "a person through the Jupyter
/// API"): the session's current run (as [`Interrupt`] does, its notices naming `by`), or
/// else the kernel itself, for a cell another client of the kernel runs (a person's, through
/// the Jupyter face). Never restarts the kernel; the answer has no notice.
pub struct InterruptKernel {
    /// Who asks, as the run's notice names them.
    pub by: String,
}

impl SessionCommand for InterruptKernel {
    type Output = Interrupted;
    const ACTIVITY: Activity = Activity::Use;
}

impl InterruptKernel {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let run = actor.runs.current_id().cloned();
        let behind = actor
            .runs
            .current()
            .and_then(|r| r.phase.executing())
            .is_some_and(|e| e.behind.is_some() && !e.began);
        if run.is_some() && !behind {
            let notice = format!("Interrupted by {}, not by this session.", self.by);
            if let Some(current) = actor.runs.current_mut()
                && !current.notices.contains(&notice)
            {
                current.notices.push(notice);
            }
            actor.interrupt_current().await;
        } else {
            // Whatever the kernel runs (another client's cell): the caller's to stop.
            actor.interrupt_kernel().await;
        }
        let session = actor.info();
        let _ = answer.send(Ok(Interrupted {
            session,
            run,
            notice: None,
        }));
    }
}

impl Actor {
    /// Interrupt the current run: an interrupt that is already under way and has not given
    /// up goes on; one that gave up starts over (its grace counts again). A run that waits
    /// in the kernel behind another client's cell is stopped when it starts instead (that
    /// cell is never interrupted for it): the notice saying so is returned.
    pub(in crate::session::actor) async fn interrupt_current(&mut self) -> Option<String> {
        let now = Instant::now();
        if let Some(notice) = self.defer_interrupt() {
            return Some(notice);
        }
        let run = self.runs.current_mut()?;
        if run.status() == RunStatus::AwaitingInput {
            run.set_status(RunStatus::Running);
        }
        run.input = None;
        match &mut run.phase {
            Phase::CheckingComplete { interrupted, .. } => {
                // The code was not sent: it never runs. Nothing to signal.
                *interrupted = true;
                return None;
            }
            Phase::Executing(e) => match &mut e.interrupt {
                Some(i) if !i.gave_up => i.last_sent = now,
                slot => *slot = Some(Interrupting::new(now)),
            },
            Phase::Queued | Phase::Done => return None,
        }
        self.interrupt_kernel().await;
        None
    }
}
