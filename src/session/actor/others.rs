//! Other clients' cells: code that another client of the same kernel ran (a person in
//! JupyterLab through the Jupyter face, `jupyter console --existing`) enters the session's
//! history marked [`HistoryEntry::other_client`], and never any run of ours (docs/semantics.md,
//! "People on the agent's kernel").
//!
//! The actor sees every iopub message the kernel publishes. A message whose parent is not
//! one of our requests is another client's: its `execute_input` (sent for every non-silent
//! `execute_request`) opens a cell with that code and execution count; the outputs parented
//! to it are collected exactly as a run's are (every MIME type, `clear_output`, display
//! updates); its `status: idle` closes it, `error` if an `error` came, else `ok`. Silent
//! requests (no `execute_input`) and other requests (`kernel_info`, `complete`…) leave no
//! entry. At most [`MAX_OPEN`] cells are open at once (the oldest is closed as it stands
//! when another opens); a new kernel closes none: its cells end with the old kernel's
//! messages, and any left open are dropped.

use std::collections::VecDeque;

use super::*;
use crate::session::run::Run;

/// Other clients' cells followed at once.
const MAX_OPEN: usize = 8;

/// The other clients' cells in progress, oldest first, by the msg_id of their request.
#[derive(Default)]
pub(super) struct OtherCells {
    open: VecDeque<(String, Run)>,
}

impl OtherCells {
    fn position(&self, parent: &str) -> Option<usize> {
        self.open.iter().position(|(p, _)| p == parent)
    }

    /// True while another client's cell runs (the session is not idle for expiry).
    pub(super) fn any_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Forget every open cell (the kernel they ran in is gone).
    pub(super) fn clear(&mut self) {
        self.open.clear();
    }
}

impl Actor {
    /// An iopub message parented to a request that is not ours.
    pub(super) fn other_client_iopub(&mut self, msg: &Message) {
        let Some(parent) = msg.parent_msg_id() else {
            return;
        };
        if msg.msg_type() == "execute_input" {
            self.open_other_cell(parent, msg);
            return;
        }
        let Some(i) = self.others.position(parent) else {
            if msg.msg_type() == "stream" {
                let mut text = String::new();
                msg.stream_text(|t| {
                    if text.len() < 200 {
                        text.extend(t.chars().take(200));
                    }
                });
                tracing::debug!(session = %self.desc.id, "output with no run: {text:?}");
            }
            return;
        };
        let idle = {
            let (_, cell) = &mut self.others.open[i];
            cell.apply_iopub(msg);
            msg.msg_type() == "status" && msg.content["execution_state"] == "idle"
        };
        if idle && let Some((_, cell)) = self.others.open.remove(i) {
            self.close_other_cell(cell);
        }
    }

    /// Another client's cell starts: `msg` is its `execute_input`.
    fn open_other_cell(&mut self, parent: &str, msg: &Message) {
        if self.others.position(parent).is_some() {
            return;
        }
        if self.others.open.len() >= MAX_OPEN
            && let Some((_, oldest)) = self.others.open.pop_front()
        {
            self.close_other_cell(oldest);
        }
        let code = msg.content["code"].as_str().unwrap_or_default().to_string();
        let mut cell = Run::new(
            RunId::new(),
            self.desc.id.clone(),
            code,
            true,
            None,
            Vec::new(),
        );
        cell.generation = self.generation;
        cell.quirks = self.quirks;
        cell.started_at = Some(Instant::now());
        cell.set_status(RunStatus::Running);
        cell.apply_iopub(msg);
        let now = chrono::Utc::now();
        self.last_activity = now;
        self.idle_since = now;
        self.others.open.push_back((parent.to_string(), cell));
    }

    /// Another client's cell ended (or is closed as it stands): into the history it goes.
    fn close_other_cell(&mut self, mut cell: Run) {
        let status = if cell.output.error.is_some() {
            RunStatus::Error
        } else {
            RunStatus::Ok
        };
        cell.set_status(status);
        let entry = HistoryEntry {
            other_client: true,
            ..cell.history_entry()
        };
        let now = chrono::Utc::now();
        self.last_activity = now;
        self.idle_since = now;
        self.journal_append(&JournalRecord::Entry(entry.clone()));
        self.history.push(entry);
        self.history_changed();
    }
}
