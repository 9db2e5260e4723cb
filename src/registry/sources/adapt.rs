//! Adapt on take: how a warm pool's kernel becomes the kernel of a session that asked for its
//! own working directory, environment variables or memory limit (docs/performance.md, "The warm
//! pool").
//!
//! Why adapt rather than fork kernels from a preloaded forkserver: adapting works on the
//! kernel the kernelspec itself launched (its argv, its supervisor, so containment and the
//! memory limit work exactly as for a cold kernel), costs one silent `execute_request`
//! (a few milliseconds), and needs nothing of the kernel but its language. A forkserver would
//! replace the kernelspec's launch with our own (only for ipykernel), share one supervisor
//! between forked kernels (or need one per fork), and fork a process that has threads.
//!
//! [`plan`] decides whether a pooled kernel can serve a session and what must change
//! ([`Adaptation`]); [`apply`] changes it. A kernel that cannot be adapted is never used:
//! the session starts cold. What a pooled kernel can never differ in — so a session that
//! differs there starts cold — is everything fixed when its process started:
//!
//! - the kernelspec, the interpreter / environment prefix, the supervisor;
//! - the sandbox (policy and network): a sandboxed kernel must be sandboxed from its first
//!   instruction, so a sandboxed session takes a pooled kernel only from a pool launched
//!   under the same sandbox (see [`fixed_at_launch`]), and only with the pool's own cwd, env
//!   and limit (the sandbox's rules were built from them);
//! - environment variables the process reads as it starts: the interpreter's (`PYTHON*`
//!   except `PYTHONPATH`, which is adapted), the dynamic loader's and allocator's (`LD_*`,
//!   `MALLOC_*`, `GLIBC_TUNABLES`), the locale (`LANG`, `LC_*`), and where Jupyter and IPython
//!   read their configuration and start-up files (`HOME`, `IPYTHONDIR`, `JUPYTER_*`, `JPY_*`,
//!   `XDG_*`) — see [`read_at_start`];
//! - languages other than Python: only the exact launch (no cwd, env or limit of their own)
//!   comes from the pool;
//! - `/proc/PID/environ` of the kernel shows its launch environment (the process's own
//!   environment, `os.environ` and what its subprocesses inherit are the session's).
//!
//! The broker's per-kernel variables (its helper on `PYTHONPATH`, the kernel's endpoint
//! file) were set when the pool launched the kernel; a session's own `PYTHONPATH` is
//! combined with the helper the way a launch combines them ([`with_launch_hook`]). The
//! memory limit goes to the kernel's supervisor through its limit file
//! ([`crate::kernel::Kernel::set_memory_limit`]), which changes its cgroup's limit where the
//! kernel has one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

/// Longest wait for a pooled kernel's supervisor to put the session's memory limit in force.
const LIMIT_ACK: Duration = Duration::from_secs(5);

use crate::kernel::{
    Channel, ExitInfo, Kernel, KernelEvent, KernelIo, KernelSpec, LaunchOptions, SandboxPolicy,
    SendError,
};
use crate::wire::Execute;

/// Longest the adapting `execute_request` may take before the pool kernel is given up.
const ADAPT_TIMEOUT: Duration = Duration::from_secs(10);
/// After the reply, how long its `idle` may take to follow (then the kernel is used anyway).
const IDLE_GRACE: Duration = Duration::from_millis(500);

/// The Python that adapts a kernel (run with `plan` = {"cwd", "env"}).
const PYTHON_ADAPTER: &str = include_str!("adapt.py");

/// Why a pooled kernel could not be adapted (the session then starts cold).
#[derive(Debug, thiserror::Error)]
pub enum AdaptError {
    #[error("setting the memory limit: {0}")]
    MemoryLimit(#[source] std::io::Error),
    #[error("the kernel did not take the request")]
    NotTaken,
    #[error("{0}")]
    Send(#[from] SendError),
    #[error("the kernel did not answer in time")]
    NoAnswer,
    #[error("the kernel exited ({0})")]
    Exited(ExitInfo),
    /// The adapting code raised.
    #[error("{ename}: {evalue}")]
    Raised { ename: String, evalue: String },
    #[error("no reply")]
    NoReply,
}

/// What changes in a pooled kernel when a session takes it. Empty for a session that asked
/// for exactly the pool's launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adaptation {
    /// The session's working directory, when it is not the pool kernel's.
    pub cwd: Option<PathBuf>,
    /// Variables to set in the kernel's environment (the session's own, where they differ).
    pub env: BTreeMap<String, String>,
    /// The session's memory limit (MiB, 0 = none), when it is not the pool kernel's.
    pub max_memory_mib: Option<u64>,
}

impl Adaptation {
    pub fn is_empty(&self) -> bool {
        *self == Adaptation::default()
    }
}

/// True when a variable named `name` acts as the process starts, so setting it afterwards
/// would not make the kernel what a cold start with it makes (see the module docs).
pub fn read_at_start(name: &str) -> bool {
    let prefixed = |p: &str| name.starts_with(p);
    (prefixed("PYTHON") && name != "PYTHONPATH")
        || ["LD_", "MALLOC_", "LC_", "JUPYTER_", "JPY_", "XDG_"]
            .iter()
            .any(|p| prefixed(p))
        || ["GLIBC_TUNABLES", "LANG", "LANGUAGE", "HOME", "IPYTHONDIR"].contains(&name)
}

/// True when what the pool launched with and what the session asks for agree on everything
/// fixed when the kernel process started (see the module docs).
fn fixed_at_launch(pool: &LaunchOptions, session: &LaunchOptions) -> bool {
    pool.env_prefix == session.env_prefix
        && pool.supervisor == session.supervisor
        && pool.sandbox == session.sandbox
}

/// Make `a`'s `PYTHONPATH` what a launch of `session` for the kernel whose connection file is
/// `connection_file` would have set: the launch's hook (the broker's) adds its own entries
/// to the session's value. Nothing changes when the session sets no `PYTHONPATH`.
pub fn with_launch_hook(
    a: &mut Adaptation,
    spec: &KernelSpec,
    session: &LaunchOptions,
    connection_file: &std::path::Path,
) {
    let Some(hook) = &session.env_hook else {
        return;
    };
    if !a.env.contains_key("PYTHONPATH") {
        return;
    }
    let mut env = a.env.clone();
    let launch = crate::kernel::HookLaunch {
        spec,
        connection_file,
        private_dir: None,
    };
    drop(hook.apply(&launch, &mut env));
    if let Some(p) = env.remove("PYTHONPATH") {
        a.env.insert("PYTHONPATH".into(), p);
    }
}

/// How a kernel of `spec` launched with `pool` options becomes what `session` options would
/// have launched; `None` when it cannot (the session then starts cold).
pub fn plan(
    spec: &KernelSpec,
    pool: &LaunchOptions,
    session: &LaunchOptions,
) -> Option<Adaptation> {
    if !fixed_at_launch(pool, session) {
        return None;
    }
    // The pool launches with no variables of its own; one it had and the session lacks
    // could not be taken back out.
    if pool.env.iter().any(|(k, v)| session.env.get(k) != Some(v)) {
        return None;
    }
    let env: BTreeMap<String, String> = session
        .env
        .iter()
        .filter(|(k, v)| pool.env.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let adaptation = Adaptation {
        cwd: (pool.cwd != session.cwd).then(|| session.cwd.clone()),
        max_memory_mib: (pool.max_memory_mib != session.max_memory_mib)
            .then_some(session.max_memory_mib),
        env,
    };
    if adaptation.env.keys().any(|k| read_at_start(k)) {
        return None;
    }
    // A sandbox's rules were built from the kernel's cwd and environment, and its limit file
    // is not offered (the kernel could write it): only the exact launch.
    if pool.sandbox.policy != SandboxPolicy::None && !adaptation.is_empty() {
        return None;
    }
    let python = spec.language.eq_ignore_ascii_case("python");
    if (adaptation.cwd.is_some() || !adaptation.env.is_empty()) && !python {
        return None;
    }
    if adaptation.max_memory_mib.is_some() && pool.supervisor.is_none() {
        return None;
    }
    Some(adaptation)
}

/// Make `kernel` what the session asked for: the memory limit first (so the session's code
/// never runs under the pool's), then the working directory and environment in one silent
/// `execute_request` that stores no history and leaves no names. Errors: [`AdaptError`] (the
/// caller gives the kernel up and starts cold).
pub async fn apply(kernel: &mut Kernel, a: &Adaptation) -> Result<(), AdaptError> {
    if let Some(mib) = a.max_memory_mib {
        // In force before the session's first code runs.
        kernel
            .set_memory_limit(mib, LIMIT_ACK)
            .await
            .map_err(AdaptError::MemoryLimit)?;
    }
    if a.cwd.is_none() && a.env.is_empty() {
        return Ok(());
    }
    let plan = json!({"cwd": a.cwd, "env": a.env}).to_string();
    // JSON string literals are Python string literals too.
    let code = format!(
        "exec({}, {{'plan': __import__('json').loads({})}})",
        json!(PYTHON_ADAPTER),
        json!(plan)
    );
    let msg = kernel.request("execute_request", Execute::hidden(&code).content());
    let id = msg.msg_id().to_string();
    let deadline = Instant::now() + ADAPT_TIMEOUT;
    tokio::time::timeout_at(deadline, kernel.send(Channel::Shell, &msg))
        .await
        .map_err(|_| AdaptError::NotTaken)??;
    let (mut reply, mut idle) = (None, false);
    let mut until = deadline;
    while reply.is_none() || !idle {
        let ev = match tokio::time::timeout_at(until, kernel.next_event()).await {
            Ok(ev) => ev,
            Err(_) if reply.is_some() => break, // no idle: the kernel is ready all the same
            Err(_) => return Err(AdaptError::NoAnswer),
        };
        match ev {
            KernelEvent::Message(channel, m) if m.parent_msg_id() == Some(id.as_str()) => {
                match (channel, m.msg_type()) {
                    (Channel::Shell, "execute_reply") => {
                        reply = Some(m.content);
                        until = Instant::now() + IDLE_GRACE;
                    }
                    (Channel::Iopub, "status") => {
                        idle |= m.content["execution_state"] == "idle";
                    }
                    _ => {}
                }
            }
            KernelEvent::Exited(info) => return Err(AdaptError::Exited(info)),
            _ => {}
        }
    }
    match reply {
        Some(r) if r["status"] == "ok" => Ok(()),
        Some(r) => Err(AdaptError::Raised {
            ename: r["ename"].as_str().unwrap_or("error").to_string(),
            evalue: r["evalue"].as_str().unwrap_or_default().to_string(),
        }),
        None => Err(AdaptError::NoReply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> LaunchOptions {
        LaunchOptions {
            cwd: "/srv".into(),
            env: BTreeMap::new(),
            env_prefix: Some("/venv".into()),
            startup_timeout: Duration::from_secs(60),
            supervisor: Some("/bin/kernel-mcp".into()),
            max_memory_mib: 4096,
            protected: Default::default(),
            sandbox: Default::default(),
            env_hook: None,
        }
    }

    fn spec(language: &str) -> KernelSpec {
        KernelSpec {
            name: "k".into(),
            resource_dir: PathBuf::new(),
            argv: vec!["python".into()],
            display_name: "k".into(),
            language: language.into(),
            interrupt_mode: Default::default(),
            env: BTreeMap::new(),
            metadata: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_session_with_its_own_cwd_env_and_limit_is_served_by_adapting() {
        let mut session = opts();
        session.cwd = "/work".into();
        session.env.insert("API_URL".into(), "http://x".into());
        session.env.insert("PYTHONPATH".into(), "/lib".into());
        session.max_memory_mib = 512;
        let a = plan(&spec("python"), &opts(), &session).expect("adaptable");
        assert_eq!(a.cwd, Some("/work".into()));
        assert_eq!(a.env.len(), 2);
        assert_eq!(a.max_memory_mib, Some(512));
        assert!(
            plan(&spec("python"), &opts(), &opts())
                .expect("same")
                .is_empty()
        );
    }

    #[test]
    fn what_is_fixed_at_launch_makes_the_session_start_cold() {
        let py = spec("python");
        for var in [
            "PYTHONHASHSEED",
            "LD_PRELOAD",
            "LANG",
            "LC_ALL",
            "HOME",
            "JUPYTER_PATH",
        ] {
            let mut s = opts();
            s.env.insert(var.into(), "x".into());
            assert_eq!(plan(&py, &opts(), &s), None, "{var}");
        }
        let mut s = opts();
        s.env_prefix = Some("/other".into());
        assert_eq!(plan(&py, &opts(), &s), None, "another interpreter");
        let mut s = opts();
        s.sandbox.policy = SandboxPolicy::Workspace;
        assert_eq!(plan(&py, &opts(), &s), None, "a sandbox from the start");
        let mut sandboxed = opts();
        sandboxed.sandbox.policy = SandboxPolicy::Workspace;
        let mut s = sandboxed.clone();
        s.cwd = "/work".into();
        assert_eq!(
            plan(&py, &sandboxed, &s),
            None,
            "a sandbox built for the pool's cwd"
        );
        assert!(plan(&py, &sandboxed, &sandboxed).is_some_and(|a| a.is_empty()));
        let mut s = opts();
        s.cwd = "/work".into();
        assert_eq!(plan(&spec("R"), &opts(), &s), None, "no adapter for R");
        let mut unsupervised = opts();
        unsupervised.supervisor = None;
        let mut s = unsupervised.clone();
        s.max_memory_mib = 1;
        assert_eq!(plan(&py, &unsupervised, &s), None, "no supervisor to tell");
        let mut s = opts();
        s.max_memory_mib = 100;
        assert!(
            plan(&spec("R"), &opts(), &s).is_some(),
            "a limit needs no language"
        );
    }
}
