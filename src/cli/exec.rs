//! `kernel-mcp exec`: run code in a session of the service from a shell or a script
//! (docs/cli.md). stdout gets the run's stdout and its result, stderr its stderr, error and
//! traceback, both as they arrive; `--json` prints the final ExecutionResult instead. The run
//! is followed past the service's `wait_s` to its end ([`super::follow`]). Ctrl-C cancels the
//! run (`cancel_execution`: a queued run never starts, a running one is interrupted), waits
//! briefly for it to stop, and exits 3.
//!
//! When the code calls `input()`, the answer is a line of stdin; when stdin held the code or
//! is at its end, the run is cancelled instead, said on stderr (exit 3).
//!
//! Exit status: 0 `ok`; 1 `error` (or the service could not be reached); 3 `timeout`,
//! `interrupted`, `cancelled`, `kernel_died`, and a run cancelled because nobody could answer
//! its `input()`; 4 a tool error (unknown session without
//! `--create`, kernel not found…); 2 a usage error: clap's own, or code that cannot be read
//! (`-f` of a missing or unreadable file, stdin that is not UTF-8), said with the path and
//! the reason before any service is reached, so a script can tell a typo in a path from a
//! failing cell.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::client::{CliError, Client, Target};
use super::follow::{self, Follower};

/// `kernel-mcp exec`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["code", "file", "stdin"])))]
pub struct ExecArgs {
    /// The session to run in.
    #[arg(short = 's', long)]
    pub session: String,
    /// Create the session when it does not exist (with --kernel and --cwd).
    #[arg(long)]
    pub create: bool,
    /// Kernelspec of a session made by --create (default: the service's default kernel).
    #[arg(long, requires = "create")]
    pub kernel: Option<String>,
    /// Working directory of a session made by --create.
    #[arg(long, requires = "create")]
    pub cwd: Option<PathBuf>,
    /// Stop the run after this many seconds (interrupt, then restart the kernel if needed).
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
    /// The code to run.
    #[arg(short = 'c', long = "code", value_name = "CODE")]
    pub code: Option<String>,
    /// Run the contents of this file.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Read the code from standard input.
    #[arg(long)]
    pub stdin: bool,
    /// Print the ExecutionResult as JSON (and nothing else on stdout).
    #[arg(long)]
    pub json: bool,
    /// Print nothing on stdout (stderr still gets errors).
    #[arg(long)]
    pub quiet: bool,
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// How long one `get_execution` waits while output is shown as it arrives.
const STREAM_POLL: Duration = Duration::from_millis(500);
/// How long one `get_execution` waits when only the end matters (`--json`, `--quiet`).
const QUIET_POLL: Duration = Duration::from_secs(25);
/// After Ctrl-C, how long to wait for the run to report its end before exiting anyway.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Exit status of a usage error, as clap's own.
const USAGE: u8 = 2;

/// Run `kernel-mcp exec`.
pub fn run(args: ExecArgs, target: Target, rt: &tokio::runtime::Runtime) -> ExitCode {
    let code = match source(&args) {
        Ok(code) => code,
        Err(why) => {
            eprintln!("kernel-mcp exec: {why}");
            return ExitCode::from(USAGE);
        }
    };
    super::client::run_command(rt, || exec(args, target, code))
}

async fn exec(args: ExecArgs, target: Target, code: String) -> Result<ExitCode, CliError> {
    let client = Client::connect(&target).await?;
    let outcome = exec_on(&client, &args, code).await;
    client.close().await;
    outcome
}

/// The code to run, from -c, -f or stdin. Errors: a sentence with the path and the reason
/// (a usage error: the code never reached a kernel).
fn source(args: &ExecArgs) -> Result<String, String> {
    if let Some(c) = &args.code {
        return Ok(c.clone());
    }
    if let Some(f) = &args.file {
        return std::fs::read_to_string(f).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_string(),
                std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
                std::io::ErrorKind::InvalidData => "it is not UTF-8 text".to_string(),
                _ => e.to_string(),
            };
            format!("cannot read the code file {}: {why}", f.display())
        });
    }
    let mut code = String::new();
    std::io::stdin()
        .read_to_string(&mut code)
        .map_err(|e| format!("cannot read the code from stdin: {e}"))?;
    Ok(code)
}

async fn exec_on(client: &Client, args: &ExecArgs, code: String) -> Result<ExitCode, CliError> {
    if args.create {
        create(client, args).await?;
    }
    // From here on Ctrl-C is ours (registered now, not at the first poll): it cancels the run.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| CliError::Local(format!("cannot catch Ctrl-C: {e}")))?;
    let streaming = !args.json && !args.quiet;
    let mut call = json!({"session_id": args.session, "code": code, "wait_s": 0.5});
    if let Some(t) = args.timeout {
        call["timeout_s"] = json!(t);
    }
    let first = client.call("execute", call, Duration::from_secs(1)).await?;
    let run_id = first.value["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut follower = Follower::new(run_id.clone());
    let mut poll = follower.take(client, first).await?;
    let wait = if streaming { STREAM_POLL } else { QUIET_POLL };
    let mut interrupted = false;
    // The run was cancelled because nobody can answer its `input()`.
    let mut no_more_input = false;
    loop {
        if streaming {
            show(&poll.stdout, &poll.stderr);
        }
        if follow::is_final(poll.status()) {
            break;
        }
        if poll.status() == "awaiting_input" {
            if no_more_input {
                // It asks again after it was cancelled: nobody can answer, so do not wait.
                eprintln!(
                    "kernel-mcp: {run_id} still waits for input after it was cancelled; `kernel-mcp session restart -s {}` stops it (state is lost)",
                    args.session
                );
                return Ok(ExitCode::from(3));
            }
            match answer_prompt(client, &mut follower, &poll.result, args.stdin).await? {
                Answer::Sent(next) => poll = next,
                Answer::Nobody(why) => {
                    no_more_input = true;
                    interrupted = true;
                    eprintln!("kernel-mcp: {why}; cancelling {run_id}");
                    client
                        .call(
                            "cancel_execution",
                            json!({"run_id": run_id}),
                            Duration::ZERO,
                        )
                        .await?;
                    poll = follower.poll(client, Duration::from_secs(2)).await?;
                }
            }
            continue;
        }
        tokio::select! {
            next = follower.poll(client, wait) => poll = next?,
            _ = sigint.recv(), if !interrupted => {
                interrupted = true;
                eprintln!("kernel-mcp: interrupting {run_id}");
                client
                    .call("cancel_execution", json!({"run_id": run_id}), Duration::ZERO)
                    .await?;
                match tokio::time::timeout(STOP_WAIT, follower.poll(client, Duration::from_secs(2))).await {
                    Ok(next) => poll = next?,
                    Err(_) => return Ok(ExitCode::from(3)),
                }
                if !follow::is_final(poll.status()) {
                    eprintln!("kernel-mcp: {run_id} is still {}; `kernel-mcp session restart -s {}` stops it (state is lost)", poll.status(), args.session);
                    return Ok(ExitCode::from(3));
                }
            }
        }
    }
    let status = poll.status().to_string();
    if args.json {
        show(
            &format!(
                "{}\n",
                serde_json::to_string_pretty(&poll.result).unwrap_or_default()
            ),
            "",
        );
    } else {
        let end = follow::ending(&poll.result);
        if !args.quiet {
            show(&end.stdout, "");
        }
        show("", &end.stderr);
    }
    if interrupted {
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::from(follow::exit_status(&status)))
}

/// `create_session` for --create; an existing session is used as it is.
async fn create(client: &Client, args: &ExecArgs) -> Result<(), CliError> {
    let mut p = json!({"session_id": args.session});
    if let Some(k) = &args.kernel {
        p["kernel"] = json!(k);
    }
    if let Some(d) = &args.cwd {
        p["cwd"] = json!(super::client::absolute(d)?);
    }
    match client
        .call("create_session", p, Duration::from_secs(60))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("SESSION_ALREADY_EXISTS") => Ok(()),
        Err(e) => Err(e),
    }
}

/// What became of a prompt.
enum Answer {
    /// A line from our stdin went to the run; its state after.
    Sent(super::follow::Poll),
    /// Nobody can answer (why, in a few words): the caller cancels the run.
    Nobody(&'static str),
}

/// The run asks for input: read a line from our stdin (when the code did not come from it)
/// and send it. When stdin held the code, or is at its end, nobody can answer: an empty
/// answer at EOF would make code that asks again until it gets one loop forever.
async fn answer_prompt(
    client: &Client,
    follower: &mut Follower,
    result: &Value,
    code_from_stdin: bool,
) -> Result<Answer, CliError> {
    if code_from_stdin {
        return Ok(Answer::Nobody(
            "the code asks for input, but stdin held the code",
        ));
    }
    let prompt = result["prompt"]["text"].as_str().unwrap_or("").to_string();
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let (read, line) = tokio::task::spawn_blocking(|| {
        let mut l = String::new();
        std::io::stdin().read_line(&mut l).map(|n| (n, l))
    })
    .await
    .map_err(|e| CliError::Local(e.to_string()))?
    .map_err(|e| CliError::Local(format!("cannot read the answer from stdin: {e}")))?;
    if read == 0 {
        eprintln!();
        return Ok(Answer::Nobody(
            "the code asks for input, but stdin is at its end",
        ));
    };
    let value = line.trim_end_matches(['\n', '\r']).to_string();
    let a = client
        .call(
            "send_input",
            json!({"run_id": follower.run_id, "value": value}),
            Duration::from_secs(60),
        )
        .await?;
    Ok(Answer::Sent(follower.take(client, a).await?))
}

/// Write text to stdout and stderr, flushed.
fn show(out: &str, err: &str) {
    if !out.is_empty() {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(out.as_bytes());
        let _ = o.flush();
    }
    if !err.is_empty() {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(err.as_bytes());
        let _ = e.flush();
    }
}
