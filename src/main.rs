//! The `kernel-mcp` binary: parse the command line ([`cli::args`]), then run the command
//! ([`cli::dispatch`]: the process setup, the one runtime it needs, the command).
//! `supervise` is the exception: a tiny sync process between the server and a kernel, it runs
//! before any runtime or logging exists.

mod cli;

use std::process::ExitCode;

use cli::args::Command;

fn main() -> ExitCode {
    let (global, command) = match cli::args::parse() {
        Ok(cli) => cli.into_command(),
        Err(e) => e.exit(),
    };
    if let Command::Supervise(args) = command {
        return kernel_mcp::kernel::supervise::run(kernel_mcp::kernel::supervise::SuperviseArgs {
            argv: args.argv,
            max_memory_mib: args.max_memory_mib,
            sandbox: kernel_mcp::kernel::Sandbox {
                policy: args.sandbox,
                network: args.sandbox_network,
            },
            connection_file: args.connection_file,
            report_fd: args.report_fd,
            limit_file: args.limit_file,
            adopt_child: args.adopt_child,
            server_pid: args.server_pid,
            protected: args.protected,
            inherit_fd: args.inherit_fd,
        });
    }
    cli::dispatch::run(global, command)
}
