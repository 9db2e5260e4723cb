//! From a parsed command line to its end: the process-wide setup (signals, the allocator,
//! logging), what every command shares ([`Context`], in [`super::context`]), the one runtime
//! the command needs, and the command itself.
//!
//! Runtimes: `serve` and `service` run on the serving pair ([`kernel_mcp::mcp::serve::Runtimes`],
//! built where the registry is, in [`super::serve`]); the relay, `doctor` and `env` on one
//! current-thread runtime; the MCP clients of the service (`exec`, `sessions`, `session`,
//! `history`, `console`) on one two-worker runtime (the console's live view runs beside its
//! prompt); `kernels`, `install` and `token` need none.

use std::process::ExitCode;
use std::time::Duration;

use kernel_mcp::kernel::discovery::KernelSearch;

use super::args::{Command, GlobalArgs};
use super::context::Context;

/// Run `command` to its end (everything but `supervise`, which `main` runs before any setup).
pub fn run(global: GlobalArgs, command: Command) -> ExitCode {
    // Dropped when the command returns: flushes the telemetry still queued.
    let _telemetry = setup_process(&command);
    let ctx = match Context::new(global) {
        Ok(c) => c,
        Err(f) => return f.exit(),
    };
    let outcome = match command {
        Command::Serve(args) if args.shared => {
            return with_runtime(Flavor::Light, |rt| {
                super::serve::relay(&ctx, args.socket, &args.sessions, args.tools, rt)
            });
        }
        Command::Serve(args) => super::serve::serve(ctx, args),
        Command::Service(super::args::ServiceArgs {
            action: Some(action),
            socket,
            ..
        }) => {
            return with_runtime(Flavor::Light, |rt| {
                super::service_ctl::run(action, socket, rt)
            });
        }
        Command::Service(args) => super::serve::service(ctx, args),
        Command::Supervise(_) => Ok(()), // run by main before any setup
        Command::Kernels => return kernels(&ctx.search),
        Command::Install(args) => return super::install::run(&args, ctx.python_env.as_ref()),
        Command::Token(args) => return super::token::run(args),
        Command::Broker { command } => {
            return with_runtime(Flavor::Light, |rt| super::broker::run(command, rt));
        }
        Command::Log(args) => return super::log::run(args),
        Command::Doctor { json, oauth } => {
            return with_runtime(Flavor::Light, |rt| {
                super::doctor::run(
                    rt,
                    &ctx.search,
                    ctx.global.python_env.as_deref(),
                    &ctx.gateways,
                    &oauth,
                    json,
                )
            });
        }
        Command::Env { command } => {
            return with_runtime(Flavor::Light, |rt| super::env::run(rt, command));
        }
        Command::Exec(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| super::exec::run(args, target, rt));
        }
        Command::Sessions(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| {
                super::sessions::run_sessions(args, target, rt)
            });
        }
        Command::Session(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| {
                super::sessions::run_session(args, target, rt)
            });
        }
        Command::History(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| {
                super::sessions::run_history(args, target, rt)
            });
        }
        Command::Console(args) => {
            let target = ctx.target(args.socket.clone());
            return with_runtime(Flavor::Client, |rt| super::console::run(args, target, rt));
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit(),
    }
}

/// The process-wide setup every command but `supervise` gets. The serving commands (`serve`
/// but the relay, `service`) export telemetry when the environment says so.
fn setup_process(command: &Command) -> kernel_mcp::telemetry::Guard {
    // A file-size limit (RLIMIT_FSIZE) must fail a write, not kill the server and every session.
    // SAFETY: setting a signal's disposition to ignore is always sound.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGXFSZ,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
    kernel_mcp::memory::configure();
    match command {
        Command::Service(a) if a.action.is_none() => {
            let (file, guard) = kernel_mcp::service::log::init_service();
            if let Err(e) = file {
                eprintln!("kernel-mcp service: no log file ({e}); logging to stderr only");
            }
            guard
        }
        Command::Serve(args) => kernel_mcp::service::log::init_stderr(!args.shared),
        _ => kernel_mcp::service::log::init_stderr(false),
    }
}

/// The runtime a command runs on (see the module docs).
enum Flavor {
    /// One thread: the relay, `doctor`, `env`, `service status | stop | restart`.
    Light,
    /// Two workers: the MCP clients of the service.
    Client,
}

/// Build the runtime of `flavor`, run `body` with it, and stop it (briefly: a reader thread
/// blocked on stdin must not keep the process alive).
fn with_runtime(
    flavor: Flavor,
    body: impl FnOnce(&tokio::runtime::Runtime) -> ExitCode,
) -> ExitCode {
    let built = match flavor {
        Flavor::Light => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Flavor::Client => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kernel-mcp: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = body(&rt);
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

/// `kernel-mcp kernels`: one line per kernelspec, then the directories searched.
fn kernels(search: &KernelSearch) -> ExitCode {
    let mut text = String::new();
    for spec in search.list() {
        text.push_str(&format!(
            "{:<16} {:<10} {:<32} {}\n",
            spec.name,
            spec.language,
            spec.display_name,
            spec.resource_dir.display()
        ));
    }
    let dirs: Vec<String> = search
        .dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    text.push_str(&format!("searched: {}\n", dirs.join(", ")));
    super::client::out(&text);
    ExitCode::SUCCESS
}
