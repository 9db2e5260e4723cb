//! `kernel-mcp console [SESSION]`: an interactive console on a session of the service, an
//! MCP client like the agent (docs/cli.md).
//!
//! - No session named: the sessions are listed to choose from (or a new one is named).
//! - A line editor (rustyline, [`editor`]) with history across runs in
//!   `<state dir>/console_history`; Enter runs the cell once the kernel calls it complete
//!   (`is_complete`, with the kernel's indent for the next line); Tab asks `complete`.
//! - Output streams as it arrives ([`crate::cli::follow`]), stderr and errors in colour,
//!   images saved and named ([`render`]).
//! - Ctrl-C while a cell runs cancels it (`cancel_execution`: interrupt, or out of the queue)
//!   and comes back to the prompt; Ctrl-C at the prompt clears the line; Ctrl-D leaves with
//!   status 0, and the session stays.
//! - Cells other clients run in the session appear as they run, marked as theirs ([`live`]).

mod editor;
mod live;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Editor, EventHandler, KeyCode, KeyEvent, Modifiers};
use serde_json::{Value, json};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::client::{CliError, Client, Target};
use super::follow::{Follower, Poll, is_final};
use render::{Kind, Screen};

/// `kernel-mcp console`.
#[derive(Debug, clap::Args)]
pub struct ConsoleArgs {
    /// The session to open (created when missing). Omitted: choose from a list.
    pub session: Option<String>,
    /// Kernelspec for a session the console creates.
    #[arg(long)]
    pub kernel: Option<String>,
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// How long one `get_execution` of the console's own cell waits.
const OWN_POLL: Duration = Duration::from_millis(250);
/// After Ctrl-C, how long the console waits for the cell to stop before giving the prompt back.
const STOP_WAIT: Duration = Duration::from_secs(8);

type LineEditor = Editor<editor::ConsoleHelper, FileHistory>;

/// Run the console to its end (Ctrl-D: 0).
pub fn run(args: ConsoleArgs, target: Target, rt: &tokio::runtime::Runtime) -> ExitCode {
    match console(rt, args, target) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::client::report(&e),
    }
}

fn console(
    rt: &tokio::runtime::Runtime,
    args: ConsoleArgs,
    target: Target,
) -> Result<(), CliError> {
    let client = Arc::new(rt.block_on(Client::connect(&target))?);
    // SIGINT is ours from here on: it interrupts a cell instead of killing the console.
    let mut sigint = rt
        .block_on(async { signal(SignalKind::interrupt()) })
        .map_err(|e| CliError::Local(format!("cannot catch Ctrl-C: {e}")))?;
    let mut rl: LineEditor =
        Editor::new().map_err(|e| CliError::Local(format!("cannot start the line editor: {e}")))?;
    let session = match args.session.clone() {
        Some(s) => s,
        None => choose(rt, &client, &mut rl)?,
    };
    let info = rt.block_on(open(&client, &session, args.kernel.as_deref()))?;
    let kernel = editor::Kernel {
        client: client.clone(),
        runtime: rt.handle().clone(),
        session: session.clone(),
    };
    rl.set_helper(Some(editor::ConsoleHelper {
        kernel: kernel.clone(),
    }));
    rl.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::NONE),
        EventHandler::Conditional(Box::new(editor::Enter { kernel })),
    );
    let history = kernel_mcp::service::paths::state_dir().map(|d| d.join("console_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let printer = rl
        .create_external_printer()
        .ok()
        .map(|p| Box::new(p) as Box<dyn rustyline::ExternalPrinter + Send>);
    let screen = Arc::new(Screen::new(printer));
    let shared = Arc::new(live::Shared::default());
    shared.saw_count(rt.block_on(last_count(&client, &session)));
    screen.print(
        Kind::Note,
        &format!(
            "kernel-mcp console on '{session}' ({}). Ctrl-C interrupts a cell, Ctrl-D leaves (the session stays).\n",
            info["display_name"].as_str().unwrap_or("kernel")
        ),
    );
    let watcher = rt.spawn(live::watch(
        client.clone(),
        session.clone(),
        shared.clone(),
        screen.clone(),
    ));
    let outcome = Prompt {
        rt,
        client: &client,
        session: &session,
        rl: &mut rl,
        screen: &screen,
        shared: &shared,
        sigint: &mut sigint,
    }
    .run();
    watcher.abort();
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = rl.save_history(h);
    }
    // The editor's helpers and the live view hold the client too; let go of them so the
    // connection closes cleanly.
    drop(rl);
    let _ = rt.block_on(watcher);
    if let Ok(c) = Arc::try_unwrap(client) {
        rt.block_on(c.close());
    }
    outcome
}

/// The prompt of a console on one session: what reading and running its cells uses.
struct Prompt<'a> {
    rt: &'a tokio::runtime::Runtime,
    client: &'a Client,
    session: &'a str,
    rl: &'a mut LineEditor,
    screen: &'a Screen,
    shared: &'a live::Shared,
    sigint: &'a mut Signal,
}

/// What one wait on the console's own cell ended with.
enum Step {
    Poll(Result<Poll, CliError>),
    CtrlC,
}

impl Prompt<'_> {
    /// Read cells and run them until Ctrl-D.
    fn run(mut self) -> Result<(), CliError> {
        loop {
            let n = self.shared.next_count.load(Ordering::Relaxed).max(1);
            match self.rl.readline(&format!("In [{n}]: ")) {
                Ok(code) if code.trim().is_empty() => continue,
                Ok(code) => {
                    let _ = self.rl.add_history_entry(code.as_str());
                    self.run_cell(code)?;
                }
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => return Ok(()),
                Err(e) => return Err(CliError::Local(format!("the line editor failed: {e}"))),
            }
        }
    }

    /// Run one cell, streaming its output, until it ends (or Ctrl-C stops it).
    fn run_cell(&mut self, code: String) -> Result<(), CliError> {
        let Prompt {
            rt,
            client,
            session,
            screen,
            shared,
            ..
        } = *self;
        // A Ctrl-C pressed before this cell started is not meant for it.
        while let Some(Some(())) = self.sigint.recv().now_or_never() {}
        shared.submitting.store(true, Ordering::SeqCst);
        let first = rt.block_on(client.call(
            "execute",
            json!({"session_id": session, "code": code, "wait_s": OWN_POLL.as_secs_f64()}),
            Duration::from_secs(1),
        ));
        let first = match first {
            Ok(a) => a,
            Err(e) => {
                shared.submitting.store(false, Ordering::SeqCst);
                return tool_error(screen, e);
            }
        };
        let run_id = first.value["run_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        shared.remember(&run_id);
        shared.submitting.store(false, Ordering::SeqCst);
        let mut follower = Follower::new(run_id.clone());
        let mut poll = rt.block_on(follower.take(client, first))?;
        if poll.status() == "queued" {
            screen.print(
                Kind::Note,
                "(queued: another run of this session comes first)\n",
            );
        }
        let mut stopping = false;
        loop {
            screen.print(Kind::Stdout, &poll.stdout);
            screen.print(Kind::Stderr, &poll.stderr);
            if is_final(poll.status()) {
                break;
            }
            if poll.status() == "awaiting_input" && !stopping {
                poll = answer(rt, client, self.rl, &mut follower, &poll.result)?;
                continue;
            }
            let step = rt.block_on(async {
                tokio::select! {
                    p = follower.poll(client, OWN_POLL) => Step::Poll(p),
                    _ = self.sigint.recv(), if !stopping => Step::CtrlC,
                }
            });
            match step {
                Step::Poll(p) => poll = p?,
                Step::CtrlC => {
                    stopping = true;
                    match interrupt(rt, client, screen, &mut follower, session)? {
                        Some(p) => poll = p,
                        None => return Ok(()),
                    }
                }
            }
        }
        shared.saw_count(poll.result["execution_count"].as_i64());
        rt.block_on(render::ending(screen, client, &poll.result, false));
        let status = poll.status();
        if !matches!(status, "ok" | "error") {
            screen.print(Kind::Note, &format!("({status})\n"));
        }
        Ok(())
    }
}

/// Ctrl-C during a cell: cancel its run and show what it prints until it ends, within
/// [`STOP_WAIT`]. `None`: it has not stopped (said on the screen, with the way out).
fn interrupt(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    screen: &Screen,
    follower: &mut Follower,
    session: &str,
) -> Result<Option<Poll>, CliError> {
    screen.print(Kind::Note, "^C interrupting…\n");
    let run_id = follower.run_id.clone();
    let r = rt.block_on(client.call(
        "cancel_execution",
        json!({"run_id": run_id}),
        Duration::ZERO,
    ));
    if let Err(e) = r {
        return tool_error(screen, e).map(|()| None);
    }
    let stopped = rt.block_on(async {
        tokio::time::timeout(STOP_WAIT, async {
            loop {
                match follower.poll(client, OWN_POLL).await {
                    Ok(p) if is_final(p.status()) => return Ok(p),
                    Ok(p) => {
                        screen.print(Kind::Stdout, &p.stdout);
                        screen.print(Kind::Stderr, &p.stderr);
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .await
    });
    match stopped {
        Ok(p) => Ok(Some(p?)),
        Err(_) => {
            screen.print(
                Kind::Error,
                &format!("{run_id} has not stopped; `kernel-mcp session restart -s {session}` stops it (state is lost)\n"),
            );
            Ok(None)
        }
    }
}

/// The cell asks for input: read it with the editor and send it.
fn answer(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    rl: &mut LineEditor,
    follower: &mut Follower,
    result: &Value,
) -> Result<Poll, CliError> {
    let prompt = result["prompt"]["text"].as_str().unwrap_or("").to_string();
    let value = match rl.readline(&prompt) {
        Ok(v) => v,
        Err(_) => {
            // Ctrl-C or Ctrl-D at an input() prompt: cancel the cell.
            rt.block_on(client.call(
                "cancel_execution",
                json!({"run_id": follower.run_id}),
                Duration::ZERO,
            ))?;
            return rt.block_on(follower.poll(client, Duration::from_secs(2)));
        }
    };
    let a = rt.block_on(client.call(
        "send_input",
        json!({"run_id": follower.run_id, "value": value}),
        Duration::from_secs(60),
    ))?;
    rt.block_on(follower.take(client, a))
}

/// A tool error on a cell is shown, and the console goes on; losing the service ends it.
fn tool_error(screen: &Screen, e: CliError) -> Result<(), CliError> {
    match e {
        CliError::Tool { .. } => {
            screen.print(Kind::Error, &format!("{e}\n"));
            Ok(())
        }
        other => Err(other),
    }
}

/// The session's SessionInfo, creating the session when it does not exist.
async fn open(client: &Client, session: &str, kernel: Option<&str>) -> Result<Value, CliError> {
    match client
        .call(
            "get_session",
            json!({"session_id": session}),
            Duration::ZERO,
        )
        .await
    {
        Ok(a) => Ok(a.value),
        Err(e) if e.code() == Some("SESSION_NOT_FOUND") => {
            let mut p = json!({"session_id": session});
            if let Some(k) = kernel {
                p["kernel"] = json!(k);
            }
            let a = client
                .call("create_session", p, Duration::from_secs(60))
                .await?;
            super::client::out(&format!("created session '{session}'\n"));
            Ok(a.value)
        }
        Err(e) => Err(e),
    }
}

/// The execution count of the session's last history entry.
async fn last_count(client: &Client, session: &str) -> Option<i64> {
    let h = client
        .call(
            "get_history",
            json!({"session_id": session, "latest_n": 1}),
            Duration::ZERO,
        )
        .await
        .ok()?;
    h.value["entries"][0]["execution_count"].as_i64()
}

/// No session named: list the service's sessions and let the person pick one or name a new one.
fn choose(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    rl: &mut LineEditor,
) -> Result<String, CliError> {
    let list = rt.block_on(client.call("list_sessions", json!({}), Duration::ZERO))?;
    let sessions: Vec<String> = list.value["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["session_id"].as_str().map(String::from))
        .collect();
    if sessions.is_empty() {
        super::client::out("No sessions yet.\n");
    } else {
        super::client::out(&super::sessions::table(&list.value["sessions"]));
        for (i, s) in sessions.iter().enumerate() {
            super::client::out(&format!("  [{}] {s}\n", i + 1));
        }
    }
    let default = sessions
        .first()
        .cloned()
        .unwrap_or_else(|| "console".into());
    let answer = match rl.readline(&format!("session (number or name) [{default}]: ")) {
        Ok(a) => a,
        Err(ReadlineError::Eof | ReadlineError::Interrupted) => {
            return Err(CliError::Local("no session chosen".into()));
        }
        Err(e) => return Err(CliError::Local(format!("the line editor failed: {e}"))),
    };
    let answer = answer.trim();
    Ok(match answer.parse::<usize>() {
        Ok(i) if (1..=sessions.len()).contains(&i) => sessions[i - 1].clone(),
        _ if answer.is_empty() => default,
        _ => answer.to_string(),
    })
}
