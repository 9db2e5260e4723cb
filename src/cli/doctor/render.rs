//! The doctor's report as a person reads it: the Python environments, the kernelspecs, the
//! service and the verdict, in that order (`kernel-mcp doctor` without `--json`).

use std::fmt::Write;

use kernel_mcp::kernel::IPYTHON_MEMORY_HISTORY;

use super::{Report, shell_quoted};

/// The report for a person.
pub(super) fn render(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "kernel-mcp {} ({})", r.kernel_mcp_version, r.platform);
    environments(&mut o, r);
    kernelspecs(&mut o, r);
    service(&mut o, r);
    verdict(&mut o, r);
    o
}

/// The Python environments, the selected one marked.
fn environments(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "\nPython environments (in order; the first is selected, change it with --python-env, KERNEL_MCP_PYTHON_ENV or VIRTUAL_ENV):"
    );
    if r.python_environments.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for e in &r.python_environments {
        let mark = if e.selected { "*" } else { " " };
        let state = match (&e.python_version, &e.ipykernel_version) {
            _ if !e.exists => "no python there".to_string(),
            (None, _) => "python did not run".to_string(),
            (Some(v), Some(k)) => format!("Python {v}, ipykernel {k}"),
            (Some(v), None) => format!("Python {v}, no ipykernel"),
        };
        let _ = writeln!(
            o,
            "  {mark} {}  [{}]  {state}",
            e.python.display(),
            e.source
        );
    }
}

/// The kernelspec directories and each kernelspec: whether it can start, what it runs.
fn kernelspecs(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nKernelspec directories searched:");
    for d in &r.kernelspec_dirs {
        let state = if d.exists { "" } else { "  (missing)" };
        let _ = writeln!(o, "    {}{state}", d.path.display());
    }
    let _ = writeln!(o, "\nKernelspecs:");
    if r.kernelspecs.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for k in &r.kernelspecs {
        let mark = if k.can_start { "ok  " } else { "FAIL" };
        let default = if Some(&k.name) == r.default_kernel.as_ref() {
            " (default)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "  {mark} {}{default}  {}  {}",
            k.name,
            k.language,
            k.resource_dir.display()
        );
        if let Some(cmd) = &k.command {
            let shown: Vec<String> = cmd.iter().map(|a| shell_quoted(a)).collect();
            let _ = writeln!(o, "       runs: {}", shown.join(" "));
        }
        // The first line says what is wrong; the fix for the default kernel follows below.
        if let Some(line) = k.problem.as_deref().and_then(|p| p.lines().next()) {
            let _ = writeln!(o, "       {line}");
        }
    }
    let adds_history_option = r.kernelspecs.iter().any(|k| {
        k.command
            .iter()
            .flatten()
            .any(|a| a == IPYTHON_MEMORY_HISTORY)
    });
    if adds_history_option {
        let _ = writeln!(
            o,
            "  ({IPYTHON_MEMORY_HISTORY} is added by kernel-mcp: IPython keeps its history in memory, not in ~/.ipython; a kernelspec naming a --HistoryManager. option keeps its own.)"
        );
    }
}

/// The service's socket and HTTP face.
fn service(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nService:");
    match &r.service.socket {
        Some(s) => {
            let state = match (&r.service.problem, r.service.running) {
                (Some(_), _) => "REFUSED by every client",
                (None, true) => "running",
                (None, false) => "not running (standalone mode needs none)",
            };
            let _ = writeln!(o, "    {}  {state}", s.display());
            if let Some(p) = &r.service.problem {
                let _ = writeln!(o, "       {p}");
            }
            if let Some(f) = &r.service.floors {
                let _ = writeln!(
                    o,
                    "    floors in force: {} (a client may ask for stricter ones for its sessions)",
                    f.describe()
                );
            }
        }
        None => {
            let _ = writeln!(o, "    no socket path");
        }
    }
    match (&r.service.http, &r.service.token_file) {
        (Some(h), _) => {
            let from = match &h.token_file {
                Some(f) => format!("the token is in {} (`kernel-mcp token`)", f.display()),
                None => format!("its token came from the {}", h.token_source),
            };
            let _ = writeln!(o, "    HTTP face: {}  ({from})", h.url);
        }
        (None, Some(f)) => {
            let _ = writeln!(
                o,
                "    HTTP face: not up; its generated token is in {} (`kernel-mcp token`)",
                f.display()
            );
        }
        (None, None) => {}
    }
    super::super::oauth::render(r.oauth.as_ref(), o);
    let summary = r.telemetry["summary"].as_str().unwrap_or_default();
    let _ = writeln!(o, "telemetry: {summary}");
}

/// The sandbox, the gateways, and whether a first `execute` would work (with the advice).
fn verdict(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nSandbox (docs/sandbox.md):");
    for line in r.sandbox.describe() {
        let _ = writeln!(o, "  {line}");
    }
    if !r.gateways.is_empty() {
        let _ = writeln!(o, "\nGateways:");
    }
    for g in &r.gateways {
        match &g.error {
            None => {
                let _ = writeln!(o, "  ok   {}  {}", g.name, g.url);
            }
            Some(e) => {
                let _ = writeln!(o, "  FAIL {}  {}  {e}", g.name, g.url);
            }
        }
    }
    let _ = writeln!(o);
    if r.ok {
        let _ = writeln!(
            o,
            "OK: the default kernel ({}) can start.",
            r.default_kernel.as_deref().unwrap_or("./.venv")
        );
    } else {
        let _ = writeln!(o, "PROBLEM: a first `execute` would fail.");
        for a in &r.advice {
            let _ = writeln!(o, "{a}");
        }
    }
}
