//! A run's phase as one enum, and the one deadline that phase implies.
//!
//! ```text
//! Queued ──▶ CheckingComplete ──▶ Executing ──▶ Done
//!    └────────────────┴──────────────┴──────────▶ Done   (cancel, death, restart, destroy)
//! ```
//!
//! `CheckingComplete` is only for kernels that need an `is_complete_request` before the code
//! is sent (see `Quirks::check_complete`). `Executing` records what the kernel has said so far
//! (the `execute_reply`, iopub `idle`; docs/semantics.md) and what we did to the run (an
//! interrupt under way, a deadline passed, the terminal probe). [`Phase::next_deadline`] is
//! the single place that says what the actor must do next and when; the actor handles the
//! answer in a single `match` on [`Deadline`].

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::session::ids::MsgId;

/// How long a kernel gets to answer `is_complete_request` before the code runs anyway.
pub const COMPLETENESS_TIMEOUT: Duration = Duration::from_secs(2);
/// How often an interrupt is repeated while the run has not stopped (before the grace ends).
pub const INTERRUPT_REPEAT: Duration = Duration::from_secs(1);
/// How often a kernel whose stdin is a terminal is checked for code blocked reading it.
pub const TERMINAL_PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// How long after iopub `idle` the `execute_reply` may still be on its way before the kernel
/// is asked, with a `kernel_info_request`, whether it dropped the reply.
pub const REPLY_PROBE_DELAY: Duration = Duration::from_secs(1);

/// Where a run is in its life.
#[derive(Debug)]
pub enum Phase {
    /// Waiting in the session's queue.
    Queued,
    /// An `is_complete_request` is out; the code has not been sent.
    CheckingComplete {
        msg_id: MsgId,
        since: Instant,
        /// Interrupted or cancelled before the code was sent: it will never run.
        interrupted: bool,
    },
    /// The `execute_request` is out.
    Executing(Executing),
    /// Finished; the run's status says how.
    Done,
}

/// What is known about a run whose `execute_request` was sent.
#[derive(Debug)]
pub struct Executing {
    pub started_at: Instant,
    /// The `execute_reply` content and when it came (the iopub grace counts from then).
    pub reply: Option<(Value, Instant)>,
    /// When the last iopub message for this request came. Output still arriving after the
    /// reply means `idle` is behind it (a flood's frames take a while to read and store), so
    /// the iopub grace counts from this too.
    pub last_output: Option<Instant>,
    /// iopub `status: idle` for this request has arrived.
    pub idle: bool,
    /// When `idle` came while the `execute_reply` had not: the reply probe counts from here.
    pub idle_before_reply: Option<Instant>,
    /// The `kernel_info_request` sent because the reply stayed missing after `idle`. Shell
    /// requests are handled in order, so its reply proves the kernel is done with ours.
    pub reply_probe: Option<MsgId>,
    /// The probe was answered with still no `execute_reply`: the kernel dropped it (ipykernel
    /// does when a SIGINT lands in its request handler outside the user's code).
    pub reply_dropped: bool,
    /// The kernel has shown the code stopped (an `error` arrived): an interrupt under way is
    /// not repeated, since a second SIGINT could land in the kernel's own reply path.
    pub code_stopped: bool,
    /// The run-time limit passed; the interrupt escalates to a restart.
    pub timed_out: bool,
    /// The run was interrupted because it waited for input the kernel cannot forward.
    pub stdin_refused: bool,
    pub interrupt: Option<Interrupting>,
    /// The terminal probe (kernels that read stdin from a terminal): last probe, hits in a row.
    pub probe: (Instant, u8),
    /// The kernel has shown it runs this request (a message parented to it came).
    pub began: bool,
    /// The kernel ran another client's cell (named here) ahead of this request after it was
    /// sent: the run's clock is stopped until [`Self::began`] (see `actor/foreign.rs`).
    pub behind: Option<String>,
    /// Stop it as soon as it begins: it was cancelled (or its `queue_timeout_s` passed) while
    /// it waited behind another client's cell, which is never interrupted for it.
    pub cancel_on_start: bool,
    /// The request was sent with `stop_on_error`: after an error the kernel aborts the
    /// request sent ahead behind it.
    pub stop_on_error: bool,
    /// Set when the request was sent before its run was current (see [`SentAhead`]).
    pub ahead: Option<Box<SentAhead>>,
}

/// A request sent into the kernel's queue before its run was current: the next cell of a
/// notebook batch, sent while the one before it runs.
#[derive(Debug, Clone)]
pub struct SentAhead {
    /// The generation of the kernel it was sent to.
    pub generation: u64,
    /// Why it was not to run after all (the run it followed did not end `ok`): the kernel
    /// aborts it (it ends `cancelled`, with this as its notice), or, if the kernel had already
    /// started it, it ends as it ran, saying so.
    pub unmet: Option<String>,
}

/// An interrupt under way.
#[derive(Debug, Clone, Copy)]
pub struct Interrupting {
    /// When it was first sent; the grace counts from here.
    pub since: Instant,
    /// When it was last sent (it is repeated until the run stops or the grace ends).
    pub last_sent: Instant,
    /// The grace ended without the run stopping, and nothing escalates: stop repeating.
    pub gave_up: bool,
}

impl Interrupting {
    pub fn new(now: Instant) -> Interrupting {
        Interrupting {
            since: now,
            last_sent: now,
            gave_up: false,
        }
    }
}

/// What the actor must do when [`Phase::next_deadline`] comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// The kernel did not answer `is_complete_request`: run the code anyway.
    CompletenessUnknown,
    /// The reply came but iopub `idle` did not: finish the run with a notice.
    IdleMissing,
    /// The run passed its `timeout_s`: interrupt it (and escalate after the grace).
    RunTimeout,
    /// The interrupt has not stopped the run yet: send it again.
    RepeatInterrupt,
    /// The grace after the interrupt ended with the run still going.
    InterruptGraceOver,
    /// `idle` came and the `execute_reply` did not: ask the kernel whether it dropped it.
    ProbeReply,
    /// Probe whether the code blocks reading the kernel's terminal.
    TerminalProbe,
}

/// The timings that decide deadlines.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Wait for iopub `idle` after `execute_reply`.
    pub iopub_grace: Duration,
    /// Wait after an interrupt before escalating or giving up.
    pub interrupt_grace: Duration,
    /// The run-time limit, if any.
    pub timeout: Option<Duration>,
    /// The kernel reads stdin from a terminal and must be probed.
    pub probe_terminal: bool,
}

impl Phase {
    /// The earliest thing to do for a run in this phase, and when.
    pub fn next_deadline(&self, t: &Timing, awaiting_input: bool) -> Option<(Instant, Deadline)> {
        match self {
            Phase::Queued | Phase::Done => None,
            Phase::CheckingComplete { since, .. } => {
                Some((*since + COMPLETENESS_TIMEOUT, Deadline::CompletenessUnknown))
            }
            Phase::Executing(e) => {
                let mut candidates: [Option<(Instant, Deadline)>; 6] = [None; 6];
                if let (Some((_, at)), false) = (&e.reply, e.idle) {
                    let from = e.last_output.map_or(*at, |o| o.max(*at));
                    candidates[0] = Some((from + t.iopub_grace, Deadline::IdleMissing));
                }
                // The clock runs only while the kernel runs this request, not another client's.
                if let (Some(limit), false, None) = (t.timeout, e.timed_out, &e.behind) {
                    candidates[1] = Some((e.started_at + limit, Deadline::RunTimeout));
                }
                // After `idle` the code is over whatever came of the reply: nothing to stop
                // (a timeout still escalates, in case the kernel answers nothing more).
                if let Some(i) = e
                    .interrupt
                    .filter(|i| !i.gave_up && e.reply.is_none() && (!e.idle || e.timed_out))
                {
                    let grace_over = i.since + t.interrupt_grace;
                    candidates[2] = Some((grace_over, Deadline::InterruptGraceOver));
                    let repeat = i.last_sent + INTERRUPT_REPEAT;
                    if repeat < grace_over && !e.code_stopped {
                        candidates[3] = Some((repeat, Deadline::RepeatInterrupt));
                    }
                }
                if t.probe_terminal && e.interrupt.is_none() && !awaiting_input {
                    candidates[4] =
                        Some((e.probe.0 + TERMINAL_PROBE_INTERVAL, Deadline::TerminalProbe));
                }
                if let (Some(at), None, None) = (e.idle_before_reply, &e.reply, &e.reply_probe) {
                    candidates[5] = Some((at + REPLY_PROBE_DELAY, Deadline::ProbeReply));
                }
                candidates.into_iter().flatten().min_by_key(|(at, _)| *at)
            }
        }
    }

    /// The executing state, if the code was sent.
    pub fn executing(&self) -> Option<&Executing> {
        match self {
            Phase::Executing(e) => Some(e),
            _ => None,
        }
    }

    pub fn executing_mut(&mut self) -> Option<&mut Executing> {
        match self {
            Phase::Executing(e) => Some(e),
            _ => None,
        }
    }

    /// True once we interrupted the run (in any phase before done).
    pub fn was_interrupted(&self) -> bool {
        match self {
            Phase::CheckingComplete { interrupted, .. } => *interrupted,
            Phase::Executing(e) => e.interrupt.is_some(),
            _ => false,
        }
    }
}

impl Executing {
    pub fn new(now: Instant) -> Executing {
        Executing {
            started_at: now,
            reply: None,
            last_output: None,
            idle: false,
            idle_before_reply: None,
            reply_probe: None,
            reply_dropped: false,
            code_stopped: false,
            timed_out: false,
            stdin_refused: false,
            interrupt: None,
            probe: (now, 0),
            began: false,
            behind: None,
            cancel_on_start: false,
            stop_on_error: false,
            ahead: None,
        }
    }

    #[cfg(test)]
    fn clone_shallow(&self) -> Executing {
        Executing {
            started_at: self.started_at,
            reply: self.reply.clone(),
            last_output: self.last_output,
            idle: self.idle,
            idle_before_reply: self.idle_before_reply,
            reply_probe: self.reply_probe.clone(),
            reply_dropped: self.reply_dropped,
            code_stopped: self.code_stopped,
            timed_out: self.timed_out,
            stdin_refused: self.stdin_refused,
            interrupt: self.interrupt,
            probe: self.probe,
            began: self.began,
            behind: self.behind.clone(),
            cancel_on_start: self.cancel_on_start,
            stop_on_error: self.stop_on_error,
            ahead: self.ahead.clone(),
        }
    }

    /// The generation of the kernel the request was sent to ahead of its turn, if it was.
    pub fn sent_ahead(&self) -> Option<u64> {
        self.ahead.as_ref().map(|a| a.generation)
    }

    /// The reply's `status` (`ok`, `error`, `aborted`/`abort`…), once it came.
    pub fn reply_status(&self) -> Option<&str> {
        self.reply.as_ref().and_then(|(r, _)| r["status"].as_str())
    }

    /// The run is complete: the reply and idle are in, or the reply says aborted (kernels
    /// send no idle for those) and we did not interrupt it (IRkernel sends idle for the run
    /// an interrupt aborted after draining its queue: wait for it, so the next request is not
    /// drained too), or the kernel dropped the reply.
    pub fn is_complete(&self) -> bool {
        let aborted = self
            .reply_status()
            .is_some_and(|s| s != "ok" && s != "error");
        self.reply_dropped
            || self.reply.is_some() && (self.idle || (aborted && self.interrupt.is_none()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            iopub_grace: Duration::from_secs(4),
            interrupt_grace: Duration::from_secs(5),
            timeout: Some(Duration::from_secs(10)),
            probe_terminal: false,
        }
    }

    #[test]
    fn an_executing_run_waits_for_its_timeout_then_for_the_interrupt_to_repeat_and_end() {
        let t0 = Instant::now();
        let t = timing();
        let mut p = Phase::Executing(Executing::new(t0));
        assert_eq!(
            p.next_deadline(&t, false),
            Some((t0 + Duration::from_secs(10), Deadline::RunTimeout))
        );
        let t1 = t0 + Duration::from_secs(10);
        let e = p.executing_mut().expect("executing");
        e.timed_out = true;
        e.interrupt = Some(Interrupting::new(t1));
        assert_eq!(
            p.next_deadline(&t, false),
            Some((t1 + INTERRUPT_REPEAT, Deadline::RepeatInterrupt))
        );
        let e = p.executing_mut().expect("executing");
        e.interrupt = Some(Interrupting {
            last_sent: t1 + Duration::from_secs(4),
            ..Interrupting::new(t1)
        });
        assert_eq!(
            p.next_deadline(&t, false),
            Some((t1 + Duration::from_secs(5), Deadline::InterruptGraceOver)),
            "no repeat scheduled past the end of the grace"
        );
    }

    #[test]
    fn a_reply_without_idle_waits_the_iopub_grace_and_stops_interrupt_repeats() {
        let t0 = Instant::now();
        let mut e = Executing::new(t0);
        e.interrupt = Some(Interrupting::new(t0));
        e.reply = Some((serde_json::json!({"status": "error"}), t0));
        let t = Timing {
            timeout: None,
            ..timing()
        };
        assert_eq!(
            Phase::Executing(e).next_deadline(&t, false),
            Some((t0 + Duration::from_secs(4), Deadline::IdleMissing))
        );
    }

    #[test]
    fn an_interrupt_is_not_repeated_once_the_code_raised() {
        let t0 = Instant::now();
        let timing = Timing {
            iopub_grace: Duration::from_secs(1),
            interrupt_grace: Duration::from_secs(5),
            timeout: None,
            probe_terminal: false,
        };
        let mut e = Executing::new(t0);
        e.interrupt = Some(Interrupting::new(t0));
        let next =
            |e: &Executing| Phase::Executing(e.clone_shallow()).next_deadline(&timing, false);
        assert_eq!(next(&e).map(|d| d.1), Some(Deadline::RepeatInterrupt));
        e.code_stopped = true; // the KeyboardInterrupt error arrived
        assert_eq!(next(&e).map(|d| d.1), Some(Deadline::InterruptGraceOver));
    }

    #[test]
    fn aborted_replies_complete_without_idle_unless_we_interrupted() {
        let t0 = Instant::now();
        let mut e = Executing::new(t0);
        e.reply = Some((serde_json::json!({"status": "abort"}), t0));
        assert!(e.is_complete());
        e.interrupt = Some(Interrupting::new(t0));
        assert!(!e.is_complete());
        e.idle = true;
        assert!(e.is_complete());
    }

    #[test]
    fn the_terminal_probe_runs_only_while_nothing_else_is_going_on() {
        let t0 = Instant::now();
        let t = Timing {
            timeout: None,
            probe_terminal: true,
            ..timing()
        };
        let e = Executing::new(t0);
        let p = Phase::Executing(e);
        assert_eq!(
            p.next_deadline(&t, false),
            Some((t0 + TERMINAL_PROBE_INTERVAL, Deadline::TerminalProbe))
        );
        assert_eq!(p.next_deadline(&t, true), None, "not while awaiting input");
    }

    #[test]
    fn output_still_arriving_after_the_reply_pushes_the_iopub_grace_back() {
        let t0 = Instant::now();
        let mut e = Executing::new(t0);
        e.reply = Some((serde_json::json!({"status": "ok"}), t0));
        e.last_output = Some(t0 + Duration::from_secs(3));
        let t = Timing {
            timeout: None,
            ..timing()
        };
        assert_eq!(
            Phase::Executing(e).next_deadline(&t, false),
            Some((t0 + Duration::from_secs(7), Deadline::IdleMissing))
        );
    }
}
