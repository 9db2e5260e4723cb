//! Kernelspecs for the fault-injecting fake kernel (`src/bin/fake-kernel.rs`), written into a
//! temp dir that the server gets with `--kernelspec-dir` — never into the project's
//! `kernelspecs/`, which real users search as a last resort.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::*;

/// The fake kernel's executable. It is built only with the `test-kernel` feature (so that
/// `cargo install` leaves it out); test crates compile without it and panic here, when a test
/// needs it. The feature is checked too: Cargo sets `CARGO_BIN_EXE_fake-kernel` even when it
/// skips the binary, and the path may then be missing or left over from an older build.
pub fn fake_kernel_exe() -> &'static str {
    match option_env!("CARGO_BIN_EXE_fake-kernel") {
        Some(exe) if cfg!(feature = "test-kernel") => exe,
        _ => panic!(
            "fake-kernel is not built: build with --features test-kernel; make test does \
             (cargo test --all-targets --features test-kernel)"
        ),
    }
}

/// A temp dir of `<name>/kernel.json` specs that run `fake-kernel -f {connection_file}`.
/// Keep it alive as long as the server that uses it.
pub struct FakeSpecs {
    dir: tempfile::TempDir,
}

impl FakeSpecs {
    pub fn new() -> FakeSpecs {
        FakeSpecs {
            dir: tempfile::tempdir().expect("temp dir for fake kernelspecs"),
        }
    }

    /// Add spec `name` (interrupt_mode `signal`) whose kernel gets `env`.
    pub fn add(self, name: &str, env: &[(&str, &str)]) -> FakeSpecs {
        self.add_with_mode(name, env, "signal")
    }

    /// Add spec `name` with the given `interrupt_mode` ("signal" or "message").
    pub fn add_with_mode(
        self,
        name: &str,
        env: &[(&str, &str)],
        interrupt_mode: &str,
    ) -> FakeSpecs {
        let env: Map<String, Value> = env.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let spec = json!({
            "argv": [fake_kernel_exe(), "-f", "{connection_file}"],
            "display_name": format!("Fake ({name})"),
            "language": "fake",
            "interrupt_mode": interrupt_mode,
            "env": env,
        });
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).expect("create kernelspec dir");
        std::fs::write(dir.join("kernel.json"), spec.to_string()).expect("write kernel.json");
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Start a server that finds these specs first.
    pub async fn start_server(&self) -> Server {
        let dir = self.path().to_str().expect("utf-8 temp path").to_string();
        Server::start_with_args(&["--kernelspec-dir", &dir]).await
    }
}

impl Default for FakeSpecs {
    fn default() -> Self {
        FakeSpecs::new()
    }
}

/// `create_session(session_id, kernel)` on a fake spec; panics on error.
pub async fn create_fake_session(server: &Server, session: &str, kernel: &str) -> Value {
    server.create_session_on(session, kernel).await
}

/// Live `fake-kernel` processes among the server's descendants.
pub fn fake_kernels_of(server_pid: u32) -> Vec<u32> {
    descendants(server_pid)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "fake-kernel")
        })
        .collect()
}
