//! What this host's kernel can enforce: the Landlock ABI, seccomp filters, user namespaces and
//! a memory cgroup we may create. Detected once per process (a few syscalls and `/proc`
//! reads), reported in `server_info.sandbox` and by `kernel-mcp doctor`, and checked before a
//! sandboxed kernel starts ([`HostSupport::check`]).
//!
//! Landlock ABI versions (kernel docs, "Landlock: unprivileged access control"): 1 filesystem
//! (Linux 5.13), 2 `REFER` (5.19), 3 `TRUNCATE` (6.2), 4 TCP bind/connect (6.7), 5 device
//! ioctl (6.10), 6 signal and abstract-socket scoping (6.12), 7 audit (6.15).
//!
//! With the `test-kernel` feature (the test build only), `KERNEL_MCP_TEST_LANDLOCK_ABI=N`
//! makes detection report at most ABI N, so the tests can see a host without Landlock refuse.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Serialize;

use super::{Policy, Sandbox, SandboxUnavailable};
use crate::kernel::cgroup::{self, CgroupKind};

/// The Landlock ABI that added TCP bind/connect rules.
pub const ABI_TCP: u8 = 4;
/// The Landlock ABI that added signal and abstract unix socket scoping.
pub const ABI_SCOPE: u8 = 6;

/// What the running kernel offers for sandboxing and containment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HostSupport {
    // The Landlock ABI version (0: no Landlock).
    pub landlock_abi: u8,
    // Landlock can restrict TCP bind and connect by port (ABI ≥ 4).
    pub tcp_rules: bool,
    // Landlock can keep a kernel from signalling processes outside its tree (ABI ≥ 6).
    pub signal_scoping: bool,
    // seccomp-bpf filters can be installed.
    pub seccomp: bool,
    // Unprivileged user namespaces are enabled (reported; kernel-mcp does not need them).
    pub user_namespaces: bool,
    // The cgroup memory controller kernel-mcp can create a group under (`v1`, `v2`), or
    // null: memory is then counted as PSS plus shared-memory files.
    pub memory_cgroup: Option<CgroupKind>,
}

impl HostSupport {
    /// This process's view, detected on first use.
    pub fn current() -> &'static HostSupport {
        static CURRENT: OnceLock<HostSupport> = OnceLock::new();
        CURRENT.get_or_init(HostSupport::detect)
    }

    /// Detect now (uncached).
    pub fn detect() -> HostSupport {
        let abi = landlock_abi().min(simulated_abi_ceiling());
        HostSupport {
            landlock_abi: abi,
            tcp_rules: abi >= ABI_TCP,
            signal_scoping: abi >= ABI_SCOPE,
            seccomp: seccomp_available(),
            user_namespaces: user_namespaces(),
            memory_cgroup: cgroup::available(),
        }
    }

    /// Ok when `sandbox` can be enforced here; else what is missing.
    pub fn check(&self, sandbox: Sandbox) -> Result<(), SandboxUnavailable> {
        let mut missing = Vec::new();
        if sandbox.policy != Policy::None {
            if self.landlock_abi == 0 {
                missing.push(
                    "Landlock is not available (Linux 5.13 or later with `landlock` in the kernel's LSM list, see /sys/kernel/security/lsm)".to_string(),
                );
            } else if !sandbox.network && !self.tcp_rules {
                missing.push(format!(
                    "keeping the kernel off the network while its own TCP channels work needs Landlock ABI {ABI_TCP} (Linux 6.7) for TCP rules; this host has ABI {}. Pass sandbox_network: true to sandbox files only",
                    self.landlock_abi
                ));
            }
            if !self.seccomp {
                missing.push(
                    "seccomp filters are not available (a kernel built with CONFIG_SECCOMP_FILTER)"
                        .into(),
                );
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(SandboxUnavailable { sandbox, missing })
        }
    }

    /// One line per feature, for `kernel-mcp doctor`.
    pub fn describe(&self) -> Vec<String> {
        let yes = |b: bool| if b { "yes" } else { "no" };
        vec![
            match self.landlock_abi {
                0 => "Landlock: not available (sandbox policies are refused)".to_string(),
                n => format!(
                    "Landlock: ABI {n} (filesystem yes, TCP rules {}, signal scoping {})",
                    yes(self.tcp_rules),
                    yes(self.signal_scoping)
                ),
            },
            format!("seccomp filters: {}", yes(self.seccomp)),
            format!("user namespaces: {}", yes(self.user_namespaces)),
            match self.memory_cgroup {
                Some(k) => format!("memory cgroup: {} (memory counted and limited by the kernel)", k.as_str()),
                None => "memory cgroup: none we may create (memory counted as PSS plus shared-memory files)".into(),
            },
            format!(
                "policies this host enforces: none{}{}",
                if self.check(Sandbox { policy: Policy::Workspace, network: false }).is_ok() {
                    ", workspace, read-only"
                } else if self.check(Sandbox { policy: Policy::Workspace, network: true }).is_ok() {
                    ", workspace and read-only with sandbox_network only"
                } else {
                    ""
                },
                if self.signal_scoping { "" } else { " (kernel code can signal processes outside its tree: Landlock ABI 6 missing)" }
            ),
        ]
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the ABI, or 0.
fn landlock_abi() -> u8 {
    // SAFETY: with a null attribute pointer and size 0 the call only queries the version.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    u8::try_from(v).unwrap_or(0)
}

/// The test build's simulated ceiling (`KERNEL_MCP_TEST_LANDLOCK_ABI`); `u8::MAX` otherwise.
fn simulated_abi_ceiling() -> u8 {
    #[cfg(feature = "test-kernel")]
    if let Some(n) = std::env::var("KERNEL_MCP_TEST_LANDLOCK_ABI")
        .ok()
        .and_then(|v| v.parse::<u8>().ok())
    {
        return n;
    }
    u8::MAX
}

/// `prctl(PR_GET_SECCOMP)` answers (0, or 2 when already filtered) where seccomp exists.
fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
    let r = unsafe { nix::libc::prctl(nix::libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    r >= 0 && std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").exists()
}

/// `max_user_namespaces > 0`, and Debian's `unprivileged_userns_clone` (where present) on.
fn user_namespaces() -> bool {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    read("/proc/sys/user/max_user_namespaces").is_some_and(|n| n > 0)
        && read("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|n| n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(abi: u8, seccomp: bool) -> HostSupport {
        HostSupport {
            landlock_abi: abi,
            tcp_rules: abi >= ABI_TCP,
            signal_scoping: abi >= ABI_SCOPE,
            seccomp,
            user_namespaces: false,
            memory_cgroup: None,
        }
    }

    const WS: Sandbox = Sandbox {
        policy: Policy::Workspace,
        network: false,
    };

    #[test]
    fn none_needs_nothing_and_workspace_needs_landlock_tcp_rules_and_seccomp() {
        assert!(host(0, false).check(Sandbox::NONE).is_ok());
        assert!(host(7, true).check(WS).is_ok());
        let e = host(0, true).check(WS).unwrap_err();
        assert!(e.to_string().contains("Landlock is not available"), "{e}");
        let e = host(3, true).check(WS).unwrap_err();
        assert!(e.to_string().contains("ABI 4"), "{e}");
        assert!(
            host(3, true)
                .check(Sandbox {
                    network: true,
                    ..WS
                })
                .is_ok(),
            "with network, filesystem rules (ABI 1) suffice"
        );
        let e = host(7, false).check(WS).unwrap_err();
        assert!(e.missing.iter().any(|m| m.contains("seccomp")), "{e}");
        assert!(
            e.to_string().contains("sandbox \"none\""),
            "says the way out: {e}"
        );
    }
}
