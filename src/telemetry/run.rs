//! A run's spans: `kernel_mcp.run` from submission to its final status (a child of the request
//! that submitted it), with `queue.wait` until its code goes to the kernel and then
//! `kernel.execute` (execute_request → reply and idle) as children. Its status, execution
//! count, output bytes and truncation are recorded as it ends; so are the run metrics and the
//! queue depth. One [`RunTrace`] per run, kept in the run and told of its status changes.

use tracing::Span;
use tracing::field::Empty;

use super::TARGET;

/// Where a run is, for its spans.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// No spans (a run made without a trace, or one that ended).
    #[default]
    None,
    Queued,
    Executing,
}

/// A run's spans (see the module docs). `Default` is a run without spans.
#[derive(Debug, Default)]
pub struct RunTrace {
    run: Option<Span>,
    phase: Option<Span>,
    stage: Stage,
    started: Option<std::time::Instant>,
}

/// What a run ended with, for its span and metrics.
pub struct RunEnd<'a> {
    pub status: &'static str,
    pub execution_count: Option<i64>,
    pub output_bytes: usize,
    pub truncated: bool,
    /// The run's output text, for content capture only.
    pub output: &'a str,
}

impl RunTrace {
    /// The spans of run `run_id` of `session`, queued now: children of `parent` (the request
    /// that submitted it; a disabled span gives a root when export is on).
    pub fn queued(parent: &Span, session: &str, run_id: &str, code: &str) -> RunTrace {
        let run = tracing::info_span!(target: TARGET, parent: parent, "kernel_mcp.run",
            otel.status_code = Empty,
            kernel_mcp.session = session,
            kernel_mcp.run.id = run_id,
            kernel_mcp.run.status = Empty,
            kernel_mcp.run.generation = Empty,
            kernel_mcp.run.execution_count = Empty,
            kernel_mcp.run.output_bytes = Empty,
            kernel_mcp.run.truncated = Empty,
            kernel_mcp.run.code = Empty,
            kernel_mcp.run.output = Empty,
            error.type = Empty,
        );
        super::metrics::queue_depth(1);
        if run.is_disabled() {
            return RunTrace {
                run: None,
                phase: None,
                stage: Stage::Queued,
                started: None,
            };
        }
        if let Some(code) = super::spans::content(code) {
            run.record("kernel_mcp.run.code", code);
        }
        let phase = tracing::info_span!(target: TARGET, parent: &run, "queue.wait",
            kernel_mcp.session = session);
        RunTrace {
            run: Some(run),
            phase: Some(phase),
            stage: Stage::Queued,
            started: None,
        }
    }

    /// The run's span (disabled when there is none): the parent of its interrupts, and the
    /// context the kernel gets for the run.
    pub fn span(&self) -> Span {
        self.run.clone().unwrap_or_else(Span::none)
    }

    /// The run's code goes to the kernel of `generation` now: the queue wait ends.
    pub fn executing(&mut self, generation: u64) {
        if self.stage != Stage::Queued {
            return; // Running again after input, or a run without spans.
        }
        super::metrics::queue_depth(-1);
        self.stage = Stage::Executing;
        self.started = Some(std::time::Instant::now());
        let Some(run) = &self.run else {
            return;
        };
        run.record("kernel_mcp.run.generation", generation as i64);
        self.phase = Some(
            tracing::info_span!(target: TARGET, parent: run, "kernel.execute",
            kernel_mcp.run.generation = generation as i64),
        );
    }

    /// The run ended: record `end` and close its spans.
    pub fn ended(&mut self, end: RunEnd<'_>) {
        match self.stage {
            Stage::None => return,
            Stage::Queued => super::metrics::queue_depth(-1),
            Stage::Executing => {}
        }
        self.stage = Stage::None;
        let seconds = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
        super::metrics::run_finished(end.status, seconds, end.output_bytes as u64);
        drop(self.phase.take());
        let Some(run) = self.run.take() else {
            return;
        };
        run.record("kernel_mcp.run.status", end.status);
        if let Some(n) = end.execution_count {
            run.record("kernel_mcp.run.execution_count", n);
        }
        run.record("kernel_mcp.run.output_bytes", end.output_bytes as i64);
        run.record("kernel_mcp.run.truncated", end.truncated);
        if let Some(text) = super::spans::content(end.output) {
            run.record("kernel_mcp.run.output", text);
        }
        if !matches!(end.status, "ok") {
            run.record("error.type", end.status);
            if end.status == "error" || end.status == "kernel_died" || end.status == "timeout" {
                run.record("otel.status_code", "error");
            }
        }
    }
}

impl Drop for RunTrace {
    /// A run dropped before it ended (its session destroyed) leaves the queue count right.
    fn drop(&mut self) {
        if self.stage == Stage::Queued {
            super::metrics::queue_depth(-1);
        }
    }
}
