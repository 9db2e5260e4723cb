//! One memory cgroup per supervised kernel, where this process may create one: under its own
//! cgroup in the v2 hierarchy when that delegates the memory controller, else under its own
//! cgroup of a v1 `memory` hierarchy. The kernel's whole tree is in it from its first
//! instruction (the child joins before `exec`), so the kernel counts every page as the kernel
//! charges it — copy-on-write pages of forked workers once, memfd and tmpfs pages too — and
//! enforces the limit itself (`memory.max` / `memory.limit_in_bytes`, swap included).
//!
//! The supervisor owns the group: it creates it, ends every process in it when the kernel is
//! gone, and removes it. The server removes what a killed supervisor left (`KernelProcess`),
//! and a new supervisor sweeps groups whose supervisor is dead ([`sweep_stale`]).
//!
//! With the `test-kernel` feature, `KERNEL_MCP_TEST_NO_CGROUP=1` hides the controller, so the
//! tests can drive the PSS fallback ([`super::usage`]) on a host that has one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The prefix of the groups we create: `kernel-mcp-<supervisor pid>`.
const PREFIX: &str = "kernel-mcp-";

/// Which cgroup hierarchy a group lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CgroupKind {
    V1,
    V2,
}

impl CgroupKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupKind::V1 => "v1",
            CgroupKind::V2 => "v2",
        }
    }
}

/// The kind of group this process could create, if any.
pub fn available() -> Option<CgroupKind> {
    base().map(|(k, _)| k)
}

/// Where our groups go: our own cgroup's directory, in the first hierarchy that works.
fn base() -> Option<(CgroupKind, PathBuf)> {
    base_where(false)
}

/// [`base`]; `beside_own`: when our own group is a kernel's (`kernel-mcp-<pid>`, as for the
/// supervisor of a fork, which starts in its source kernel's group), the directory holding it.
fn base_where(beside_own: bool) -> Option<(CgroupKind, PathBuf)> {
    #[cfg(feature = "test-kernel")]
    if std::env::var_os("KERNEL_MCP_TEST_NO_CGROUP").is_some_and(|v| v == "1") {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own_path = |cg: &str, controller| {
        let rel = own_path(cg, controller)?;
        Some(if beside_own {
            outside_kernel_group(&rel)
        } else {
            rel
        })
    };
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    // v2: "0::/path", a cgroup2 mount, and `memory` delegated to our children.
    if let (Some(rel), Some(mount)) = (own_path(&own, None), mount_of(&mounts, "cgroup2", None)) {
        let dir = join(&mount, &rel);
        let delegated = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "memory"));
        if delegated && writable(&dir) {
            return Some((CgroupKind::V2, dir));
        }
    }
    // v1: "N:memory:/path" and a cgroup mount with the memory option.
    if let (Some(rel), Some(mount)) = (
        own_path(&own, Some("memory")),
        mount_of(&mounts, "cgroup", Some("memory")),
    ) {
        let dir = join(&mount, &rel);
        if dir.join("memory.limit_in_bytes").exists() && writable(&dir) {
            return Some((CgroupKind::V1, dir));
        }
    }
    None
}

/// `rel` without a last component that is one of our kernels' groups.
fn outside_kernel_group(rel: &str) -> String {
    match rel.rsplit_once('/') {
        Some((parent, last)) if last.starts_with(PREFIX) => {
            if parent.is_empty() {
                "/".into()
            } else {
                parent.into()
            }
        }
        _ => rel.to_string(),
    }
}

/// Our path in the hierarchy holding `controller` (`None`: the v2 line `0::`).
fn own_path(proc_cgroup: &str, controller: Option<&str>) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match controller {
            None => id == "0" && ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c),
        };
        hit.then(|| path.to_string())
    })
}

/// The mount point of a `fstype` filesystem (with `option` among its super options).
fn mount_of(mountinfo: &str, fstype: &str, option: Option<&str>) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        // "id parent maj:min root mountpoint opts [optional…] - fstype source superopts"
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fs, _source, superopts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
        let root = left.split_whitespace().nth(3)?;
        let point = left.split_whitespace().nth(4)?;
        let opt_ok = option.is_none_or(|o| superopts.split(',').any(|x| x == o));
        (fs == fstype && opt_ok && root == "/").then(|| PathBuf::from(point))
    })
}

fn join(mount: &Path, rel: &str) -> PathBuf {
    mount.join(rel.trim_start_matches('/'))
}

/// A memory cgroup holding one kernel's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroup {
    pub kind: CgroupKind,
    pub path: PathBuf,
}

impl Cgroup {
    /// Create `kernel-mcp-<our pid>` under our own cgroup, limited to `limit_bytes` (memory and
    /// swap together) when given. Errors: no hierarchy we may write, or the kernel refused.
    pub fn create(limit_bytes: Option<u64>) -> std::io::Result<Cgroup> {
        Cgroup::create_in(base(), limit_bytes)
    }

    /// As [`Cgroup::create`], for the supervisor of a fork (see `supervise::adopt`), which
    /// starts inside its source kernel's group: the new group goes beside that one, and this
    /// process moves to their parent first (where every supervisor sits), so the source's
    /// end, which empties its group, never reaches the fork. Errors: as for `create`, or the
    /// move was refused.
    pub fn create_beside_own(limit_bytes: Option<u64>) -> std::io::Result<Cgroup> {
        let base = base_where(true);
        if let Some((_, dir)) = &base {
            write(&dir.join("cgroup.procs"), "0")?;
        }
        Cgroup::create_in(base, limit_bytes)
    }

    fn create_in(
        base: Option<(CgroupKind, PathBuf)>,
        limit_bytes: Option<u64>,
    ) -> std::io::Result<Cgroup> {
        let (kind, base) = base.ok_or_else(|| {
            std::io::Error::other("no memory cgroup hierarchy this process may write")
        })?;
        sweep_stale(&base);
        let path = base.join(format!("{PREFIX}{}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let group = Cgroup { kind, path };
        if let Some(limit) = limit_bytes
            && let Err(e) = group.set_limit(limit)
        {
            group.remove();
            return Err(e);
        }
        Ok(group)
    }

    fn set_limit(&self, limit: u64) -> std::io::Result<()> {
        match self.kind {
            CgroupKind::V1 => {
                write(&self.path.join("memory.limit_in_bytes"), &limit.to_string())?;
                // Without swap accounting the file is absent; with it, swap counts too.
                let _ = write(
                    &self.path.join("memory.memsw.limit_in_bytes"),
                    &limit.to_string(),
                );
            }
            CgroupKind::V2 => {
                write(&self.path.join("memory.max"), &limit.to_string())?;
                let _ = write(&self.path.join("memory.swap.max"), "0");
                // An OOM kill takes the whole group, not one worker.
                let _ = write(&self.path.join("memory.oom.group"), "1");
            }
        }
        Ok(())
    }

    /// Replace the group's limit while it runs (`None`: no limit): a warm pool's kernel takes
    /// its session's limit so. Errors: the kernel refused the value.
    pub fn change_limit(&self, limit: Option<u64>) -> std::io::Result<()> {
        match self.kind {
            CgroupKind::V2 => match limit {
                Some(limit) => self.set_limit(limit),
                None => write(&self.path.join("memory.max"), "max"),
            },
            CgroupKind::V1 => {
                let value = limit.map_or("-1".to_string(), |l| l.to_string());
                // memsw must stay >= the memory limit: raising, it goes first; lowering, it
                // fails first and succeeds after.
                let memsw = self.path.join("memory.memsw.limit_in_bytes");
                let _ = write(&memsw, &value);
                write(&self.path.join("memory.limit_in_bytes"), &value)?;
                let _ = write(&memsw, &value);
                Ok(())
            }
        }
    }

    /// `cgroup.procs`, which a process joins by writing its pid (or `0`: itself).
    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// Memory in use by the group (bytes): the kernel's count minus reclaimable inactive
    /// page cache (what `docker stats` and the kubelet call the working set).
    pub fn usage_bytes(&self) -> Option<u64> {
        let (usage, inactive) = match self.kind {
            CgroupKind::V1 => (
                read_u64(&self.path.join("memory.usage_in_bytes"))?,
                stat_field(&self.path, "total_inactive_file"),
            ),
            CgroupKind::V2 => (
                read_u64(&self.path.join("memory.current"))?,
                stat_field(&self.path, "inactive_file"),
            ),
        };
        Some(usage.saturating_sub(inactive.unwrap_or(0)))
    }

    /// The highest usage the kernel recorded (bytes), where it records one.
    pub fn peak_bytes(&self) -> Option<u64> {
        read_u64(&self.path.join(match self.kind {
            CgroupKind::V1 => "memory.max_usage_in_bytes",
            CgroupKind::V2 => "memory.peak",
        }))
    }

    /// Processes the kernel's OOM killer ended in this group for going over its limit.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.kind {
            CgroupKind::V1 => "memory.oom_control",
            CgroupKind::V2 => "memory.events",
        };
        std::fs::read_to_string(self.path.join(file))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// Move process `pid` (with its threads) into the group.
    pub fn join(&self, pid: i32) -> std::io::Result<()> {
        write(&self.procs_file(), &pid.to_string())
    }

    /// The processes in the group.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// SIGKILL every process in the group until it is empty (bounded: about 2 s).
    pub fn kill_all(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        if self.kind == CgroupKind::V2 {
            let _ = write(&self.path.join("cgroup.kill"), "1");
        }
        loop {
            let pids = self.pids();
            if pids.is_empty() || Instant::now() > deadline {
                return;
            }
            for pid in pids {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Remove the group once it is empty (a dying process leaves it a moment after its
    /// SIGKILL). True when it is gone.
    pub fn remove(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match std::fs::remove_dir(&self.path) {
                Ok(()) => return true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => {
                    tracing::debug!(path = %self.path.display(), "cgroup not removed: {e}");
                    return false;
                }
            }
        }
    }
}

/// Remove groups under `base` whose supervisor is gone, ending what is left in them (a
/// supervisor and its server both killed: nothing else would).
pub fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let kind = if e.path().join("memory.limit_in_bytes").exists() {
            CgroupKind::V1
        } else {
            CgroupKind::V2
        };
        let group = Cgroup {
            kind,
            path: e.path(),
        };
        group.kill_all();
        group.remove();
    }
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn stat_field(dir: &Path, key: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join("memory.stat"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_paths_and_mounts_are_read_from_proc() {
        let cg = "9:name=systemd:/\n4:memory:/jobs/abc\n0::/user.slice\n";
        assert_eq!(own_path(cg, Some("memory")).as_deref(), Some("/jobs/abc"));
        assert_eq!(own_path(cg, None).as_deref(), Some("/user.slice"));
        let mi = "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
                  31 25 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            mount_of(mi, "cgroup", Some("memory")),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            mount_of(mi, "cgroup2", None),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(mount_of(mi, "cgroup", Some("pids")), None);
    }

    #[test]
    fn a_forks_supervisor_creates_its_group_beside_its_sources() {
        assert_eq!(outside_kernel_group("/jobs/abc/kernel-mcp-42"), "/jobs/abc");
        assert_eq!(outside_kernel_group("/kernel-mcp-42"), "/");
        assert_eq!(outside_kernel_group("/jobs/abc"), "/jobs/abc");
        assert_eq!(outside_kernel_group("/"), "/");
    }
}
