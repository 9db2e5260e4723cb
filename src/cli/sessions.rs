//! `kernel-mcp sessions`, `kernel-mcp session get|interrupt|restart|destroy|renew` and
//! `kernel-mcp history` (docs/cli.md): the session tools of the service for a person (a table,
//! or the tool's own short text) and for scripts (`--json`: the tool's structuredContent as
//! is). Exit status 0, 4 for a tool error (unknown session…), 1 when the service cannot be
//! reached.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::client::{Client, Target, out};

/// `kernel-mcp sessions`.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Print `list_sessions`' result as JSON.
    #[arg(long)]
    pub json: bool,
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// `kernel-mcp session …`.
#[derive(Debug, clap::Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    pub action: SessionAction,
    /// The session.
    #[arg(short = 's', long, global = true)]
    pub session: Option<String>,
    /// Print the tool's result as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET", global = true)]
    pub socket: Option<PathBuf>,
}

/// What to do to the session.
#[derive(Debug, clap::Subcommand)]
pub enum SessionAction {
    /// Show the session (SessionInfo), with its variables for Python kernels.
    Get {
        /// Also list the variables (name, type, summary).
        #[arg(long)]
        variables: bool,
    },
    /// Interrupt the running cell (never restarts the kernel).
    Interrupt,
    /// Restart the kernel: state is lost, history kept unless --clear-history.
    Restart {
        #[arg(long)]
        clear_history: bool,
    },
    /// Shut the kernel down and forget the session.
    Destroy,
    /// Reset the session's idle-expiry clock.
    Renew {
        /// New idle seconds before expiry (0 = never).
        #[arg(long, value_name = "S")]
        expires_after: Option<f64>,
    },
}

/// `kernel-mcp history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The session.
    #[arg(short = 's', long)]
    pub session: String,
    /// First entry (0-based; negative counts from the end).
    #[arg(long, allow_negative_numbers = true)]
    pub start: Option<i64>,
    /// End (exclusive; negative counts from the end).
    #[arg(long, allow_negative_numbers = true)]
    pub end: Option<i64>,
    /// Write the entries to this file instead of printing them.
    #[arg(long, value_name = "PATH")]
    pub export: Option<PathBuf>,
    /// transcript, script or notebook (default from the file name: .ipynb, .py, else transcript).
    #[arg(long, value_name = "F", requires = "export")]
    pub format: Option<String>,
    /// Print the tool's result as JSON.
    #[arg(long)]
    pub json: bool,
    /// The service's socket (default as for `serve --shared`).
    #[arg(long, env = "KERNEL_MCP_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// Run `kernel-mcp sessions`.
pub fn run_sessions(args: SessionsArgs, target: Target, rt: &tokio::runtime::Runtime) -> ExitCode {
    super::client::run_command(rt, || async move {
        let client = Client::connect(&target).await?;
        let r = client
            .call("list_sessions", json!({}), Duration::ZERO)
            .await;
        client.close().await;
        let r = r?;
        if args.json {
            print_json(&r.value);
        } else {
            out(&table(&r.value["sessions"]));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Run `kernel-mcp session …`.
pub fn run_session(args: SessionArgs, target: Target, rt: &tokio::runtime::Runtime) -> ExitCode {
    let Some(session) = args.session.clone() else {
        eprintln!("kernel-mcp: session needs -s SESSION");
        return ExitCode::from(2);
    };
    let (tool, params) = match &args.action {
        SessionAction::Get { variables } => (
            "get_session",
            json!({"session_id": session, "include_variables": variables}),
        ),
        SessionAction::Interrupt => ("interrupt_session", json!({"session_id": session})),
        SessionAction::Restart { clear_history } => (
            "restart_session",
            json!({"session_id": session, "clear_history": clear_history}),
        ),
        SessionAction::Destroy => ("destroy_session", json!({"session_id": session})),
        SessionAction::Renew { expires_after } => {
            let mut p = json!({"session_id": session});
            if let Some(s) = expires_after {
                p["expires_after_s"] = json!(s);
            }
            ("renew_session", p)
        }
    };
    super::client::run_command(rt, || async move {
        let client = Client::connect(&target).await?;
        let r = client.call(tool, params, Duration::from_secs(60)).await;
        client.close().await;
        let r = r?;
        if args.json {
            print_json(&r.value);
        } else {
            out(&format!("{}\n", r.text.trim_end()));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Run `kernel-mcp history`.
pub fn run_history(args: HistoryArgs, target: Target, rt: &tokio::runtime::Runtime) -> ExitCode {
    super::client::run_command(rt, || async move {
        let mut p = json!({"session_id": args.session});
        if let Some(s) = args.start {
            p["start"] = json!(s);
        }
        if let Some(e) = args.end {
            p["end"] = json!(e);
        }
        let tool = match &args.export {
            Some(path) => {
                let format = args
                    .format
                    .clone()
                    .unwrap_or_else(|| format_for(path).to_string());
                p["path"] = json!(super::client::absolute(path)?);
                p["format"] = json!(format);
                "export_history"
            }
            None => "get_history",
        };
        let client = Client::connect(&target).await?;
        let r = client.call(tool, p, Duration::from_secs(60)).await;
        client.close().await;
        let r = r?;
        if args.json {
            print_json(&r.value);
        } else if args.export.is_some() {
            out(&format!(
                "wrote {} entries ({} bytes) to {}\n",
                r.value["entries"],
                r.value["bytes"],
                r.value["path"].as_str().unwrap_or("")
            ));
        } else {
            out(&format!("{}\n", r.text.trim_end()));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The export format a file name suggests.
fn format_for(path: &std::path::Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("ipynb") => "notebook",
        Some("py") | Some("r") | Some("R") | Some("sh") | Some("m") => "script",
        _ => "transcript",
    }
}

fn print_json(v: &Value) {
    out(&format!(
        "{}\n",
        serde_json::to_string_pretty(v).unwrap_or_default()
    ));
}

/// The sessions as a table for people.
pub fn table(sessions: &Value) -> String {
    let rows: Vec<[String; 7]> = sessions
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let n = |k: &str| match &s[k] {
                Value::Null => "-".to_string(),
                Value::String(v) => v.clone(),
                v => v.to_string(),
            };
            [
                n("session_id"),
                n("kernel"),
                n("status"),
                n("generation"),
                n("pid"),
                n("history_count"),
                n("last_activity"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no sessions\n".into();
    }
    let head = [
        "SESSION",
        "KERNEL",
        "STATUS",
        "GEN",
        "PID",
        "CELLS",
        "LAST ACTIVITY",
    ];
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut push = |cells: Vec<&str>| {
        let line: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    };
    push(head.to_vec());
    for r in &rows {
        push(r.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_header_and_one_aligned_row_per_session() {
        let t = table(&json!([
            {"session_id": "work", "kernel": "python3", "status": "idle", "generation": 1,
             "pid": 42, "history_count": 3, "last_activity": "2026-01-01T00:00:00Z"},
            {"session_id": "a", "kernel": "ir", "status": "busy", "generation": 2,
             "pid": null, "history_count": 0, "last_activity": "2026-01-01T00:00:01Z"},
        ]));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("SESSION  KERNEL"));
        assert!(lines[2].starts_with("a        ir       busy"), "{t}");
        assert_eq!(table(&json!([])), "no sessions\n");
    }

    #[test]
    fn the_export_format_follows_the_file_name() {
        assert_eq!(format_for(std::path::Path::new("a.ipynb")), "notebook");
        assert_eq!(format_for(std::path::Path::new("a.py")), "script");
        assert_eq!(format_for(std::path::Path::new("a.txt")), "transcript");
    }
}
