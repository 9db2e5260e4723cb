//! The OS sandbox a local kernel runs in (docs/sandbox.md): the policies, what
//! this host can enforce, and how `kernel-mcp supervise` applies them to the kernel process
//! between `fork` and `exec`, whatever the kernelspec (Python, R, Octave, bash, xeus…).
//!
//! - [`Policy`] and [`Sandbox`] are what a session asks for (`create_session(sandbox=…,
//!   sandbox_network=…)`, `serve --sandbox`).
//! - [`host`] detects what the running kernel offers (Landlock ABI, seccomp, user
//!   namespaces, a cgroup memory controller) and says what is missing for a policy
//!   ([`SandboxUnavailable`]); the server checks before it starts a kernel, the supervisor
//!   enforces with hard requirements, so a policy is never silently weaker than asked.
//! - [`paths`] computes what a policy lets the kernel read and write: the system, the
//!   interpreter and the environment prefixes the kernel's argv points at (a venv's base
//!   interpreter included), the session's cwd, a private tmp, the connection file's own
//!   directory.
//! - [`apply`] builds the Landlock ruleset (filesystem, TCP ports, signal scoping) and the
//!   seccomp filters ([`seccomp`]) in the supervisor, and the kernel's child enters them just
//!   before `exec`.
//!
//! Containment is applied to every supervised kernel, `none` included, where the host has
//! Landlock ABI ≥ 6: a Landlock domain that handles no file access and only scopes signals,
//! so kernel code cannot signal (or ptrace) its supervisor or any process outside its tree.
//!
//! Not here: the supervisor's process handling (`supervise`), memory accounting
//! (`cgroup`, `usage`).

pub mod apply;
pub mod host;
pub mod paths;
pub mod rules;
pub mod seccomp;

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use host::HostSupport;

/// What a sandboxed kernel may touch (docs/sandbox.md has the full table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(inline)]
pub enum Policy {
    // (Plain comments: doc comments here would repeat in every tool's schema.)
    // No sandbox: the kernel has the rights of the user running kernel-mcp. Containment
    // (signal scoping, the whole tree killed with the session) still applies.
    #[default]
    None,
    // Read the system, the kernel's environment prefixes and the session's cwd; write only
    // the cwd and a private tmp; no network except the kernel's own channels.
    Workspace,
    // As `workspace`, but the cwd is read-only too.
    ReadOnly,
}

impl Policy {
    /// The contract's name: `none`, `workspace`, `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Workspace => "workspace",
            Policy::ReadOnly => "read-only",
        }
    }

    /// True for the policies that restrict the kernel (all but `none`).
    pub fn restricts(self) -> bool {
        self != Policy::None
    }

    /// How much it restricts: `none` < `workspace` < `read-only`.
    pub fn strictness(self) -> u8 {
        match self {
            Policy::None => 0,
            Policy::Workspace => 1,
            Policy::ReadOnly => 2,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is not one of `none`, `workspace`, `read-only`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown sandbox policy {0:?}: use none, workspace or read-only")]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Policy, UnknownPolicy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Policy::None),
            "workspace" => Ok(Policy::Workspace),
            "read-only" | "readonly" | "read_only" => Ok(Policy::ReadOnly),
            other => Err(UnknownPolicy(other.to_string())),
        }
    }
}

/// A session's sandbox: the policy and whether outbound network is allowed
/// (`sandbox_network`; meaningless under `none`, which restricts nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct Sandbox {
    pub policy: Policy,
    // True when the kernel may open outbound connections (TCP and UDP to any host).
    pub network: bool,
}

impl Sandbox {
    /// No sandbox.
    pub const NONE: Sandbox = Sandbox {
        policy: Policy::None,
        network: false,
    };

    /// True when the kernel is restricted at all.
    pub fn restricts(&self) -> bool {
        self.policy.restricts()
    }

    /// True for [`Sandbox::NONE`].
    pub fn is_none(&self) -> bool {
        *self == Sandbox::NONE
    }

    /// True when `self` confines at least as much as `floor`: a policy as strict or
    /// stricter, and no network where `floor` has none (under a restricting floor).
    pub fn at_least(&self, floor: Sandbox) -> bool {
        self.policy.strictness() >= floor.policy.strictness()
            && (!floor.restricts() || floor.network || !self.network)
    }

    /// True when the policy lets the kernel write `path` (an absolute, canonical path):
    /// only `workspace`, and only inside the session's `cwd`. (The private tmp is not an
    /// environment anyone installs into.)
    pub fn allows_writing(&self, cwd: &std::path::Path, path: &std::path::Path) -> bool {
        match self.policy {
            Policy::None => true,
            Policy::ReadOnly => false,
            Policy::Workspace => path.starts_with(cwd),
        }
    }
}

impl fmt::Display for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.restricts() && self.network {
            write!(f, "{} (with network)", self.policy)
        } else {
            write!(f, "{}", self.policy)
        }
    }
}

/// A policy this host cannot enforce, and what is missing (each entry a sentence naming the
/// kernel feature and the version that has it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "sandbox '{sandbox}' cannot be enforced on this host: {}. kernel-mcp never starts a kernel less sandboxed than asked; run `kernel-mcp doctor` to see what the host supports, or create the session with sandbox \"none\".",
    missing.join("; ")
)]
pub struct SandboxUnavailable {
    pub sandbox: Sandbox,
    pub missing: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_from_their_contract_names_and_serialize_back() {
        for p in [Policy::None, Policy::Workspace, Policy::ReadOnly] {
            assert_eq!(p.as_str().parse::<Policy>().unwrap(), p);
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        assert_eq!("READONLY".parse::<Policy>().unwrap(), Policy::ReadOnly);
        let err = "strict".parse::<Policy>().unwrap_err().to_string();
        assert!(err.contains("none, workspace or read-only"), "{err}");
    }

    #[test]
    fn only_workspace_writes_and_only_inside_the_cwd() {
        let cwd = std::path::Path::new("/p");
        let ws = Sandbox {
            policy: Policy::Workspace,
            network: false,
        };
        assert!(ws.allows_writing(cwd, std::path::Path::new("/p/.venv")));
        assert!(!ws.allows_writing(cwd, std::path::Path::new("/usr")));
        let ro = Sandbox {
            policy: Policy::ReadOnly,
            network: true,
        };
        assert!(!ro.allows_writing(cwd, std::path::Path::new("/p/.venv")));
        assert!(Sandbox::NONE.allows_writing(cwd, std::path::Path::new("/usr")));
    }
}
