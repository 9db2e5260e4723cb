//! Memory of a kernel's process tree where no cgroup counts it (see [`super::cgroup`]): the
//! sum of each process's PSS (`/proc/PID/smaps_rollup`, which shares a page among the
//! processes mapping it, so copy-on-write pages of forked workers count once), plus the
//! shared-memory objects the tree holds open without mapping them (a `memfd`, a file in
//! `/dev/shm`), each counted once at its allocated size. Mapped shared memory is already in
//! PSS. Not counted: a `/dev/shm` file the tree created and closed (nothing ties it to the
//! session any more), and kernel memory (page tables, socket buffers).
//!
//! Linux only; elsewhere (or for processes that vanish while being read) the count is 0.

use std::collections::HashSet;

use super::process::descendants;

/// What the tree of `root` (its descendants, not `root` itself) uses, in bytes.
pub fn tree_bytes(root: i32) -> u64 {
    tree_bytes_except(root, &HashSet::new())
}

/// [`tree_bytes`] without the processes in `excluded` (a subtree released to a supervisor of
/// its own: a fork's).
pub fn tree_bytes_except(root: i32, excluded: &HashSet<i32>) -> u64 {
    let mut pids = descendants(root);
    pids.retain(|p| !excluded.contains(p));
    let mut total = 0u64;
    let mut mapped: HashSet<(u64, u64)> = HashSet::new();
    for &pid in &pids {
        total += pss_bytes(pid);
        mapped.extend(mapped_shm(pid));
    }
    let mut held: HashSet<(u64, u64)> = HashSet::new();
    for &pid in &pids {
        for (id, bytes) in held_shm(pid) {
            if !mapped.contains(&id) && held.insert(id) {
                total += bytes;
            }
        }
    }
    total
}

/// One process's proportional set size (bytes); its RSS where the kernel has no rollup.
pub fn pss_bytes(pid: i32) -> u64 {
    match std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        Ok(s) => s
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024),
        Err(_) => super::process::rss_bytes(pid),
    }
}

/// True for a path that names shared memory: a memfd, POSIX shm, SysV shm.
fn is_shm(path: &str) -> bool {
    path.starts_with("/memfd:") || path.starts_with("/dev/shm/") || path.starts_with("/SYSV")
}

/// `(device, inode)` of the shared-memory objects `pid` maps, from `/proc/PID/maps`.
fn mapped_shm(pid: i32) -> Vec<(u64, u64)> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    maps.lines()
        .filter_map(|l| {
            // "start-end perms offset major:minor inode path"
            let mut f = l.split_whitespace();
            let (_, _, _, dev, inode) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            let path = f.next()?;
            if !is_shm(path) {
                return None;
            }
            let (major, minor) = dev.split_once(':')?;
            let dev = nix::sys::stat::makedev(
                u64::from_str_radix(major, 16).ok()?,
                u64::from_str_radix(minor, 16).ok()?,
            );
            Some((dev, inode.parse().ok()?))
        })
        .collect()
}

/// `((device, inode), allocated bytes)` of the shared-memory objects `pid` holds open.
fn held_shm(pid: i32) -> Vec<((u64, u64), u64)> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            if !is_shm(&target.to_string_lossy()) {
                return None;
            }
            // stat through the magic link reaches the object itself, even unlinked.
            let st = nix::sys::stat::stat(&fd.path()).ok()?;
            Some(((st.st_dev, st.st_ino), st.st_blocks as u64 * 512))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_paths_are_recognised() {
        assert!(is_shm("/memfd:blob (deleted)"));
        assert!(is_shm("/dev/shm/psm_1234"));
        assert!(is_shm("/SYSV00000000"));
        assert!(!is_shm("/usr/lib/libc.so.6"));
        assert!(!is_shm("[heap]"));
    }

    #[test]
    fn a_memfd_held_open_is_counted_at_its_allocated_size() {
        use std::io::Write;
        use std::os::fd::FromRawFd;
        // SAFETY: memfd_create takes a NUL-terminated name and flags; the fd is ours.
        let fd = unsafe { nix::libc::memfd_create(c"usage-test".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        f.write_all(&vec![7u8; 8 << 20]).unwrap();
        let held: u64 = held_shm(std::process::id() as i32)
            .iter()
            .map(|(_, b)| b)
            .sum();
        assert!(held >= 8 << 20, "held: {held}");
    }
}
