//! Real-time collaboration test rig: a Jupyter Server with `jupyter-collaboration` from
//! `./.venv-collab` (made by `make gateways`) on a free 127.0.0.1 port with a fresh token,
//! its root, Jupyter dirs, file-id and Y-update databases in a temp dir; and a person in a
//! notebook's room, `tests/collab_person.py` (a pycrdt client) driven over stdin/stdout.
//! Dropping either stops it (the server's whole process group).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::gateways::free_port;

/// `<crate>/.venv-collab`.
pub fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-collab")
}

/// A Jupyter Server running jupyter-collaboration.
pub struct CollabServer {
    pub url: String,
    pub port: u16,
    pub token: String,
    /// The server's root: notebooks go here.
    pub root: PathBuf,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl CollabServer {
    /// Start it with `notebooks` (name, JSON) in its root; waits (up to 90 s) for `GET /api`.
    pub async fn start(notebooks: &[(&str, Value)]) -> CollabServer {
        let venv = venv();
        assert!(
            venv.join("bin/jupyter-server").exists(),
            "{} is missing: run `make gateways` (or `make test`)",
            venv.display()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        for (name, nb) in notebooks {
            std::fs::write(root.join(name), serde_json::to_string_pretty(nb).unwrap()).unwrap();
        }
        let port = free_port();
        let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
        let log = dir.path().join("server.log");
        let logfile = std::fs::File::create(&log).unwrap();
        let d = dir.path();
        let child = std::process::Command::new(venv.join("bin/jupyter-server"))
            .args([
                "--ip=127.0.0.1".to_string(),
                format!("--port={port}"),
                "--ServerApp.port_retries=0".into(),
                format!("--IdentityProvider.token={token}"),
                "--ServerApp.open_browser=False".into(),
                "--ServerApp.allow_root=True".into(),
                format!("--ServerApp.root_dir={}", root.display()),
                format!(
                    "--BaseFileIdManager.db_path={}",
                    d.join("fileid.db").display()
                ),
                format!("--SQLiteYStore.db_path={}", d.join("ystore.db").display()),
                format!(
                    "--YDocExtension.session_store_path={}",
                    d.join("sessions.json").display()
                ),
                "--YDocExtension.document_save_delay=0.5".into(),
            ])
            .current_dir(d)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", venv.join("bin").display()),
            )
            .env("VIRTUAL_ENV", &venv)
            .env("JUPYTER_CONFIG_DIR", d.join("config"))
            .env("JUPYTER_DATA_DIR", d.join("data"))
            .env("JUPYTER_RUNTIME_DIR", d.join("runtime"))
            .env("JUPYTER_PLATFORM_DIRS", "1")
            .env("HOME", d)
            .env_remove("JUPYTER_PATH")
            .env_remove("PYTHONPATH")
            .stdin(Stdio::null())
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .process_group(0)
            .spawn()
            .expect("start jupyter-server");
        let mut s = CollabServer {
            url: format!("http://127.0.0.1:{port}"),
            port,
            token,
            root,
            child,
            log,
            _dir: dir,
        };
        s.wait_ready().await;
        s
    }

    async fn wait_ready(&mut self) {
        kernel_mcp::tls::install_provider();
        let http = reqwest::Client::new();
        let t0 = Instant::now();
        loop {
            let r = http
                .get(format!("{}/api", self.url))
                .header("Authorization", format!("token {}", self.token))
                .timeout(Duration::from_secs(5))
                .send()
                .await;
            if r.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("jupyter-server exited ({st}):\n{}", self.log_text());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "jupyter-server did not answer within 90 s:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The server as kernel-mcp configures it (`--gateway lab=URL` with its token).
    pub fn gateway(&self) -> kernel_mcp::kernel::remote::Gateway {
        self.gateway_via(self.port)
    }

    /// The same server reached through `port` (a proxy in front of it).
    pub fn gateway_via(&self, port: u16) -> kernel_mcp::kernel::remote::Gateway {
        kernel_mcp::kernel::remote::Gateway {
            name: "lab".into(),
            url: format!("http://127.0.0.1:{port}/"),
            token: Some(kernel_mcp::kernel::remote::Token::new(&self.token)),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `nbformat.validate` on a file of the root, in the server's venv: `Ok(notebook)` or
    /// the validator's complaint.
    pub fn validated(&self, name: &str) -> Result<Value, String> {
        let script = "import json, sys, nbformat\n\
                      nb = nbformat.read(sys.argv[1], as_version=4)\n\
                      nbformat.validate(nb)\n\
                      print(json.dumps(nb))";
        let out = std::process::Command::new(venv().join("bin/python"))
            .args(["-c", script])
            .arg(self.root.join(name))
            .output()
            .expect("run python");
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
    }
}

impl Drop for CollabServer {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A notebook of code cells `(id, source)`, nbformat 4.5.
pub fn notebook(cells: &[(&str, &str)]) -> Value {
    let cells: Vec<Value> = cells
        .iter()
        .map(|(id, src)| {
            json!({"cell_type": "code", "id": id, "metadata": {}, "source": src,
                   "outputs": [], "execution_count": null})
        })
        .collect();
    json!({
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })
}

/// A person in a notebook's room (tests/collab_person.py).
pub struct Person {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Person {
    /// Join `path`'s room on `server` as `name`; returns once the person's copy is synced.
    pub async fn join(server: &CollabServer, path: &str, name: &str) -> Person {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/collab_person.py");
        let mut child = tokio::process::Command::new(venv().join("bin/python"))
            .arg(script)
            .args([&server.url, &server.token, path, name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the person");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut p = Person {
            child,
            stdin,
            lines,
        };
        let ready = p.line().await;
        assert_eq!(ready["ready"], true, "{ready}");
        p
    }

    async fn line(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("the person answers within 60 s")
            .expect("read the person's stdout")
            .expect("the person is still there");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Send one command; its answer.
    pub async fn ask(&mut self, cmd: Value) -> Value {
        let mut line = cmd.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        self.line().await
    }

    /// The person's cells (maps as JSON).
    pub async fn cells(&mut self) -> Vec<Value> {
        let v = self.ask(json!({"cmd": "cells"})).await;
        v["cells"].as_array().cloned().unwrap_or_default()
    }

    /// Poll the person's cells until `pred` holds (up to 30 s); returns them.
    pub async fn wait_cells(&mut self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let t0 = Instant::now();
        loop {
            let cells = self.cells().await;
            if pred(&cells) {
                return cells;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the person never saw {what}; they have {cells:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Leave the room and exit.
    pub async fn quit(mut self) {
        let _ = self.stdin.write_all(b"{\"cmd\": \"quit\"}\n").await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

/// The cell of `cells` with `id`.
pub fn cell<'a>(cells: &'a [Value], id: &str) -> Option<&'a Value> {
    cells.iter().find(|c| c["id"] == id)
}
