//! The Python helper `kernel_mcp` as files of its own (`src/broker/kernel_mcp.py` and its
//! artifact half `_kernel_mcp_artifacts.py`): they pass pyflakes, import in an isolated
//! interpreter (`python -I`: the standard library alone), and their unit tests
//! (`tests/broker/test_kernel_mcp*.py`, against a fake broker socket) pass.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    crate::common::require_venv();
    crate::common::venv().join("bin/python")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn the_helper_passes_pyflakes() {
    let probe = Command::new(python())
        .args(["-c", "import pyflakes"])
        .status()
        .unwrap();
    assert!(
        probe.success(),
        "pyflakes is missing from .venv: run `make .venv` (requirements-dev.txt)"
    );
    let out = run(Command::new(python())
        .args([
            "-m",
            "pyflakes",
            "src/broker/kernel_mcp.py",
            "src/broker/_kernel_mcp_artifacts.py",
            "tests/broker/test_kernel_mcp.py",
            "tests/broker/test_kernel_mcp_artifacts.py",
        ])
        .current_dir(root()));
    assert!(out.trim().is_empty(), "{out}");
}

#[test]
fn the_helper_imports_with_the_standard_library_alone() {
    // -I: isolated (no site-packages, no PYTHONPATH from outside, no user site).
    let out = run(Command::new(python())
        .args([
            "-I",
            "-c",
            "import sys; sys.path.insert(0, 'src/broker'); import kernel_mcp; print(kernel_mcp.mcp, kernel_mcp.artifact)",
        ])
        .current_dir(root()));
    assert!(
        out.contains("kernel_mcp.mcp") && out.contains("kernel_mcp.artifact"),
        "{out}"
    );
}

#[test]
fn the_helpers_unit_tests_pass() {
    let out = run(Command::new(python())
        .args([
            "-m",
            "unittest",
            "-v",
            "test_kernel_mcp",
            "test_kernel_mcp_artifacts",
        ])
        .env("PYTHONPATH", root().join("src/broker"))
        .env_remove("KERNEL_MCP_ENDPOINT")
        .env_remove("KERNEL_MCP_BROKER_OFF")
        .current_dir(root().join("tests/broker")));
    assert!(out.contains("OK"), "{out}");
}
