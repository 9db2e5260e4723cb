//! The session's commands, one named type each (the shape of mini-redis's `cmd/`): a struct
//! with named fields, its answer ([`SessionCommand::Output`]), how it counts toward the
//! session's activity ([`SessionCommand::ACTIVITY`]), and an `apply` that the actor runs. A
//! caller sends one with [`crate::session::SessionHandle::call`]; the actor's dispatch
//! (`Actor::handle_command`) stamps the activity and hands the command to its `apply`.
//!
//! Files by family: `runs.rs` (submit, read, page, outputs so far, answer input, cancel,
//! clear the queue), `interrupt.rs`, `history.rs` (read, delete, seed), `request.rs` (shell
//! requests and the fork helper's), `session.rs` (info, renew, expiry, restart, destroy,
//! clients).

use std::ops::ControlFlow;

use tokio::sync::oneshot;

use super::Actor;
use crate::session::error::SessionError;

mod history;
mod interrupt;
mod request;
mod runs;
mod session;

pub use history::{DeleteHistory, History, HistoryPage, SeedHistory};
pub use interrupt::{Interrupt, InterruptKernel, Interrupted};
pub use request::{EndFork, Fork, Request};
pub use runs::{Cancel, ClearQueue, GetRun, Page, RunEntry, RunTail, SendInput, Submit, WatchRun};
pub use session::{CheckExpired, Destroy, Info, NoteClient, Renew, Restart, UsedByAgents};

/// A command to a session's actor: what it answers, and whether it is activity.
pub trait SessionCommand: Send + Sized + 'static {
    /// What the actor answers when the command succeeds.
    type Output: Send + 'static;
    /// How the command counts toward the session's activity (see [`Activity`]).
    const ACTIVITY: Activity;
}

/// The channel a command's answer goes back on.
pub type Answer<C> = oneshot::Sender<Result<<C as SessionCommand>::Output, SessionError>>;

/// How a command counts toward the session's activity; each level includes the ones above
/// it. What it feeds: `last_activity` in the session's info, the idle clock its expiry reads
/// (`expiry.rs`), and whether an MCP client has worked in it ([`UsedByAgents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Activity {
    /// Not activity: the registry's expiry check itself.
    None,
    /// Stamped as the last activity, but the idle clock goes on (reading the session's info:
    /// `get_session`, `list_sessions`).
    Glance,
    /// Activity: the idle clock starts over.
    Use,
    /// An MCP client working in the session: code run, a request sent to the kernel, input
    /// answered, work cancelled or interrupted, history deleted.
    Work,
}

/// Declares [`Command`]: one variant per command type (of the same name), with its answer's
/// channel, and how a command with its channel becomes one.
macro_rules! commands {
    ($($name:ident),* $(,)?) => {
        /// A command to the actor with the channel its answer goes back on; the command types
        /// say what each does.
        pub enum Command {
            $($name($name, Answer<$name>),)*
        }

        impl Command {
            /// How this command counts toward the session's activity.
            fn activity(&self) -> Activity {
                match self {
                    $(Command::$name(..) => <$name as SessionCommand>::ACTIVITY,)*
                }
            }
        }

        $(impl From<($name, Answer<$name>)> for Command {
            fn from((cmd, answer): ($name, Answer<$name>)) -> Command {
                Command::$name(cmd, answer)
            }
        })*
    };
}

commands!(
    Submit,
    GetRun,
    WatchRun,
    Page,
    RunTail,
    RunEntry,
    SendInput,
    Cancel,
    ClearQueue,
    Interrupt,
    InterruptKernel,
    History,
    DeleteHistory,
    SeedHistory,
    Request,
    Fork,
    EndFork,
    Info,
    Renew,
    CheckExpired,
    Restart,
    UsedByAgents,
    NoteClient,
    Destroy,
);

impl Actor {
    /// Answer `cmd`; `Break` when the session is over (destroyed).
    pub(super) async fn handle_command(&mut self, cmd: Command) -> ControlFlow<()> {
        self.note_activity(cmd.activity());
        match cmd {
            Command::Submit(c, answer) => c.apply(self, answer).await,
            Command::GetRun(c, answer) => c.apply(self, answer),
            Command::WatchRun(c, answer) => c.apply(self, answer),
            Command::Page(c, answer) => c.apply(self, answer),
            Command::RunTail(c, answer) => c.apply(self, answer),
            Command::RunEntry(c, answer) => c.apply(self, answer),
            Command::SendInput(c, answer) => c.apply(self, answer).await,
            Command::Cancel(c, answer) => c.apply(self, answer).await,
            Command::ClearQueue(c, answer) => c.apply(self, answer),
            Command::Interrupt(c, answer) => c.apply(self, answer).await,
            Command::InterruptKernel(c, answer) => c.apply(self, answer).await,
            Command::History(c, answer) => c.apply(self, answer),
            Command::DeleteHistory(c, answer) => c.apply(self, answer),
            Command::SeedHistory(c, answer) => c.apply(self, answer),
            Command::Request(c, answer) => c.apply(self, answer).await,
            Command::Fork(c, answer) => c.apply(self, answer).await,
            Command::EndFork(c, answer) => c.apply(self, answer),
            Command::Info(c, answer) => c.apply(self, answer),
            Command::Renew(c, answer) => c.apply(self, answer),
            Command::CheckExpired(c, answer) => c.apply(self, answer),
            Command::Restart(c, answer) => c.apply(self, answer),
            Command::UsedByAgents(c, answer) => c.apply(self, answer),
            Command::NoteClient(c, _) => c.apply(self),
            Command::Destroy(c, answer) => return c.apply(self, answer).await,
        }
        ControlFlow::Continue(())
    }

    /// Stamp a command's activity on the session (see [`Activity`]).
    fn note_activity(&mut self, activity: Activity) {
        let now = chrono::Utc::now();
        if activity >= Activity::Glance {
            self.last_activity = now;
        }
        if activity >= Activity::Use {
            self.idle_since = now;
        }
        if activity == Activity::Work {
            self.agent_used = true;
        }
    }
}
