//! A person on the agent's kernel: a `jupyter_client` client (from the project's venv)
//! loaded from the session's `connection_file` reads what the agent set, and while it runs a
//! print loop of its own, the agent's runs contain none of that output (runs are correlated
//! by parent msg_id; output of other clients' requests is never ours).

use std::process::Stdio;
use std::time::Duration;

use crate::common::*;
use tokio::io::{AsyncBufReadExt, BufReader};

const PERSON: &str = r#"
import sys, jupyter_client
kc = jupyter_client.BlockingKernelClient(connection_file=sys.argv[1])
kc.load_connection_file()
kc.start_channels()
kc.wait_for_ready(timeout=30)
seen = []
def hook(msg):
    if msg["msg_type"] == "stream":
        seen.append(msg["content"]["text"])
kc.execute_interactive("print(agent_var)", output_hook=hook, timeout=30)
print("READ:" + "".join(seen).strip(), flush=True)
loop = "import time\nfor i in range(100):\n    print('PERSON', i, flush=True)\n    time.sleep(0.1)"
msg_id = kc.execute(loop)
print("LOOPING", flush=True)
while True:
    reply = kc.get_shell_msg(timeout=60)
    if reply["parent_header"].get("msg_id") == msg_id:
        break
print("LOOPDONE", flush=True)
kc.stop_channels()
"#;

#[tokio::test]
async fn a_jupyter_client_on_the_connection_file_shares_the_kernel_but_not_the_runs() {
    let server = Server::start().await;
    let info = server.create_session("seen").await;
    let file = info["connection_file"]
        .as_str()
        .expect("connection_file")
        .to_string();
    let r = server.exec("seen", "agent_var = 'from-agent'").await;
    assert_eq!(status(&r), "ok", "{r}");

    let mut person = tokio::process::Command::new(venv().join("bin").join("python"))
        .args(["-c", PERSON, &file])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the jupyter_client script");
    let mut lines = BufReader::new(person.stdout.take().expect("stdout")).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the person's client hangs")
            .expect("read")
            .unwrap_or_default()
    };
    assert_eq!(next().await, "READ:from-agent");
    assert_eq!(next().await, "LOOPING");
    for i in 0..3 {
        let r = server.exec("seen", &format!("print('agent', {i})")).await;
        assert_eq!(status(&r), "ok", "{r}");
        assert_eq!(
            r["stdout"],
            format!("agent {i}\n"),
            "another client's output leaked: {r}"
        );
        assert!(!r.to_string().contains("PERSON"), "{r}");
        if i == 0 {
            // It waited for the person's loop, whose output streamed meanwhile: as queue
            // time, with a notice naming the other client, not as its own run time.
            assert!(
                r["queued_ms"].as_u64().unwrap_or(0) > 1000,
                "did not overlap: {r}"
            );
            assert!(r["elapsed_ms"].as_u64().unwrap_or(0) < 5000, "{r}");
            assert!(
                r["notices"].to_string().contains("another client's cell"),
                "{r}"
            );
        }
    }
    assert_eq!(next().await, "LOOPDONE");
    let r = server.exec("seen", "print('after')").await;
    assert_eq!(r["stdout"], "after\n", "{r}");
    let _ = person.wait().await;
    server.shutdown().await;
}
