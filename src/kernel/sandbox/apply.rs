//! Entering the sandbox: everything that can fail or allocate is prepared in the supervisor
//! ([`Prepared::containment`], [`Prepared::sandbox`]: the Landlock ruleset with its rules,
//! the compiled seccomp programs); the kernel's child then calls [`Prepared::enter`] between
//! `fork` and `exec`, which only makes system calls, in this order: `no_new_privs`, Landlock
//! (`landlock_restrict_self`), dropping every capability (a root kernel under a sandbox
//! keeps none: no raw sockets, no DAC override), seccomp.
//!
//! Landlock rules: read (`Execute | ReadFile | ReadDir`) beneath [`Plan::read`], every right
//! beneath [`Plan::write`], read/write/ioctl on [`Plan::devices`]; TCP bind on the kernel's
//! five ports and no TCP connect at all, unless the network is allowed (then TCP is not
//! handled); signals and abstract unix sockets scoped to the kernel's own tree where the ABI
//! has scoping. Filesystem rights newer than the host's ABI are dropped by the `landlock`
//! crate's best-effort mode (an ABI 3 host cannot restrict device ioctls); the TCP rules are
//! a hard requirement when the network is off.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::libc;
use seccompiler::BpfProgram;

use super::host::HostSupport;
use super::paths::Plan;
use super::seccomp::{self, FilterError};

/// The filesystem rights this code was written and tested against (ABI 5 adds device ioctls).
const FS_ABI: ABI = ABI::V5;

/// Why a sandbox could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("Landlock refused the ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("cannot open {path} for a Landlock rule: {reason}")]
    Path { path: String, reason: String },
    #[error(transparent)]
    Filter(#[from] FilterError),
}

/// A sandbox ready to be entered by the kernel's child.
pub struct Prepared {
    ruleset: Option<RulesetCreated>,
    filters: Vec<BpfProgram>,
    /// Drop every capability (only under a sandbox policy).
    drop_caps: bool,
    /// Whether the ruleset scopes signals.
    pub signal_scoped: bool,
}

impl Prepared {
    /// Containment for a kernel without a sandbox policy: signals scoped to its own tree
    /// (where the ABI has scoping) and the `prlimit` filter.
    pub fn containment(host: &HostSupport) -> Result<Prepared, ApplyError> {
        let ruleset = if host.signal_scoping {
            Some(
                Ruleset::default()
                    .set_compatibility(CompatLevel::HardRequirement)
                    .scope(Scope::Signal)?
                    .create()?,
            )
        } else {
            None
        };
        let filters = if host.seccomp {
            vec![seccomp::containment()?]
        } else {
            Vec::new()
        };
        Ok(Prepared {
            signal_scoped: ruleset.is_some(),
            ruleset,
            filters,
            drop_caps: false,
        })
    }

    /// The sandbox of `plan`: the kernel binds only `ports` (unless `network`).
    pub fn sandbox(
        host: &HostSupport,
        plan: &Plan,
        ports: &[u16],
        network: bool,
    ) -> Result<Prepared, ApplyError> {
        let all = AccessFs::from_all(FS_ABI);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)?;
        if !network {
            ruleset = ruleset
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessNet::from_all(ABI::V4))?;
        }
        if host.signal_scoping {
            ruleset = ruleset
                .set_compatibility(CompatLevel::HardRequirement)
                .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
        }
        let mut created = ruleset.create()?;
        let read = AccessFs::from_read(FS_ABI);
        let device = AccessFs::from_file(FS_ABI) | AccessFs::ReadDir;
        for p in &plan.read {
            created = add_path(created, p, read)?;
        }
        for p in &plan.write {
            created = add_path(created, p, all)?;
        }
        for p in &plan.devices {
            created = add_path(created, p, device)?;
        }
        if !network {
            for &port in ports {
                created = created.add_rule(NetPort::new(port, AccessNet::BindTcp))?;
            }
        }
        let mut filters = seccomp::sandbox(network)?;
        filters.push(seccomp::enosys());
        Ok(Prepared {
            ruleset: Some(created),
            filters,
            drop_caps: true,
            signal_scoped: host.signal_scoping,
        })
    }

    /// Enter the sandbox: call only between `fork` and `exec` of the kernel (the supervisor
    /// is single-threaded, so the few allocations of error paths are safe there).
    /// Errors: any step the kernel refused; the child must then not exec.
    pub fn enter(&mut self) -> std::io::Result<()> {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(rs) = self.ruleset.take() {
            let status = rs.restrict_self().map_err(std::io::Error::other)?;
            if status.ruleset == RulesetStatus::NotEnforced {
                return Err(std::io::Error::other(
                    "Landlock did not enforce the ruleset",
                ));
            }
        }
        if self.drop_caps {
            drop_capabilities()?;
        }
        for f in &self.filters {
            seccompiler::apply_filter(f).map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

/// A rule for `path` with `access`, narrowed to the rights a file can have when it is not a
/// directory.
fn add_path(
    created: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, ApplyError> {
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(FS_ABI)
    };
    let fd = PathFd::new(path).map_err(|e| ApplyError::Path {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(created.add_rule(PathBeneath::new(fd, access))?)
}

/// Empty the bounding, ambient, inheritable, permitted and effective capability sets, so a
/// root kernel gains nothing at `exec` either.
fn drop_capabilities() -> std::io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last capability is expected.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version-3 header and two data structs, both valid here.
    let r = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
