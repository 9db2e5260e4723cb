//! Processes a test leaves behind, read from /proc: whether a pid is alive (not a zombie),
//! its live descendants, stopping one (SIGTERM, then SIGKILL), and the runtime files that
//! hold a kernel's key or a broker's socket.

use std::time::{Duration, Instant};

/// SIGTERM `pid`, wait up to `grace` for it to go, then SIGKILL it. Blocking (for `Drop`).
pub fn terminate(pid: u32, grace: Duration) {
    use nix::sys::signal::{Signal, kill};
    let target = nix::unistd::Pid::from_raw(pid as i32);
    let _ = kill(target, Signal::SIGTERM);
    let start = Instant::now();
    while pid_alive(pid) && start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    if pid_alive(pid) {
        eprintln!("kernel-mcp (pid {pid}) ignored SIGTERM for {grace:?}; sending SIGKILL");
        let _ = kill(target, Signal::SIGKILL);
    }
}

/// True when `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: comm may contain spaces and parentheses, the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// The entries of the runtime directory `dir` that hold a kernel's key or a session's broker
/// socket (connection, endpoint and limit files, `broker-*` directories).
pub fn kernel_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("kernel-mcp-") || n.starts_with("broker-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Live (non-zombie) descendants of `pid`, from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                continue;
            };
            // Fields after the comm: state, ppid, …
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((child, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        for &(c, pp) in &parent_of {
            if pp == p && !found.contains(&c) {
                found.push(c);
            }
        }
        i += 1;
    }
    found.remove(0);
    found.retain(|&p| pid_alive(p));
    found
}
