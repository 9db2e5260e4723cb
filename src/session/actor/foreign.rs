//! Other clients' requests in the kernel, and what they mean for this session's runs
//! (docs/semantics.md, "Another client's cell and the agent's runs").
//!
//! The kernel runs one shell request at a time, whoever sent it: a person's cell from
//! JupyterLab (through the Jupyter face), `jupyter console --existing`, another kernel-mcp
//! session on the same kernel. Every request's `status: busy` / `idle` is on iopub with the
//! request's header as parent (its `msg_type`, the client's `session` and `username`), so the
//! actor knows which other client's cell the kernel is in. The rules:
//!
//! - **A run waits in the actor, not in the kernel.** While another client's
//!   `execute_request` is busy, the next run is not sent ([`Actor::hold_for_other_cell`]): it
//!   stays `queued`, with a notice naming the other client, and cancelling it is clean. When
//!   it starts, a notice says how long it waited and for whom (`queued_ms` counts it).
//! - **A run's clock counts its own code only.** A run sent to a kernel that seemed free but
//!   that then began another client's cell first (its requests were already queued in the
//!   kernel) is *behind* that cell: `timeout_s` counts from the run's own first message.
//! - **Nothing of the agent's stops another client's cell.** A run behind another client's
//!   cell that is cancelled, interrupted, or whose `queue_timeout_s` passes is stopped as soon
//!   as it begins; the other cell is never signalled for it, so neither the deadline's
//!   interrupt nor its restart can reach it.
//! - `queue_timeout_s` bounds the wait before the code starts; past it a queued run ends
//!   `cancelled` with a notice ([`Actor::queue_deadline`]).
//!
//! Who the other client is: a label a face registered for the client's session id
//! ([`Actor::note_client`]: the Jupyter face names its websockets' sessions), else what the
//! header says (its session id and user name).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::*;
use crate::session::run::{Interrupting, Phase};
use crate::wire::Header;

/// Other clients' requests followed at once (busy, not yet idle).
const MAX_BUSY: usize = 16;
/// Client labels a face registered, at most (the oldest is forgotten first).
const MAX_LABELS: usize = 64;
/// The start of the notice a held run carries while it waits (dropped when it starts).
const WAITING: &str = "Queued: the kernel is running another client's cell";

/// A request of another client that the kernel is handling.
pub(super) struct OtherRequest {
    msg_id: String,
    msg_type: String,
    /// Who sent it, for notices.
    pub who: String,
    pub since: Instant,
}

/// What the actor knows of other clients' requests.
#[derive(Default)]
pub(super) struct OtherRequests {
    /// The client session id of this session's own requests (helpers, probes, subshell
    /// requests are not other clients').
    own_session: String,
    busy: VecDeque<OtherRequest>,
    labels: HashMap<String, String>,
    label_order: VecDeque<String>,
}

impl OtherRequests {
    /// The other client's cell (an `execute_request`) the kernel is running, if any.
    pub(super) fn cell(&self) -> Option<&OtherRequest> {
        self.busy.iter().find(|r| r.msg_type == "execute_request")
    }

    /// A new kernel, reached as client session `own`: forget every request of the old one.
    pub(super) fn reset(&mut self, own: String) {
        self.own_session = own;
        self.busy.clear();
    }

    /// Who sent a request with header `h`.
    fn describe(&self, h: &Header) -> String {
        if let Some(label) = self.labels.get(&h.session) {
            return label.clone();
        }
        let session: String = h.session.chars().take(8).collect();
        let user = if h.username.is_empty() {
            String::new()
        } else {
            format!(", user '{}'", h.username)
        };
        format!(
            "another client connected to the kernel directly (client session {session}…{user}), such as `jupyter console --existing` or another kernel-mcp session"
        )
    }
}

impl Actor {
    /// A face says who the client with Jupyter session id `session` is (e.g. "a person
    /// through the Jupyter API"), for the notices that name it.
    pub(super) fn note_client(&mut self, session: String, who: String) {
        let o = &mut self.other_requests;
        if o.labels.insert(session.clone(), who).is_none() {
            o.label_order.push_back(session);
            while o.label_order.len() > MAX_LABELS {
                if let Some(old) = o.label_order.pop_front() {
                    o.labels.remove(&old);
                }
            }
        }
    }

    /// A `status` message parented to another client's request.
    pub(super) fn other_status(&mut self, msg: &Message) {
        let Some(parent) = &msg.parent_header else {
            return;
        };
        let o = &mut self.other_requests;
        if parent.session == o.own_session {
            return;
        }
        match msg.content["execution_state"].as_str() {
            Some("busy") => {
                if o.busy.iter().any(|r| r.msg_id == parent.msg_id) {
                    return;
                }
                if o.busy.len() >= MAX_BUSY {
                    o.busy.pop_front();
                }
                let who = o.describe(parent);
                o.busy.push_back(OtherRequest {
                    msg_id: parent.msg_id.clone(),
                    msg_type: parent.msg_type.clone(),
                    who: who.clone(),
                    since: Instant::now(),
                });
                match parent.msg_type.as_str() {
                    "execute_request" => self.run_behind(&who),
                    "interrupt_request" => self.interrupted_by(&who),
                    _ => {}
                }
            }
            Some("idle") => o.busy.retain(|r| r.msg_id != parent.msg_id),
            _ => {}
        }
    }

    /// The kernel began another client's cell: a run sent but not yet begun waits behind it
    /// (its clock stops).
    fn run_behind(&mut self, who: &str) {
        if let Some(e) = self
            .runs
            .current_mut()
            .and_then(|r| r.phase.executing_mut())
            .filter(|e| !e.began && e.behind.is_none())
        {
            e.behind = Some(who.to_string());
        }
    }

    /// Another client asked the kernel to interrupt (an `interrupt_request`): say so in the
    /// run it may stop.
    fn interrupted_by(&mut self, who: &str) {
        if let Some(run) = self.runs.current_mut() {
            run.notices.push(format!(
                "The kernel was interrupted by {who} (an interrupt_request), not by this session."
            ));
        }
    }

    /// Whether the next run must wait for another client's cell; the run that would start
    /// says so while it waits.
    pub(super) fn hold_for_other_cell(&mut self) -> bool {
        let Some(cell) = self.other_requests.cell() else {
            return false;
        };
        let (who, since) = (cell.who.clone(), cell.since);
        let Some(run) = self.runs.next_queued_mut() else {
            return true;
        };
        if run.held.is_none() {
            run.held = Some((Instant::now(), who.clone()));
            run.notices.push(format!(
                "{WAITING} ({who}, for {:.0} s); this run starts when that cell ends, and its timeout_s counts from then. cancel_execution takes it out of the queue; queue_timeout_s bounds the wait.",
                since.elapsed().as_secs_f64()
            ));
        }
        true
    }

    /// The run starting now waited for another client's cell: say for how long and whose.
    pub(super) fn note_wait(run: &mut crate::session::run::Run) {
        let Some((since, who)) = run.held.take() else {
            return;
        };
        run.notices.retain(|n| !n.starts_with(WAITING));
        run.notices.push(format!(
            "Waited {:.1} s for another client's cell ({who}) to end before this code started (in queued_ms); timeout_s counted from the start.",
            since.elapsed().as_secs_f64()
        ));
    }

    /// One of the current run's own messages came: it has begun. If it waited behind another
    /// client's cell, its clock starts now; if it was cancelled meanwhile, it is stopped now.
    pub(super) async fn current_began(&mut self) {
        let now = Instant::now();
        let Some(run) = self.runs.current_mut() else {
            return;
        };
        let Some(e) = run.phase.executing_mut().filter(|e| !e.began) else {
            return;
        };
        e.began = true;
        if let Some(who) = e.behind.take() {
            e.started_at = now;
            let waited = run.started_at.map_or(Duration::ZERO, |s| now - s);
            run.started_at = Some(now);
            run.notices.push(format!(
                "Waited {:.1} s in the kernel behind another client's cell ({who}) before this code started (in queued_ms); timeout_s counted from the start.",
                waited.as_secs_f64()
            ));
        }
        let stop = match run.phase.executing_mut() {
            // Not once the kernel answered it (an aborted request is over).
            Some(e)
                if e.cancel_on_start && e.interrupt.is_none() && e.reply.is_none() && !e.idle =>
            {
                e.interrupt = Some(Interrupting::new(now));
                true
            }
            _ => false,
        };
        if stop {
            self.interrupt_kernel().await;
        }
    }

    /// An interrupt or cancellation of the current run that must not reach the kernel yet:
    /// the run waits behind another client's cell, or was sent ahead and has not begun (the
    /// kernel aborts it if the run before it failed). It is stopped as soon as it begins.
    /// Returns the notice saying so, or `None` when the interrupt may go ahead.
    pub(super) fn defer_interrupt(&mut self) -> Option<String> {
        let run = self.runs.current_mut()?;
        let id = run.id.clone();
        let Phase::Executing(e) = &mut run.phase else {
            return None;
        };
        if e.began || e.reply.is_some() {
            return None;
        }
        let notice = match (e.behind.clone(), e.sent_ahead()) {
            (Some(who), _) => format!(
                "Run {id} waits in the kernel behind another client's cell ({who}), which is not interrupted for it; run {id} is stopped as soon as it starts."
            ),
            (None, Some(_)) => format!(
                "Run {id}'s request is in the kernel's queue and has not started: the kernel aborts it if the run before it failed, else it is stopped as soon as it starts."
            ),
            (None, None) => return None,
        };
        if !e.cancel_on_start {
            e.cancel_on_start = true;
            run.notices.push(notice.clone());
        }
        Some(notice)
    }

    /// What `interrupt_session` says when nothing of this session was interrupted while the
    /// kernel runs another client's cell.
    pub(super) fn other_cell_notice(&self) -> Option<String> {
        let cell = self.other_requests.cell()?;
        let waiting = match self.runs.next_queued() {
            Some(run) => format!(
                " Run {} waits for it in the queue (cancel_execution(run_id=\"{}\") takes it out).",
                run.id, run.id
            ),
            None => String::new(),
        };
        Some(format!(
            "Nothing of this session is executing: the kernel is running another client's cell ({}, for {:.0} s), which interrupt_session does not stop.{waiting} Wait for it, or restart_session, which stops it too and loses the kernel's state.",
            cell.who,
            cell.since.elapsed().as_secs_f64()
        ))
    }

    /// The earliest `queue_timeout_s` deadline: of a queued run, or of the current run while
    /// it waits behind another client's cell.
    pub(super) fn queue_deadline_due(&self) -> Option<(Instant, Due)> {
        let behind = self.runs.current().filter(|r| {
            r.phase
                .executing()
                .is_some_and(|e| e.behind.is_some() && !e.began && !e.cancel_on_start)
        });
        self.runs
            .queued()
            .chain(behind)
            .filter_map(|r| Some((r.queued_at + r.queue_timeout?, Due::Queue(r.id.clone()))))
            .min_by_key(|(at, _)| *at)
    }

    /// Run `id`'s `queue_timeout_s` passed before its code started: a queued run ends
    /// `cancelled`; a run behind another client's cell is stopped as soon as it starts.
    pub(super) fn queue_deadline(&mut self, id: RunId) {
        let who = self.other_requests.cell().map(|c| c.who.clone());
        let Some(run) = self.runs.get_mut(id.as_str()) else {
            return;
        };
        let limit = run.queue_timeout.unwrap_or_default().as_secs_f64();
        let because = match &who {
            Some(who) => format!("; the kernel was running another client's cell ({who})"),
            None => String::new(),
        };
        if run.status() == RunStatus::Queued {
            run.notices.retain(|n| !n.starts_with(WAITING));
            run.notices.push(format!(
                "Cancelled: it waited {limit} s (queue_timeout_s) without starting{because}. It never ran."
            ));
            run.set_status(RunStatus::Cancelled);
            self.runs.dequeue(id.as_str());
            self.runs.finished(id);
        } else if let Some(e) = run.phase.executing_mut() {
            e.cancel_on_start = true;
            run.notices.push(format!(
                "queue_timeout_s ({limit} s) passed while this request waited in the kernel behind another client's cell; the kernel already has it, so it is stopped as soon as it starts."
            ));
        }
    }
}
