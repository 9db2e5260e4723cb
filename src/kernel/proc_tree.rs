//! A process tree as Linux's `/proc` shows it: a process's descendants (from the ppid links),
//! its first child, its resident memory, and whether one of a set is blocked reading a
//! terminal. Linux only; elsewhere the answers are empty.

/// True if one of `pids` is blocked in `read(0, …)` on a terminal: code waiting for input that
/// a pexpect-driven kernel will never deliver. (pexpect gives the shell its own session, so
/// callers pass the kernel's descendants, not its process group.) Linux only (/proc).
pub fn any_reads_terminal(pids: &[i32]) -> bool {
    pids.iter().any(|pid| {
        let path = std::path::PathBuf::from(format!("/proc/{pid}"));
        // `/proc/<pid>/syscall`: number then arguments; read(2) is 0 on x86_64, 63 on aarch64.
        let reading_fd0 = std::fs::read_to_string(path.join("syscall"))
            .ok()
            .is_some_and(|s| {
                let mut parts = s.split_whitespace();
                let nr = parts.next();
                let fd = parts.next();
                matches!(nr, Some("0") | Some("63")) && fd == Some("0x0")
            });
        reading_fd0
            && std::fs::read_link(path.join("fd/0"))
                .is_ok_and(|t| t.starts_with("/dev/pts") || t.starts_with("/dev/tty"))
    })
}

/// The resident memory (bytes) of one process, from `/proc/<pid>/statm`; 0 when unknown.
pub fn rss_bytes(pid: i32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) }.max(4096) as u64;
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}

/// The first child of `pid` (the kernel under its supervisor), from
/// `/proc/<pid>/task/<pid>/children`.
pub fn first_child(pid: i32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// All live descendants of `root`, from the ppid links in /proc (Linux; empty elsewhere).
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parent_of = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Format: pid (comm) state ppid ...; comm may contain spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<i32>().ok())
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}
