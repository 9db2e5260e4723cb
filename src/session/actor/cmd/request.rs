//! Shell requests: a client's (`complete_request`, `inspect_request`, a silent
//! `execute_request`…), answered by msg_id with the reply's content or an error at its
//! deadline, and the fork helper's, which holds the runs until the fork is taken (see
//! `fork.rs`).

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{Activity, Answer, SessionCommand};
use crate::kernel::Channel;
use crate::session::actor::{Actor, MAX_PENDING_REQUESTS, Pending, Reply, WhileBusy};
use crate::session::error::SessionError;
use crate::session::ids::MsgId;

/// Send a shell request and wait up to `timeout` for its reply's content; while a run
/// executes, as `busy` says (refused, or sent to the kernel's subshell).
/// Errors: `SESSION_BUSY` (refused while a run executes, or no reply came in time),
/// `SESSION_DEAD`, `LIMIT_EXCEEDED` (too many requests waiting).
pub struct Request {
    pub msg_type: String,
    pub content: Value,
    pub busy: WhileBusy,
    pub timeout: Duration,
}

impl SessionCommand for Request {
    type Output = Value;
    const ACTIVITY: Activity = Activity::Work;
}

impl Request {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        let Request {
            msg_type,
            content,
            busy,
            timeout,
        } = self;
        if actor.runs.current_id().is_some() {
            match busy {
                WhileBusy::Refuse => {
                    let _ = answer.send(Err(actor.busy_error()));
                }
                WhileBusy::Subshell => {
                    actor
                        .request_beside(msg_type, content, timeout, answer)
                        .await
                }
            }
            return;
        }
        actor
            .send_request(msg_type, content, timeout, answer, None)
            .await;
    }
}

/// Send the fork helper's request (`content`, a silent execute_request) to the idle main
/// shell and hold every run until [`EndFork`]; answers the reply's content.
/// Errors: `SESSION_BUSY` while a run executes or another fork is taken, `SESSION_DEAD`.
pub struct Fork {
    pub content: Value,
    pub timeout: Duration,
}

impl SessionCommand for Fork {
    type Output = Value;
    const ACTIVITY: Activity = Activity::Work;
}

impl Fork {
    pub(super) async fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        actor.begin_fork(self.content, self.timeout, answer).await
    }
}

/// The fork is taken (or failed): the held runs may start.
pub struct EndFork;

impl SessionCommand for EndFork {
    type Output = ();
    const ACTIVITY: Activity = Activity::Use;
}

impl EndFork {
    pub(super) fn apply(self, actor: &mut Actor, answer: Answer<Self>) {
        actor.fork_hold = None;
        let _ = answer.send(Ok(()));
    }
}

impl Actor {
    /// Send a shell request (to `subshell` when given) and wait for its reply by msg_id.
    /// Returns false when it was not sent (the reply then has the error).
    pub(in crate::session::actor) async fn send_request(
        &mut self,
        msg_type: String,
        content: Value,
        timeout: Duration,
        reply: Reply<Result<Value, SessionError>>,
        subshell: Option<String>,
    ) -> bool {
        if self.pending.len() >= MAX_PENDING_REQUESTS {
            let _ = reply.send(Err(SessionError::LimitExceeded(format!(
                "Session '{}' already has {MAX_PENDING_REQUESTS} requests waiting for the kernel; wait for them.",
                self.desc.id
            ))));
            return false;
        }
        let Some(kernel) = self.kernel.as_ref() else {
            let why = format!("it is {}", self.status().as_str());
            let _ = reply.send(Err(SessionError::Dead {
                session: self.desc.id.clone(),
                why,
            }));
            return false;
        };
        let mut msg = kernel.request(&msg_type, content);
        msg.header.subshell_id = subshell;
        match self.send(Channel::Shell, &msg).await {
            Ok(()) => {
                let pending = Pending {
                    msg_type,
                    deadline: Instant::now() + timeout,
                    timeout,
                    reply,
                };
                self.pending.insert(MsgId::from(msg.msg_id()), pending);
                true
            }
            Err(e) => {
                let _ = reply.send(Err(SessionError::Internal(format!(
                    "{msg_type} not sent: {e}"
                ))));
                false
            }
        }
    }

    /// Answer every pending request past its deadline with an error, and forget it.
    pub(in crate::session::actor) fn expire_requests(&mut self) {
        let now = Instant::now();
        let expired: Vec<MsgId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                let _ = p.reply.send(Err(SessionError::NoReply {
                    msg_type: p.msg_type,
                    timeout_s: p.timeout.as_secs(),
                }));
            }
        }
    }
}
