//! The seccomp filters a kernel runs under (built with `seccompiler` in the supervisor,
//! installed by the kernel's child just before `exec`).
//!
//! - [`containment`], for every supervised kernel: `prlimit64` on another process is
//!   refused (it could set its supervisor's CPU limit to zero, which Landlock's signal
//!   scoping does not cover).
//! - [`sandbox`], for the `workspace` and `read-only` policies: `EPERM` for what a kernel
//!   never needs and a sandbox must not allow — `ptrace` and `process_vm_*`, mounts (old and
//!   new API), `chroot`/`pivot_root`, namespaces (`unshare`, `setns`, `clone` with any
//!   `CLONE_NEW*`), `bpf`, `perf_event_open`, `keyctl`, kernel modules, `kexec`, `reboot`,
//!   swap, clocks, `io_uring` (its operations would bypass these checks), `userfaultfd`,
//!   `open_by_handle_at`; and `EACCES` for sockets other than TCP/IPv4-6 (so no Unix-domain
//!   sockets: Landlock on this ABI cannot guard the path of one, and `ssh-agent`, D-Bus,
//!   Docker and kernel-mcp's own service listen on them; `socketpair` still works, and the
//!   broker is reached through a connected descriptor the kernel inherits); route
//!   netlink (read-only without capabilities) stays, as ZeroMQ needs it. With
//!   `sandbox_network`, UDP and other IP sockets are allowed too.
//! - [`enosys`]: `clone3` answers `ENOSYS` (its flags are behind a pointer no filter can
//!   read; the C library then falls back to `clone`, whose flags are checked), and so does
//!   any x32 system call on x86_64.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule, sock_filter,
};

/// Why a filter could not be built (a bug, or an architecture seccompiler lacks).
#[derive(Debug, thiserror::Error)]
#[error("building the seccomp filter: {0}")]
pub struct FilterError(String);

fn arch() -> Result<seccompiler::TargetArch, FilterError> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| FilterError(e.to_string()))
}

fn cond(arg: u8, op: Op, value: u64) -> Result<SeccompCondition, FilterError> {
    SeccompCondition::new(arg, Len::Dword, op, value).map_err(|e| FilterError(e.to_string()))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, FilterError> {
    SeccompRule::new(conds).map_err(|e| FilterError(e.to_string()))
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, FilterError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch()?,
    )
    .map_err(|e| FilterError(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| FilterError(e.to_string()))
}

/// `prlimit64(pid ≠ 0, …)` → `EPERM`.
pub fn containment() -> Result<BpfProgram, FilterError> {
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_prlimit64, vec![rule(vec![cond(0, Op::Ne, 0)?])?]);
    compile(rules, libc::EPERM)
}

/// The syscalls a sandboxed kernel is refused outright.
fn denied() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_process_madvise,
        libc::SYS_pidfd_getfd,
        libc::SYS_kcmp,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_mount_setattr,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_syslog,
        libc::SYS_vhangup,
        libc::SYS_fanotify_init,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_userfaultfd,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_uselib]);
    v
}

/// The namespace flags `clone` may not carry.
const CLONE_NEW: [i32; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// The `EPERM` filter and the socket filter of the sandbox policies.
pub fn sandbox(network: bool) -> Result<Vec<BpfProgram>, FilterError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied().into_iter().map(|nr| (nr, Vec::new())).collect();
    rules.insert(
        libc::SYS_clone,
        CLONE_NEW
            .iter()
            .map(|&f| rule(vec![cond(0, Op::MaskedEq(f as u64), f as u64)?]))
            .collect::<Result<_, _>>()?,
    );
    rules.insert(libc::SYS_prlimit64, vec![rule(vec![cond(0, Op::Ne, 0)?])?]);
    let eperm = compile(rules, libc::EPERM)?;

    // socket(domain, type, protocol): a rule that matches is refused. Route netlink stays:
    // ZeroMQ lists the interfaces (getifaddrs) before it binds, and aborts without them.
    let netlink = libc::AF_NETLINK as u64;
    let mut socket = vec![
        rule(vec![
            cond(0, Op::Ne, libc::AF_INET as u64)?,
            cond(0, Op::Ne, libc::AF_INET6 as u64)?,
            cond(0, Op::Ne, netlink)?,
        ])?,
        rule(vec![
            cond(0, Op::Eq, netlink)?,
            cond(2, Op::Ne, libc::NETLINK_ROUTE as u64)?,
        ])?,
    ];
    if !network {
        // IPv4/6: only stream sockets of TCP, which Landlock's TCP rules then decide.
        for t in 2..=10u64 {
            socket.push(rule(vec![
                cond(0, Op::Ne, netlink)?,
                cond(1, Op::MaskedEq(0xf), t)?,
            ])?);
        }
        socket.push(rule(vec![
            cond(0, Op::Ne, netlink)?,
            cond(2, Op::Ne, 0)?,
            cond(2, Op::Ne, libc::IPPROTO_TCP as u64)?,
        ])?);
    }
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_socket, socket);
    let eacces = compile(rules, libc::EACCES)?;
    Ok(vec![eperm, eacces])
}

/// The hand-written `ENOSYS` filter for `clone3` (and x32 calls on x86_64).
pub fn enosys() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    const AUDIT_ARCH: u32 = 0;
    let s = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let j = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    let enosys = RET_ERRNO | libc::ENOSYS as u32;
    vec![
        s(LD_W_ABS, 4),             // seccomp_data.arch
        j(JEQ_K, AUDIT_ARCH, 1, 0), // ours: go on; else allow
        s(RET_K, RET_ALLOW),
        s(LD_W_ABS, 0),              // seccomp_data.nr
        j(JGE_K, 0x4000_0000, 2, 0), // x32 (the bit is never set on aarch64)
        j(JEQ_K, libc::SYS_clone3 as u32, 1, 0),
        s(RET_K, RET_ALLOW),
        s(RET_K, enosys),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_architecture() {
        assert!(!containment().unwrap().is_empty());
        assert_eq!(sandbox(false).unwrap().len(), 2);
        assert_eq!(sandbox(true).unwrap().len(), 2);
        assert_eq!(enosys().len(), 8);
    }

    /// Run `f` in a forked child under `filters`; its exit code is what `f` returned.
    fn in_child(filters: Vec<BpfProgram>, f: fn() -> i32) -> i32 {
        // SAFETY: the child only makes syscalls and exits; the test process has other
        // threads, so nothing in the child may take a lock (no allocation after fork).
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                // SAFETY: plain prctl.
                unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
                for f in &filters {
                    if seccompiler::apply_filter(f).is_err() {
                        unsafe { libc::_exit(99) };
                    }
                }
                unsafe { libc::_exit(f()) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                match nix::sys::wait::waitpid(child, None).unwrap() {
                    nix::sys::wait::WaitStatus::Exited(_, code) => code,
                    other => panic!("child ended {other:?}"),
                }
            }
        }
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn unix_and_udp_sockets_are_refused_and_tcp_is_not() {
        let mut filters = sandbox(false).unwrap();
        filters.push(enosys());
        let code = in_child(filters, || {
            // SAFETY: socket(2) and close(2) with constant arguments.
            unsafe {
                let tcp = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                if tcp < 0 {
                    return 1;
                }
                libc::close(tcp);
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) >= 0 || errno() != libc::EACCES
                {
                    return 2;
                }
                if libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) >= 0 {
                    return 3;
                }
                let mut pair = [0i32; 2];
                if libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) != 0 {
                    return 4;
                }
                if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) == 0
                    || errno() != libc::EPERM
                {
                    return 5;
                }
                if libc::syscall(libc::SYS_clone3, 0usize, 0usize) >= 0 || errno() != libc::ENOSYS {
                    return 6;
                }
                0
            }
        });
        assert_eq!(code, 0, "see the numbered checks");
    }

    #[test]
    fn with_network_udp_is_allowed_but_unix_sockets_still_are_not() {
        let code = in_child(sandbox(true).unwrap(), || {
            // SAFETY: socket(2) with constant arguments.
            unsafe {
                if libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) < 0 {
                    return 1;
                }
                if libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0) >= 0 {
                    return 2;
                }
                0
            }
        });
        assert_eq!(code, 0);
    }
}
