//! A person on an agent's kernel: a `jupyter_client` client (from the project's venv) loaded
//! from a session's `connection_file`, running cells of its own the way `jupyter console
//! --existing FILE` does. Its requests are other-client requests for the session.

use std::process::Stdio;
use std::time::Duration;

use super::venv;

/// Runs each cell of `argv[2]` (a JSON list), waiting `argv[3]` seconds between them, and
/// prints `DONE` when all have finished.
const PERSON: &str = r#"
import json, sys, time, jupyter_client
kc = jupyter_client.BlockingKernelClient(connection_file=sys.argv[1])
kc.load_connection_file()
kc.start_channels()
kc.wait_for_ready(timeout=60)
for i, cell in enumerate(json.loads(sys.argv[2])):
    if i:
        time.sleep(float(sys.argv[3]))
    kc.execute_interactive(cell, output_hook=lambda msg: None, timeout=120)
kc.stop_channels()
print("DONE", flush=True)
"#;

/// A person's client running `cells` on the kernel of `connection_file`, `pause` apart.
pub struct Person {
    child: tokio::process::Child,
}

impl Person {
    /// Start running the cells (in the background).
    pub fn start(connection_file: &str, cells: &[&str], pause: Duration) -> Person {
        let cells = serde_json::to_string(cells).expect("cells as JSON");
        let child = tokio::process::Command::new(venv().join("bin").join("python"))
            .args(["-c", PERSON, connection_file, &cells])
            .arg(pause.as_secs_f64().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the jupyter_client script");
        Person { child }
    }

    /// Wait (bounded) for every cell to have run; panics if the script fails or hangs.
    pub async fn finish(self) {
        let out = tokio::time::timeout(Duration::from_secs(180), self.child.wait_with_output())
            .await
            .expect("the person's client finishes in time")
            .expect("wait for the person's client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("DONE"),
            "the person's client failed: {:?} {stdout}",
            out.status
        );
    }
}
