//! `kernel-mcp env list|register|get|validate|remove`: the named Python environments, for
//! people (aligned text) and scripts (`--json`, the same records the MCP tools return). Works
//! on the registry file directly; a running server sees the change at its next use.
//!
//! Exit status: 0 done (for `validate`: a session can start from it); 1 `validate` found a
//! problem; 4 the operation failed (unknown name, interpreter that does not run…).

use std::process::ExitCode;

use clap::Subcommand;
use kernel_mcp::registry::sources::environments::{Environment, EnvironmentStore};
use kernel_mcp::session::SessionError;
use serde_json::{Value, json};

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// List the registered environments.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Register an interpreter or venv directory under NAME (checks that it runs).
    Register {
        name: String,
        /// Interpreter or venv directory.
        python: String,
        /// Re-point an existing NAME at this interpreter.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show one environment as last checked.
    Get {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Run the environment's interpreter again: version, ipykernel, install command.
    Validate {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Forget an environment (running sessions keep running).
    Remove {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

/// Run one `env` command to completion on `runtime`.
pub fn run(runtime: &tokio::runtime::Runtime, command: EnvCommand) -> ExitCode {
    let store = EnvironmentStore::from_env();
    runtime.block_on(async move {
        match execute(&store, command).await {
            Ok(code) => code,
            Err((e, json)) => {
                if json {
                    let v = json!({"error_code": e.code(), "message": e.to_string(), "details": e.details()});
                    println!("{v}");
                } else {
                    eprintln!("kernel-mcp env: {e}");
                }
                ExitCode::from(4)
            }
        }
    })
}

async fn execute(
    store: &EnvironmentStore,
    command: EnvCommand,
) -> Result<ExitCode, (SessionError, bool)> {
    match command {
        EnvCommand::List { json } => {
            let envs = store.list().await.map_err(|e| (e, json))?;
            if json {
                println!("{}", json!({"environments": envs, "path": store.path()}));
            } else if envs.is_empty() {
                println!("no environments registered (kernel-mcp env register NAME PYTHON)");
            } else {
                for e in &envs {
                    println!("{}", line(e));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Register {
            name,
            python,
            replace,
            json,
        } => {
            let base = std::env::current_dir().unwrap_or_default();
            let (env, replaced) = store
                .register(&name, &python, &base, replace)
                .await
                .map_err(|e| (e, json))?;
            if json {
                println!("{}", merged(&env, json!({"replaced": replaced})));
            } else {
                println!(
                    "{} {}",
                    if replaced {
                        "re-registered"
                    } else {
                        "registered"
                    },
                    line(&env)
                );
                if let Some(hint) = &env.install_hint {
                    println!("ipykernel is missing; install it with: {hint}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Get { name, json } => {
            let env = store.get(&name).await.map_err(|e| (e, json))?;
            if json {
                println!("{}", merged(&env, json!({})));
            } else {
                println!("{}", line(&env));
            }
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Validate { name, json } => {
            let found = store.validate(&name).await.map_err(|e| (e, json))?;
            if json {
                let extra = json!({"ok": found.ok(), "runs": found.runs, "problem": found.problem});
                println!("{}", merged(&found.env, extra));
            } else {
                println!("{}", line(&found.env));
                if let Some(why) = &found.problem {
                    println!("problem: {why}");
                }
                if let Some(hint) = found.env.install_hint.as_ref().filter(|_| found.runs) {
                    println!("install ipykernel with: {hint}");
                }
            }
            Ok(if found.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        EnvCommand::Remove { name, json } => {
            let env = store.remove(&name).await.map_err(|e| (e, json))?;
            if json {
                println!(
                    "{}",
                    json!({"name": env.name, "removed": true, "python": env.python})
                );
            } else {
                println!("removed {}", env.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn line(e: &Environment) -> String {
    format!(
        "{:<16} Python {:<8} {:<14} {}",
        e.name,
        e.python_version,
        if e.has_ipykernel {
            "ipykernel"
        } else {
            "no ipykernel"
        },
        e.python.display()
    )
}

fn merged(e: &Environment, extra: Value) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let (Value::Object(m), Value::Object(x)) = (&mut v, extra) {
        m.extend(x);
    }
    v
}
