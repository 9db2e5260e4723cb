//! `kernel-mcp log [--audit] [--principal ID] [--lines N] [--json]`: the service log, or its
//! audit trail — one line per tool call: when, who (the principal's id), which tool, the
//! session, the run, the outcome and how long it took (docs/auth.md, "The audit trail"). Reads
//! the service log and the log it moved aside at its last start (`service.log.old`), oldest
//! first.
//!
//! Exit status: 0 lines were printed (or none matched); 1 there is no service log.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value};

/// `kernel-mcp log`.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Only the audit trail: one line per tool call.
    #[arg(long)]
    pub audit: bool,
    /// Only the audit lines of this principal (`owner`, `uid:N`, `oauth:ISS#SUB`).
    #[arg(long, requires = "audit")]
    pub principal: Option<String>,
    /// The last N lines (0: all).
    #[arg(long, default_value_t = 50)]
    pub lines: usize,
    /// Audit lines as JSON objects, one a line.
    #[arg(long, requires = "audit")]
    pub json: bool,
}

/// Run `kernel-mcp log`.
pub fn run(args: LogArgs) -> ExitCode {
    let Some(path) = kernel_mcp::service::paths::log_file() else {
        eprintln!("kernel-mcp: no service log: neither XDG_STATE_HOME nor HOME is set");
        return ExitCode::from(1);
    };
    let text = read_logs(&path);
    if text.is_empty() {
        eprintln!(
            "kernel-mcp: no service log at {} (the service has not run as this user)",
            path.display()
        );
        return ExitCode::from(1);
    }
    let mut out: Vec<String> = text.lines().filter_map(|l| select(l, &args)).collect();
    if args.lines > 0 && out.len() > args.lines {
        out.drain(..out.len() - args.lines);
    }
    let mut all = out.join("\n");
    if !all.is_empty() {
        all.push('\n');
    }
    super::client::out(&all);
    ExitCode::SUCCESS
}

/// The service log's text, the moved-aside one first (missing files read as empty).
fn read_logs(path: &Path) -> String {
    let old: PathBuf = path.with_extension("log.old");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    read(&old) + &read(path)
}

/// The line as `args` prints it, or `None` when it is left out.
fn select(line: &str, args: &LogArgs) -> Option<String> {
    if !args.audit {
        return Some(line.to_string());
    }
    let fields = audit_fields(line)?;
    if let Some(p) = &args.principal
        && fields.get("principal").and_then(Value::as_str) != Some(p.as_str())
    {
        return None;
    }
    if args.json {
        return Some(Value::Object(fields).to_string());
    }
    let f = |k: &str| {
        fields
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_string()
    };
    Some(format!(
        "{} {} {} session={} run={} {} {}ms",
        f("time"),
        f("principal"),
        f("tool"),
        f("session"),
        f("run"),
        f("outcome"),
        f("ms")
    ))
}

/// The fields of an audit line (`TIME  INFO kernel_mcp::audit: tool call k=v …`), or `None`
/// for any other line.
fn audit_fields(line: &str) -> Option<Map<String, Value>> {
    let marker = format!("{}: tool call", kernel_mcp::mcp::audit::TARGET);
    let at = line.find(&marker)?;
    let mut fields = Map::new();
    let time = line.split_whitespace().next().unwrap_or_default();
    fields.insert("time".into(), Value::String(time.into()));
    for pair in line[at + marker.len()..].split_whitespace() {
        if let Some((k, v)) = pair.split_once('=') {
            fields.insert(k.into(), Value::String(v.trim_matches('"').into()));
        }
    }
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_line_reads_back_as_its_fields_and_other_lines_are_left_out() {
        let line = "2026-12-05T12:00:00.1Z  INFO kernel_mcp::audit: tool call principal=uid:7 tool=execute session=a run=run-1 outcome=ok ms=12";
        let f = audit_fields(line).unwrap();
        assert_eq!(f["principal"], "uid:7");
        assert_eq!(f["outcome"], "ok");
        assert_eq!(f["time"], "2026-12-05T12:00:00.1Z");
        assert!(audit_fields("2026 INFO kernel_mcp::service: listening").is_none());
        let args = LogArgs {
            audit: true,
            principal: Some("owner".into()),
            lines: 0,
            json: false,
        };
        assert!(select(line, &args).is_none(), "another principal's line");
    }
}
