//! Telling a client's cancellation from the end of its connection (a connection's end
//! is not a cancellation: docs/semantics.md, "Progress and cancellation").
//!
//! rmcp cancels a request's token (`RequestContext::ct`) in two cases: the client sent
//! `notifications/cancelled` for it, or the connection ended (stdin EOF, a killed relay, a
//! closed socket: rmcp's serve loop then cancels every request still running). Only the first
//! may stop a run. rmcp tells them apart in one way: for the notification, and only for it, it
//! calls `ServerHandler::on_cancelled`, from a task it spawns right after cancelling the token.
//! So the handler records each cancelled request id here ([`Cancels::record`]), and a tool
//! whose token fired asks [`Cancels::asked`], which waits (at most [`NOTICE_WAIT`]) for that
//! record. No record: the connection ended, and the run goes on.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::RequestId;
use tokio::sync::Notify;

/// How long a tool whose token fired waits for the client's cancellation to be recorded.
/// rmcp records it a scheduler turn after cancelling the token; the wait only matters when
/// no record comes (the connection ended), and then nobody reads the tool's answer.
pub const NOTICE_WAIT: Duration = Duration::from_secs(2);
/// Cancelled request ids remembered at most per connection (the oldest are forgotten).
const REMEMBERED: usize = 64;

/// The requests one connection's client cancelled.
#[derive(Default)]
pub struct Cancels {
    asked: Mutex<VecDeque<RequestId>>,
    recorded: Notify,
}

impl Cancels {
    /// The client cancelled request `id` (from `on_cancelled`).
    pub fn record(&self, id: RequestId) {
        {
            let mut asked = lock(&self.asked);
            asked.push_back(id);
            while asked.len() > REMEMBERED {
                asked.pop_front();
            }
        }
        self.recorded.notify_waiters();
    }

    /// True when the client cancelled request `id`: asked once the request's token fired;
    /// waits up to [`NOTICE_WAIT`] for the record. False: the connection ended instead.
    pub async fn asked(&self, id: &RequestId) -> bool {
        let deadline = tokio::time::Instant::now() + NOTICE_WAIT;
        loop {
            let recorded = self.recorded.notified();
            tokio::pin!(recorded);
            // Registered before the check, so a record made right after it still wakes us.
            recorded.as_mut().enable();
            if self.take(id) {
                return true;
            }
            if tokio::time::timeout_at(deadline, recorded).await.is_err() {
                return false;
            }
        }
    }

    fn take(&self, id: &RequestId) -> bool {
        let mut asked = lock(&self.asked);
        match asked.iter().position(|a| a == id) {
            Some(i) => {
                asked.remove(i);
                true
            }
            None => false,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_recorded_cancellation_is_found_and_none_means_the_connection_ended() {
        let cancels = std::sync::Arc::new(Cancels::default());
        let id = RequestId::Number(7);
        let waiting = {
            let (cancels, id) = (cancels.clone(), id.clone());
            tokio::spawn(async move { cancels.asked(&id).await })
        };
        tokio::task::yield_now().await;
        cancels.record(id.clone());
        assert!(waiting.await.unwrap());
        // Taken once: the same id is not asked again.
        let started = tokio::time::Instant::now();
        assert!(!cancels.asked(&id).await);
        assert_eq!(started.elapsed(), NOTICE_WAIT);
    }

    #[tokio::test]
    async fn a_record_made_before_the_question_counts() {
        let cancels = Cancels::default();
        cancels.record(RequestId::String("a".into()));
        assert!(cancels.asked(&RequestId::String("a".into())).await);
    }

    #[test]
    fn records_are_bounded() {
        let cancels = Cancels::default();
        for i in 0..(REMEMBERED as i64 + 10) {
            cancels.record(RequestId::Number(i));
        }
        assert_eq!(lock(&cancels.asked).len(), REMEMBERED);
        assert!(!cancels.take(&RequestId::Number(0)));
    }
}
