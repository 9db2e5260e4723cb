//! `kernel-mcp doctor [--json]`: what kernel-mcp finds on this machine, and whether the first
//! `execute` (which uses the default kernel) would start.
//!
//! It reports the kernelspec directories searched and the kernelspecs in them, each with the
//! program its `argv` resolves to and whether that program can run it (for Python kernels: the
//! interpreter imports the kernel's module); the Python environments kernel-mcp would consider,
//! in order, each with its Python and ipykernel versions; the per-user service socket, whether
//! its directory can be trusted and something listens on it, and where the HTTP face's token
//! is; and versions. Every probe of an interpreter is bounded
//! ([`PROBE_TIMEOUT`]) and they run in parallel, so doctor answers in seconds.
//!
//! Exit status: 0 when the default kernel can start, 1 otherwise (with the fix printed).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod render;

use super::env_prefix::{self, EnvCandidate};
use kernel_mcp::kernel::KernelSpec;
use kernel_mcp::kernel::advice;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::kernel::{build_argv, keep_ipython_history_in_memory};
use serde::Serialize;

/// The longest one interpreter probe may take (a cold `import ipykernel` takes about a second).
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Everything doctor found; `--json` prints this.
#[derive(Debug, Serialize)]
pub struct Report {
    pub ok: bool,
    pub kernel_mcp_version: &'static str,
    pub platform: String,
    /// The environment kernel-mcp selects for discovery and `python` in kernelspecs.
    pub selected_environment: Option<PathBuf>,
    pub python_environments: Vec<PythonEnv>,
    pub kernelspec_dirs: Vec<SpecDir>,
    pub kernelspecs: Vec<SpecStatus>,
    pub default_kernel: Option<String>,
    pub service: Service,
    /// Each `--gateway`, with `error` when it does not answer (or refuses the token).
    pub gateways: Vec<kernel_mcp::registry::sources::remote::GatewayState>,
    /// What this host can enforce for the OS sandbox and containment (docs/sandbox.md).
    pub sandbox: kernel_mcp::kernel::sandbox::HostSupport,
    /// OAuth on an HTTP face (these options', else the running service's); `null`: off.
    pub oauth: Option<super::oauth::OAuthReport>,
    /// OpenTelemetry export, as this environment sets it (docs/telemetry.md).
    pub telemetry: serde_json::Value,
    /// What to do, when `ok` is false (or a warning when it is true).
    pub advice: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct PythonEnv {
    /// `$VIRTUAL_ENV`, `kernel-mcp's own environment`, `python3 on PATH`…
    pub source: String,
    pub prefix: Option<PathBuf>,
    pub python: PathBuf,
    pub exists: bool,
    pub python_version: Option<String>,
    pub ipykernel_version: Option<String>,
    pub selected: bool,
}

#[derive(Debug, Serialize)]
pub struct SpecDir {
    pub path: PathBuf,
    pub exists: bool,
}

#[derive(Debug, Serialize)]
pub struct SpecStatus {
    pub name: String,
    pub language: String,
    pub resource_dir: PathBuf,
    /// The command kernel-mcp would run (`{connection_file}` left as is), when it resolves.
    pub command: Option<Vec<String>>,
    pub can_start: bool,
    /// Why it cannot start, and the fix.
    pub problem: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Service {
    pub socket: Option<PathBuf>,
    pub running: bool,
    /// Why clients would refuse the socket's directory (another user's, open to others…).
    pub problem: Option<String>,
    /// The HTTP face while it is up (`service --http`): `url`, `token_file`, `token_source`.
    pub http: Option<kernel_mcp::service::http::HttpRecord>,
    /// The token generated for the HTTP face (`kernel-mcp token` prints it), when there is one.
    pub token_file: Option<PathBuf>,
    /// The running service's own floors (sandbox, memory ceiling); a client may ask for
    /// stricter ones for its sessions (docs/sandbox.md, "Floors in shared mode").
    pub floors: Option<kernel_mcp::registry::floors::Floors>,
}

/// What can be seen of the service on `socket` without sending it anything.
fn service_state(socket: Option<PathBuf>) -> Service {
    let paths = socket
        .clone()
        .map(kernel_mcp::service::paths::ServicePaths::new);
    let checked = paths.as_ref().map(|p| p.check_dir());
    let problem = match &checked {
        Some(Err(e)) => Some(e.to_string()),
        _ => None,
    };
    let trusted = matches!(checked, Some(Ok(true)));
    let paths = paths.filter(|_| trusted);
    let running = paths.as_ref().is_some_and(|p| p.running_pid().is_some());
    Service {
        running,
        floors: paths
            .as_ref()
            .filter(|_| running)
            .and_then(kernel_mcp::service::hello::read_record),
        http: paths
            .as_ref()
            .and_then(kernel_mcp::service::http::read_record),
        token_file: paths.map(|p| p.token_file).filter(|f| f.is_file()),
        socket,
        problem,
    }
}

/// Gathers the report and prints it (JSON on `--json`). Never panics; probes are bounded.
pub fn run(
    runtime: &tokio::runtime::Runtime,
    search: &KernelSearch,
    flag: Option<&Path>,
    gateways: &[kernel_mcp::kernel::remote::Rest],
    oauth: &super::args::OAuthArgs,
    json: bool,
) -> ExitCode {
    let mut report = runtime.block_on(gather(search, flag));
    report.gateways = runtime
        .block_on(kernel_mcp::registry::sources::remote::list_all(gateways))
        .1;
    report.oauth = runtime.block_on(super::oauth::check(oauth, report.service.http.as_ref()));
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("kernel-mcp doctor: {e}"),
        }
    } else {
        print!("{}", render::render(&report));
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn gather(search: &KernelSearch, flag: Option<&Path>) -> Report {
    let (python_environments, selected) = python_environments(flag).await;
    let specs = search.list();
    let spec_checks = specs.iter().map(|s| check_spec(s, selected.as_deref()));
    let kernelspecs: Vec<SpecStatus> = futures::future::join_all(spec_checks).await;
    let default_kernel = specs
        .iter()
        .find(|s| s.name == "python3")
        .or(specs.first())
        .map(|s| s.name.clone());

    // A `.venv` with ipykernel in the working directory backs the default session by itself.
    let local_venv_ok = python_environments
        .iter()
        .any(|e| e.source == "./.venv" && e.ipykernel_version.is_some());
    let default_ok = kernelspecs
        .iter()
        .any(|k| Some(&k.name) == default_kernel.as_ref() && k.can_start);
    let ok = default_ok || local_venv_ok;
    let advice = if ok {
        Vec::new()
    } else {
        first_run_advice(&kernelspecs, default_kernel.as_deref())
    };
    let socket = service_socket(&|k| std::env::var(k).ok(), nix::unistd::getuid().as_raw());
    Report {
        ok,
        kernel_mcp_version: env!("CARGO_PKG_VERSION"),
        platform: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        selected_environment: selected,
        python_environments,
        kernelspec_dirs: search
            .dirs()
            .iter()
            .map(|d| SpecDir {
                path: d.clone(),
                exists: d.is_dir(),
            })
            .collect(),
        kernelspecs,
        default_kernel,
        service: service_state(socket),
        gateways: Vec::new(),
        sandbox: kernel_mcp::kernel::sandbox::HostSupport::current().clone(),
        oauth: None,
        telemetry: kernel_mcp::telemetry::report(kernel_mcp::telemetry::settings()),
        advice,
    }
}

/// The Python environments a session may use, in order (the first is selected), and each
/// one's Python and ipykernel versions; then `python3` on PATH. Also the selected prefix.
async fn python_environments(flag: Option<&Path>) -> (Vec<PythonEnv>, Option<PathBuf>) {
    let candidates = env_prefix::candidates_from_process(flag);
    let selected = candidates.first().map(|c| c.prefix.clone());
    let mut envs: Vec<(String, Option<PathBuf>, PathBuf)> = candidates
        .iter()
        .map(|c: &EnvCandidate| {
            (
                c.source.label().to_string(),
                Some(c.prefix.clone()),
                c.python(),
            )
        })
        .collect();
    if let Ok(p) = which::which("python3") {
        envs.push(("python3 on PATH".into(), None, p));
    }
    let env_probes = envs.iter().map(|(_, _, python)| probe(python, "ipykernel"));
    let env_results = futures::future::join_all(env_probes).await;
    let python_environments: Vec<PythonEnv> = envs
        .into_iter()
        .zip(env_results)
        .map(|((source, prefix, python), r)| PythonEnv {
            selected: prefix.is_some() && prefix == selected,
            exists: python.exists(),
            source,
            prefix,
            python,
            python_version: r.python_version,
            ipykernel_version: r.module_version,
        })
        .collect();
    (python_environments, selected)
}

/// What to do when the default kernel cannot start: why it cannot (or that there is no
/// kernelspec), and which other kernels can.
fn first_run_advice(kernelspecs: &[SpecStatus], default_kernel: Option<&str>) -> Vec<String> {
    let mut advice = Vec::new();
    match kernelspecs
        .iter()
        .find(|k| Some(k.name.as_str()) == default_kernel)
    {
        Some(k) => advice.push(format!(
            "The default kernel '{}' cannot start: {}",
            k.name,
            k.problem.as_deref().unwrap_or("unknown")
        )),
        None => advice.push(format!(
            "No kernelspecs found. Install ipykernel into a Python environment and select it:\n- {}",
            advice::select_env_hint()
        )),
    }
    let others: Vec<&str> = kernelspecs
        .iter()
        .filter(|k| k.can_start)
        .map(|k| k.name.as_str())
        .collect();
    if !others.is_empty() {
        advice.push(format!(
            "These kernels can start when named in create_session(kernel=…): {}.",
            others.join(", ")
        ));
    }
    advice
}

/// `arg` as a POSIX shell reads it back: unchanged when it has no character the shell treats
/// specially, else in single quotes (so a printed command can be pasted).
fn shell_quoted(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+{}".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// Whether `spec` can start: its program resolves and, for `python -m MODULE`, imports MODULE.
async fn check_spec(spec: &KernelSpec, env_prefix: Option<&Path>) -> SpecStatus {
    let status = |command, can_start, problem| SpecStatus {
        name: spec.name.clone(),
        language: spec.language.clone(),
        resource_dir: spec.resource_dir.clone(),
        command,
        can_start,
        problem,
    };
    let spec_file = spec.resource_dir.join("kernel.json");
    let mut argv = match build_argv(spec, Path::new("{connection_file}"), env_prefix) {
        Ok(a) => a,
        Err(e) => {
            let program = spec.argv.first().map(String::as_str).unwrap_or_default();
            let is_python = program.starts_with("python");
            let fix = advice::missing_program(program, Some(&spec_file), is_python);
            return status(None, false, Some(format!("{e}\n{fix}")));
        }
    };
    // The command exactly as a launch runs it, options kernel-mcp adds included.
    keep_ipython_history_in_memory(&mut argv);
    let Some(argv0) = argv.first().cloned() else {
        return status(None, false, Some("the kernelspec's argv is empty".into()));
    };
    let program = PathBuf::from(&argv0);
    let resolved = if program.is_absolute() {
        program.is_file().then(|| program.clone())
    } else {
        which::which(&program).ok()
    };
    let Some(resolved) = resolved else {
        let fix = advice::missing_program(&argv0, Some(&spec_file), false);
        return status(Some(argv), false, Some(fix));
    };
    // `<python> -m MODULE …`: the interpreter must import MODULE.
    let module = argv.windows(2).find(|w| w[0] == "-m").map(|w| w[1].clone());
    if let Some(module) = module {
        let r = probe(&resolved, &module).await;
        if r.python_version.is_some() && r.module_version.is_none() {
            let problem = if module.starts_with("ipykernel") {
                advice::missing_ipykernel(&resolved, which::which("uv").is_ok())
            } else {
                format!(
                    "{} cannot import {module}: install that kernel's package into it ({} -m pip install …), or remove the kernelspec {}.",
                    resolved.display(),
                    resolved.display(),
                    spec_file.display()
                )
            };
            return status(Some(argv), false, Some(problem));
        }
    }
    status(Some(argv), true, None)
}

/// What one interpreter probe found; both `None` when the interpreter did not run.
#[derive(Debug, Default)]
struct Probe {
    python_version: Option<String>,
    /// The version of the distribution named like the module, or "yes" when the module is
    /// there but no such distribution is (`ipykernel_launcher` belongs to ipykernel).
    module_version: Option<String>,
}

/// Runs `python -c` to read its version and find `module` (and its distribution's version),
/// bounded by [`PROBE_TIMEOUT`].
async fn probe(python: &Path, module: &str) -> Probe {
    if !python.exists()
        || !module
            .chars()
            .all(|c| c.is_alphanumeric() || "._".contains(c))
    {
        return Probe::default();
    }
    // find_spec locates the module without running it (a kernel's `-m` module may start a
    // kernel when imported); the version comes from the installed distribution's metadata.
    let script = format!(
        "import sys, importlib.util, importlib.metadata as md\n\
         print(sys.version.split()[0])\n\
         if importlib.util.find_spec('{module}') is None: sys.exit(3)\n\
         try: print(md.version('{module}'))\n\
         except Exception: print('yes')\n"
    );
    let mut probe = tokio::process::Command::new(python);
    kernel_mcp::secrets::scrub(probe.as_std_mut());
    let child = probe
        .args(["-c", &script])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let Ok(Ok(out)) = tokio::time::timeout(PROBE_TIMEOUT, child).await else {
        return Probe::default();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    Probe {
        python_version: lines.next().map(str::to_string),
        module_version: out
            .status
            .success()
            .then(|| lines.next().map(str::to_string))
            .flatten(),
    }
}

/// The service socket: `$KERNEL_MCP_SOCKET`, else the per-user one,
/// `$XDG_RUNTIME_DIR/kernel-mcp/service.sock`, else `${TMPDIR:-/tmp}/kernel-mcp-<uid>/service.sock`.
pub fn service_socket(env: &dyn Fn(&str) -> Option<String>, uid: u32) -> Option<PathBuf> {
    let non_empty = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(socket) = non_empty("KERNEL_MCP_SOCKET") {
        return Some(PathBuf::from(socket));
    }
    if let Some(dir) = non_empty("XDG_RUNTIME_DIR") {
        return Some(Path::new(&dir).join("kernel-mcp/service.sock"));
    }
    let tmp = non_empty("TMPDIR").unwrap_or_else(|| "/tmp".into());
    Some(Path::new(&tmp).join(format!("kernel-mcp-{uid}/service.sock")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_socket_prefers_its_variable_then_xdg_runtime_dir_then_tmpdir_then_tmp() {
        let xdg = |k: &str| (k == "XDG_RUNTIME_DIR").then(|| "/run/user/7".to_string());
        assert_eq!(
            service_socket(&xdg, 7),
            Some(PathBuf::from("/run/user/7/kernel-mcp/service.sock"))
        );
        let tmp = |k: &str| (k == "TMPDIR").then(|| "/var/tmp".to_string());
        assert_eq!(
            service_socket(&tmp, 7),
            Some(PathBuf::from("/var/tmp/kernel-mcp-7/service.sock"))
        );
        assert_eq!(
            service_socket(&|_| None, 7),
            Some(PathBuf::from("/tmp/kernel-mcp-7/service.sock"))
        );
        let own = |k: &str| (k == "KERNEL_MCP_SOCKET").then(|| "/s/x.sock".to_string());
        assert_eq!(service_socket(&own, 7), Some(PathBuf::from("/s/x.sock")));
    }

    #[test]
    fn a_shown_command_quotes_what_the_shell_would_read_otherwise() {
        assert_eq!(shell_quoted("-f"), "-f");
        assert_eq!(shell_quoted("{connection_file}"), "{connection_file}");
        assert_eq!(
            shell_quoted("--HistoryManager.hist_file=:memory:"),
            "--HistoryManager.hist_file=:memory:"
        );
        assert_eq!(shell_quoted("IRkernel::main()"), "'IRkernel::main()'");
        assert_eq!(shell_quoted("it's"), "'it'\\''s'");
        assert_eq!(shell_quoted(""), "''");
    }
}
