//! Skips that cannot go unnoticed. A test that cannot run here (a component or a right is
//! missing) calls [`skip`] and returns: the reason goes to stderr, and a line `TEST<TAB>REASON`
//! to `target/test-skips.txt` (or the file `$KERNEL_MCP_TEST_SKIPS` names). After `make test`,
//! `.ci/run` fails when a test in that file is not on `tests/it/skips-allowed.txt`, so a CI
//! host that lacks what a test needs is a failure, not a quiet green.
//!
//! Where a path is meant to be exercised on a host that has it (the memory cgroup), the test
//! asserts it was ([`memory_cgroup_of`]), and skips only where the host has none.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Where skips are recorded.
pub fn skips_file() -> PathBuf {
    std::env::var_os("KERNEL_MCP_TEST_SKIPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-skips.txt"))
}

/// Record that the running test skips (all or part of what it checks) because of `reason`.
/// The test's name is its thread's (libtest names each test's thread after the test).
pub fn skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    let reason = reason.replace(['\n', '\t'], " ");
    eprintln!("SKIPPED {test}: {reason}");
    let line = format!("{test}\t{reason}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skips_file())
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!(
            "cannot record the skip of {test} in {}: {e}",
            skips_file().display()
        );
    }
}

/// The memory cgroup of process `pid` (its path in the v1 `memory` hierarchy or in v2), or
/// `""`.
pub fn memory_cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "memory"))
                || l.starts_with("0::")
        })
        .map(|l| l.rsplit(':').next().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// Whether the server behind `info` (`server_info`'s result) may create memory cgroups here.
pub fn host_has_memory_cgroup(info: &serde_json::Value) -> bool {
    !info["sandbox"]["host"]["memory_cgroup"].is_null()
}
