//! A process tree as Linux's `/proc` shows it, read through the `procfs` crate: a process's
//! descendants (from the ppid links), its parent and first child, its program, its resident
//! memory, and whether one of a set is blocked reading a terminal. A process that vanishes
//! while being read answers like one that never existed (empty, `None`, 0 or false).

use std::path::PathBuf;

use procfs::process::{FDTarget, Process};

/// `read(2)`'s system call number: 0 on x86_64, 63 on aarch64.
const READ_SYSCALLS: [i64; 2] = [0, 63];

/// True if one of `pids` is blocked in `read(0, …)` on a terminal: code waiting for input that
/// a pexpect-driven kernel will never deliver. (pexpect gives the shell its own session, so
/// callers pass the kernel's descendants, not its process group.) From `/proc/<pid>/syscall`
/// and the target of `/proc/<pid>/fd/0`.
pub fn any_reads_terminal(pids: &[i32]) -> bool {
    pids.iter().any(|&pid| {
        let Ok(p) = Process::new(pid) else {
            return false;
        };
        let reading_fd0 = matches!(
            p.syscall(),
            Ok(procfs::process::Syscall::Blocked { syscall_number, argument_registers, .. })
                if READ_SYSCALLS.contains(&syscall_number) && argument_registers[0] == 0
        );
        reading_fd0
            && p.fd_from_fd(0).is_ok_and(|fd| {
                matches!(&fd.target, FDTarget::Path(t)
                    if t.starts_with("/dev/pts") || t.starts_with("/dev/tty"))
            })
    })
}

/// The resident memory (bytes) of one process, from `/proc/<pid>/statm`; 0 when unknown.
pub fn rss_bytes(pid: i32) -> u64 {
    Process::new(pid)
        .and_then(|p| p.statm())
        .map_or(0, |m| m.resident * procfs::page_size())
}

/// The first child of `pid` (the kernel under its supervisor), from
/// `/proc/<pid>/task/<pid>/children`.
pub fn first_child(pid: i32) -> Option<i32> {
    let children = Process::new(pid)
        .ok()?
        .task_main_thread()
        .ok()?
        .children()
        .ok()?;
    i32::try_from(*children.first()?).ok()
}

/// The parent pid of `pid`, from `/proc/<pid>/stat`.
pub fn parent_pid(pid: i32) -> Option<i32> {
    Some(Process::new(pid).ok()?.stat().ok()?.ppid)
}

/// The program `pid` runs (`/proc/<pid>/exe`).
pub fn program(pid: i32) -> Option<PathBuf> {
    Process::new(pid).ok()?.exe().ok()
}

/// All live descendants of `root`, from the ppid links in /proc.
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let parent_of: Vec<(i32, i32)> = all
        .flatten()
        .filter_map(|p| Some((p.pid, p.stat().ok()?.ppid)))
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_child_is_a_descendant_with_this_process_as_parent() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let me = std::process::id() as i32;
        let pid = child.id() as i32;
        assert!(descendants(me).contains(&pid));
        assert_eq!(parent_pid(pid), Some(me));
        assert!(rss_bytes(pid) > 0);
        assert!(program(pid).is_some_and(|p| p.ends_with("sleep")));
        // sleep waits in a timer, not in read(0) on a terminal.
        assert!(!any_reads_terminal(&[pid]));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_process_that_does_not_exist_answers_empty() {
        let gone = i32::MAX - 1;
        assert!(descendants(gone).is_empty());
        assert_eq!(parent_pid(gone), None);
        assert_eq!(first_child(gone), None);
        assert_eq!(rss_bytes(gone), 0);
        assert_eq!(program(gone), None);
        assert!(!any_reads_terminal(&[gone]));
    }
}
