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
use std::path::Path;

use procfs::process::{FDTarget, MMapPath, Process};

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
    let rollup = Process::new(pid).and_then(|p| p.smaps_rollup());
    match rollup {
        // procfs gives the rollup's figures in bytes.
        Ok(r) => r
            .memory_map_rollup
            .iter()
            .find_map(|m| m.extension.map.get("Pss").copied())
            .unwrap_or(0),
        Err(_) => super::process::rss_bytes(pid),
    }
}

/// True for a path that names shared memory: a memfd, POSIX shm, SysV shm.
fn is_shm(path: &Path) -> bool {
    let p = path.as_os_str().as_encoded_bytes();
    p.starts_with(b"/memfd:") || p.starts_with(b"/dev/shm/") || p.starts_with(b"/SYSV")
}

/// `(device, inode)` of the shared-memory objects `pid` maps, from `/proc/PID/maps`.
fn mapped_shm(pid: i32) -> Vec<(u64, u64)> {
    let Ok(maps) = Process::new(pid).and_then(|p| p.maps()) else {
        return Vec::new();
    };
    maps.iter()
        .filter(|m| match &m.pathname {
            MMapPath::Path(p) => is_shm(p),
            MMapPath::Vsys(_) => true,
            _ => false,
        })
        .map(|m| {
            let (major, minor) = m.dev;
            let dev = nix::sys::stat::makedev(major as u64, minor as u64);
            (dev, m.inode)
        })
        .collect()
}

/// `((device, inode), allocated bytes)` of the shared-memory objects `pid` holds open.
fn held_shm(pid: i32) -> Vec<((u64, u64), u64)> {
    let Ok(fds) = Process::new(pid).and_then(|p| p.fd()) else {
        return Vec::new();
    };
    fds.flatten()
        .filter(|fd| match &fd.target {
            FDTarget::MemFD(_) => true,
            FDTarget::Path(t) => is_shm(t),
            _ => false,
        })
        .filter_map(|fd| {
            // stat through the magic link reaches the object itself, even unlinked.
            let link = format!("/proc/{pid}/fd/{}", fd.fd);
            let st = nix::sys::stat::stat(link.as_str()).ok()?;
            Some(((st.st_dev, st.st_ino), st.st_blocks as u64 * 512))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_paths_are_recognised() {
        let shm = |p: &str| is_shm(Path::new(p));
        assert!(shm("/memfd:blob (deleted)"));
        assert!(shm("/dev/shm/psm_1234"));
        assert!(shm("/SYSV00000000"));
        assert!(!shm("/usr/lib/libc.so.6"));
        assert!(!shm("[heap]"));
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

    #[test]
    fn a_mapped_memfd_is_found_by_the_device_and_inode_fstat_gives() {
        use std::os::fd::AsRawFd;
        // SAFETY: as above; the mapping is unmapped before the test ends.
        let fd = unsafe { nix::libc::memfd_create(c"usage-map-test".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(1 << 20).unwrap();
        let len = 1 << 20;
        // SAFETY: a new shared mapping of a file we own, of its whole length.
        let addr = unsafe {
            nix::libc::mmap(
                std::ptr::null_mut(),
                len,
                nix::libc::PROT_READ,
                nix::libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, nix::libc::MAP_FAILED);
        let st = nix::sys::stat::fstat(&f).unwrap();
        let mapped = mapped_shm(std::process::id() as i32);
        // SAFETY: the mapping made above, unmapped once.
        unsafe { nix::libc::munmap(addr, len) };
        assert!(
            mapped.contains(&(st.st_dev, st.st_ino)),
            "{mapped:?} lacks {:?}",
            (st.st_dev, st.st_ino)
        );
    }
}
