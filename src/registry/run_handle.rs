//! One run as the registry finds it for a caller who sees it: held by a live session (or a
//! fresh run's helper kernel), or the final record of a fresh run whose helper is gone. Its
//! operations work on either, so a caller never asks which: a finished record answers reads
//! and its final status, cancelling it is a no-op, and what needs the kernel (input, pages of
//! the full output) says why it cannot be done.

use std::sync::Arc;

use tokio::sync::watch;

use super::Registry;
use super::runs::{Holder, RunIndex};
use super::scope::key::RunKey;
use crate::session::{
    ExecutionResult, Part, RunId, RunStatus, SessionError, SessionHandle, StreamPage, cmd,
};

/// See the module docs. Cheap to clone.
#[derive(Clone)]
pub struct RunHandle {
    key: RunKey,
    held: Held,
    /// Where a fresh run's final record is filed when its helper ends, read when the helper
    /// went away between finding the run and reading it.
    index: Arc<RunIndex>,
}

/// Who holds the run's record.
#[derive(Clone)]
pub(super) enum Held {
    /// The session (or fresh-run helper) whose actor keeps it.
    Live(SessionHandle),
    /// A fresh run whose helper kernel is gone: its final record.
    Finished(Arc<ExecutionResult>),
}

impl RunHandle {
    pub(super) fn new(key: RunKey, held: Held, index: Arc<RunIndex>) -> RunHandle {
        RunHandle { key, held, index }
    }

    /// The run as its caller names it.
    pub fn key(&self) -> &RunKey {
        &self.key
    }

    pub fn id(&self) -> &RunId {
        self.key.run()
    }

    /// The session that holds the run; `None` once a fresh run's helper is gone.
    pub fn session(&self) -> Option<&SessionHandle> {
        match &self.held {
            Held::Live(session) => Some(session),
            Held::Finished(_) => None,
        }
    }

    /// The span the holding session logs in (none for a finished fresh run).
    pub fn span(&self) -> tracing::Span {
        self.session()
            .map_or_else(tracing::Span::none, |s| s.span().clone())
    }

    /// The run's record now (every part bounded); for a fresh run whose helper just went
    /// away, its filed final record. Errors: `EXECUTION_NOT_FOUND`, `SESSION_NOT_FOUND`.
    pub async fn record(&self) -> Result<ExecutionResult, SessionError> {
        let session = match &self.held {
            Held::Live(session) => session,
            Held::Finished(r) => return Ok((**r).clone()),
        };
        let read = session
            .call(cmd::GetRun {
                run: self.id().clone(),
            })
            .await;
        read.or_else(|e| self.filed().ok_or(e))
    }

    /// A receiver of the run's status changes; a finished run's shows its final status (and
    /// never changes). Errors: `EXECUTION_NOT_FOUND`.
    pub async fn watch(&self) -> Result<watch::Receiver<RunStatus>, SessionError> {
        match &self.held {
            Held::Live(session) => {
                session
                    .call(cmd::WatchRun {
                        run: self.id().clone(),
                    })
                    .await
            }
            Held::Finished(r) => Ok(watch::channel(r.status).1),
        }
    }

    /// Bytes `[offset, offset + limit)` of one part of the run's full text.
    /// Errors: `EXECUTION_NOT_FOUND`; `UNSUPPORTED` for a fresh run whose helper is gone
    /// (only its final result is kept).
    pub async fn page(
        &self,
        part: Part,
        offset: usize,
        limit: usize,
    ) -> Result<StreamPage, SessionError> {
        let session = match &self.held {
            Held::Live(session) => session,
            Held::Finished(_) => {
                return Err(SessionError::Unsupported(format!(
                    "Run {} ran in a fresh kernel that has been shut down; only its final result (head and tail of each stream) is kept. Call get_execution without stream, or write large output to a file from the script.",
                    self.id()
                )));
            }
        };
        let run = self.id().clone();
        let page = cmd::Page {
            run,
            part,
            offset,
            limit,
        };
        session.call(page).await
    }

    /// The run's latest output line (or its status), for progress messages; `None` when
    /// there is none to read.
    pub async fn tail(&self) -> Option<String> {
        let session = self.session()?;
        let tail = cmd::RunTail {
            run: self.id().clone(),
        };
        session.call(tail).await.ok().flatten()
    }

    /// Remove the run if queued (it never runs), interrupt it if running; a finished run is
    /// left as it is. Errors: `EXECUTION_NOT_FOUND`.
    pub async fn cancel(&self) -> Result<(), SessionError> {
        match &self.held {
            Held::Live(session) => {
                session
                    .call(cmd::Cancel {
                        run: self.id().clone(),
                    })
                    .await
            }
            Held::Finished(_) => Ok(()),
        }
    }

    /// Answer the run's `input()` prompt; returns a receiver of its status.
    /// Errors: `EXECUTION_NOT_FOUND`, `NOT_AWAITING_INPUT` (a finished run included).
    pub async fn send_input(
        &self,
        value: String,
    ) -> Result<watch::Receiver<RunStatus>, SessionError> {
        match &self.held {
            Held::Live(session) => {
                let run = self.id().clone();
                session.call(cmd::SendInput { run, value }).await
            }
            Held::Finished(r) => Err(SessionError::NotAwaitingInput {
                run: self.id().clone(),
                status: r.status.as_str(),
            }),
        }
    }

    /// The final record filed for the run, if it is a fresh run whose helper has ended.
    fn filed(&self) -> Option<ExecutionResult> {
        match self.index.get(self.key.run(), self.key.viewer())?.holder {
            Holder::Finished(r) => Some((*r).clone()),
            _ => None,
        }
    }
}

impl Registry {
    /// The handle of run `key`, held by `session` (where it was just submitted).
    pub fn held_run(&self, key: RunKey, session: SessionHandle) -> RunHandle {
        RunHandle::new(key, Held::Live(session), self.runs.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limits;
    use crate::kernel::discovery::KernelSearch;
    use crate::registry::runs::tests::record;
    use crate::registry::scope::Scope;
    use crate::registry::scope::key::Slot;
    use crate::session::ErrorCode;

    #[tokio::test]
    async fn a_fresh_runs_kept_record_answers_every_operation_without_its_kernel() {
        let registry = Arc::new(Registry::new(
            KernelSearch::new(&[], None, None),
            None,
            Limits::default(),
            tokio::runtime::Handle::current(),
        ));
        let key = Scope::standalone(registry.clone()).run_key("run-f");
        let runs = &registry.runs;
        runs.track(key.run().clone(), Slot::named("s"), Holder::Session);
        runs.finish(key.run(), record("run-f"));
        let run = registry.run(&key).expect("the kept record");
        assert!(run.session().is_none());
        assert_eq!(run.record().await.expect("its record").run_id, "run-f");
        assert_eq!(*run.watch().await.expect("a watch").borrow(), RunStatus::Ok);
        run.cancel()
            .await
            .expect("cancelling a finished run is a no-op");
        let input = run.send_input("x".into()).await.expect_err("no prompt");
        assert_eq!(input.code(), ErrorCode::NotAwaitingInput);
        let page = run
            .page(Part::Stdout, 0, 10)
            .await
            .expect_err("no full text");
        assert_eq!(page.code(), ErrorCode::Unsupported);
        assert!(run.tail().await.is_none());
    }
}
