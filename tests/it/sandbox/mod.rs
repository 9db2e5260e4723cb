//! The OS sandbox (docs/sandbox.md) against real kernels: a `workspace` session
//! reads its cwd and libraries, plots and writes its cwd; it cannot read a file planted in
//! `$HOME`, write outside its cwd and tmp, or reach a listener on 127.0.0.1 (which sees no
//! connection) unless `sandbox_network` allows it; `read-only` cannot write its cwd; a host
//! without Landlock refuses with `SANDBOX_UNAVAILABLE`; `install_packages` says it cannot
//! write the environment; each calls the reference MCP server through the broker.
//!
//! The doors around the sandbox, tried as an attacker would (docs/sandbox.md, "Attacker's
//! checklist"), are the submodules: `grants` (1), `shared_files` (2), `server_writes` (3),
//! `floors` (4), `broker` (5).

mod broker;
mod floors;
mod grants;
mod server_writes;
mod shared_files;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{Value, json};

/// A file in `$HOME`, outside every session's cwd, removed on drop.
pub struct Planted(pub PathBuf);

impl Planted {
    pub fn new() -> Planted {
        let home = std::env::var_os("HOME").expect("HOME");
        let p = Path::new(&home).join(format!(
            ".kernel-mcp-sandbox-secret-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::write(&p, "top secret\n").expect("plant a file in $HOME");
        Planted(p)
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A project directory with a data file and a broker registry (the reference MCP server),
/// outside `$HOME`.
fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("project dir");
    std::fs::write(d.path().join("data.csv"), "x,y\n1,2\n3,4\n").unwrap();
    crate::common::broker::write_registry(
        d.path(),
        json!({"everything": crate::common::broker::everything_entry(json!({}))}),
    );
    d
}

/// The session's kernel calls the reference MCP server through the broker (door 5 of the
/// attacker's checklist: the broker works inside the sandbox it ships with).
async fn broker_works(server: &Server, session: &str) {
    let out = crate::common::broker::stdout_of(
        server,
        session,
        "from kernel_mcp import mcp\nprint(mcp.text(mcp.call('everything', 'echo', message='in the box')))",
    )
    .await;
    assert_eq!(out.trim(), "Echo: in the box", "{session}");
}

async fn create(server: &Server, args: Value) -> Value {
    let r = server.call("create_session", args.clone()).await;
    assert!(
        !is_error(&r),
        "create_session({args}): {}\n{}",
        text(&r),
        server.stderr_tail()
    );
    structured(&r)
}

/// Run `code`, asserting it ran to `ok`; its stdout.
async fn run_ok(server: &Server, session: &str, code: &str) -> String {
    let v = server.exec(session, code).await;
    assert_eq!(status(&v), "ok", "{code}\n=> {v}\n{}", server.stderr_tail());
    v["stdout"].as_str().unwrap_or_default().to_string()
}

/// Python that prints `denied` when `expr` raises PermissionError, else what happened.
pub(super) fn denied(expr: &str) -> String {
    format!(
        "try:\n    {expr}\n    print('allowed')\nexcept PermissionError:\n    print('denied')\nexcept OSError as e:\n    print('oserror', e)\n"
    )
}

fn no_connection_arrived(listener: &TcpListener) -> bool {
    matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_session_works_in_its_cwd_and_reaches_nothing_else() {
    let planted = Planted::new();
    let dir = project();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = Server::start().await;
    let info = create(
        &server,
        json!({"session_id": "ws", "sandbox": "workspace", "cwd": dir.path()}),
    )
    .await;
    assert_eq!(
        info["sandbox"],
        json!({"policy": "workspace", "network": false})
    );

    // Its cwd, its libraries, a plot, a write in its cwd and in its tmp.
    let out = run_ok(
        &server,
        "ws",
        "import csv, numpy, tempfile, os\nrows = list(csv.reader(open('data.csv')))\nopen('out.txt', 'w').write('written')\nwith tempfile.NamedTemporaryFile() as f:\n    f.write(b'tmp')\nprint(len(rows), numpy.arange(3).sum(), os.path.isdir(os.environ['IPYTHONDIR']))",
    )
    .await;
    assert_eq!(out.trim(), "3 3 True");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "written"
    );
    let r = server
        .call(
            "execute",
            json!({"session_id": "ws", "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"}),
        )
        .await;
    assert_eq!(status(&structured(&r)), "ok", "{}", dump(&r));
    let imgs = images(&r);
    assert!(
        imgs.iter().any(|(mime, _)| mime == "image/png"),
        "a PNG: {}",
        dump(&r)
    );

    // Nothing outside.
    let secret = planted.0.display().to_string();
    let out = run_ok(&server, "ws", &denied(&format!("open({secret:?}).read()"))).await;
    assert_eq!(out.trim(), "denied", "reading {secret}");
    let outside = server.workdir().join("escape.txt");
    let out = run_ok(
        &server,
        "ws",
        &denied(&format!(
            "open({:?}, 'w').write('x')",
            outside.display().to_string()
        )),
    )
    .await;
    assert_eq!(out.trim(), "denied", "writing outside the cwd");
    assert!(!outside.exists());
    let home_write = format!("{}.w", planted.0.display());
    let out = run_ok(
        &server,
        "ws",
        &denied(&format!("open({home_write:?}, 'w').write('x')")),
    )
    .await;
    assert_eq!(out.trim(), "denied", "writing in $HOME");
    let out = run_ok(
        &server,
        "ws",
        &denied(&format!(
            "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        )),
    )
    .await;
    assert_eq!(out.trim(), "denied", "connecting to 127.0.0.1:{port}");
    assert!(
        no_connection_arrived(&listener),
        "the listener saw a connection"
    );
    let out = run_ok(
        &server,
        "ws",
        &denied("import socket; socket.socket(socket.AF_UNIX).connect('/tmp/x.sock')"),
    )
    .await;
    assert_eq!(out.trim(), "denied", "a unix socket");
    broker_works(&server, "ws").await;

    let r = server
        .call(
            "install_packages",
            json!({"session_id": "ws", "packages": ["six"]}),
        )
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    assert_eq!(structured(&r)["error_code"], "UNSUPPORTED", "{}", dump(&r));
    assert!(text(&r).contains("sandbox"), "{}", text(&r));
    server.destroy("ws").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_network_lets_a_workspace_session_connect() {
    let dir = project();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = Server::start().await;
    let info = create(
        &server,
        json!({"session_id": "net", "sandbox": "workspace", "sandbox_network": true, "cwd": dir.path()}),
    )
    .await;
    assert_eq!(info["sandbox"]["network"], true);
    let code = format!(
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=10)\ns.sendall(b'hi')\ns.close()\nprint('connected')"
    );
    let out = run_ok(&server, "net", &code).await;
    assert_eq!(out.trim(), "connected");
    let (mut conn, _) = listener.accept().expect("the listener saw the kernel");
    let mut got = String::new();
    std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
    assert_eq!(got, "hi");
    // Files stay sandboxed with the network on.
    let planted = Planted::new();
    let secret = planted.0.display().to_string();
    let out = run_ok(&server, "net", &denied(&format!("open({secret:?}).read()"))).await;
    assert_eq!(out.trim(), "denied");
    broker_works(&server, "net").await;
    server.destroy("net").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_reads_its_cwd_but_cannot_write_it() {
    let dir = project();
    let server = Server::start().await;
    let info = create(
        &server,
        json!({"session_id": "ro", "sandbox": "read-only", "cwd": dir.path()}),
    )
    .await;
    assert_eq!(info["sandbox"]["policy"], "read-only");
    let out = run_ok(
        &server,
        "ro",
        "print(open('data.csv').read().count(chr(10)))",
    )
    .await;
    assert_eq!(out.trim(), "3");
    let out = run_ok(&server, "ro", &denied("open('new.txt', 'w').write('x')")).await;
    assert_eq!(out.trim(), "denied");
    assert!(!dir.path().join("new.txt").exists());
    let out = run_ok(
        &server,
        "ro",
        "import tempfile\nwith tempfile.TemporaryFile() as f:\n    f.write(b'ok')\nprint('tmp ok')",
    )
    .await;
    assert_eq!(out.trim(), "tmp ok", "its private tmp stays writable");
    broker_works(&server, "ro").await;
    server.destroy("ro").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_landlock_refuses_a_sandbox_with_sandbox_unavailable() {
    let dir = project();
    let server = Server::start_with(
        &[("KERNEL_MCP_TEST_LANDLOCK_ABI", std::ffi::OsStr::new("0"))],
        &[],
    )
    .await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "box", "sandbox": "workspace", "cwd": dir.path()}),
        )
        .await;
    assert!(is_error(&r), "{}", dump(&r));
    let v = structured(&r);
    assert_eq!(v["error_code"], "SANDBOX_UNAVAILABLE", "{v}");
    assert!(
        text(&r).contains("Landlock"),
        "says what is missing: {}",
        text(&r)
    );
    assert_eq!(v["details"]["host"]["landlock_abi"], 0, "{v}");
    let sessions = structured(&server.call("list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "nothing half-created");
    let info = structured(&server.call("server_info", json!({})).await);
    assert_eq!(info["sandbox"]["host"]["landlock_abi"], 0, "{info}");
    // No sandbox still works there.
    let plain = create(&server, json!({"session_id": "plain", "cwd": dir.path()})).await;
    assert_eq!(plain.get("sandbox"), None, "absent: none");
    server.destroy("plain").await;
    server.shutdown().await;

    // An ABI without TCP rules: only the network-off policy is refused, and says so.
    let server = Server::start_with(
        &[("KERNEL_MCP_TEST_LANDLOCK_ABI", std::ffi::OsStr::new("3"))],
        &[],
    )
    .await;
    let r = server
        .call(
            "create_session",
            json!({"session_id": "box", "sandbox": "workspace", "cwd": dir.path()}),
        )
        .await;
    assert_eq!(
        structured(&r)["error_code"],
        "SANDBOX_UNAVAILABLE",
        "{}",
        dump(&r)
    );
    assert!(text(&r).contains("ABI 4"), "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sandbox_is_every_sessions_floor_and_server_info_reports_the_host() {
    let dir = project();
    let server = Server::start_with_args(&["serve", "--sandbox", "read-only"]).await;
    let info = structured(&server.call("server_info", json!({})).await);
    assert_eq!(info["sandbox"]["default_policy"], "read-only", "{info}");
    assert!(
        info["sandbox"]["host"]["landlock_abi"].as_u64().unwrap() >= 4,
        "{info}"
    );
    let s = create(&server, json!({"session_id": "d", "cwd": dir.path()})).await;
    assert_eq!(s["sandbox"]["policy"], "read-only");
    let out = run_ok(&server, "d", &denied("open('x.txt', 'w')")).await;
    assert_eq!(out.trim(), "denied");
    broker_works(&server, "d").await;
    for weaker in [
        json!({"sandbox": "none"}),
        json!({"sandbox": "workspace"}),
        json!({"sandbox_network": true}),
    ] {
        let mut args = json!({"session_id": "free", "cwd": dir.path()});
        args.as_object_mut()
            .unwrap()
            .extend(weaker.as_object().unwrap().clone());
        let r = server.call("create_session", args).await;
        assert_eq!(
            structured(&r)["error_code"],
            "INVALID_ARGUMENT",
            "{weaker}: {}",
            dump(&r)
        );
        assert!(text(&r).contains("--sandbox"), "{}", text(&r));
    }
    server.destroy("d").await;
    server.shutdown().await;
}

/// Start `kernel` under `workspace` in a project dir; it reads and writes its cwd and cannot
/// read the planted file. `read(path)` is code printing the file's contents.
async fn other_kernel_under_workspace(kernel: &str, read: fn(&str) -> String, write: &str) {
    other_kernel_under(kernel, read, write, false).await
}

/// [`other_kernel_under_workspace`], with `sandbox_network` as given.
async fn other_kernel_under(kernel: &str, read: fn(&str) -> String, write: &str, network: bool) {
    let planted = Planted::new();
    let dir = project();
    let server = Server::start().await;
    crate::common::kernels::require_kernel(&server, kernel).await;
    let info = create(
        &server,
        json!({"session_id": "k", "kernel": kernel, "sandbox": "workspace", "sandbox_network": network, "cwd": dir.path()}),
    )
    .await;
    assert_eq!(info["sandbox"]["policy"], "workspace");
    let v = server.exec("k", &read("data.csv")).await;
    let seen = crate::common::kernels::rendered(&v);
    assert!(seen.contains("3,4"), "{kernel} reads its cwd: {v}");
    let v = server.exec("k", write).await;
    assert!(
        dir.path().join("out.txt").exists(),
        "{kernel} writes its cwd: {v}"
    );
    let v = server
        .exec("k", &read(&planted.0.display().to_string()))
        .await;
    let seen = crate::common::kernels::rendered(&v);
    assert!(
        !seen.contains("top secret"),
        "{kernel} read the planted file: {v}"
    );
    server.destroy("k").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_session_runs_under_workspace_and_cannot_read_the_planted_file() {
    other_kernel_under_workspace("bash", |p| format!("cat '{p}'"), "echo hi > out.txt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_r_session_runs_under_workspace_and_cannot_read_the_planted_file() {
    other_kernel_under_workspace(
        "ir",
        |p| format!("tryCatch(cat(readLines('{p}'), sep='\\n'), error = function(e) cat('denied\\n'), warning = function(w) cat('denied\\n'))"),
        "writeLines('hi', 'out.txt')",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_octave_session_runs_under_workspace_and_cannot_read_the_planted_file() {
    other_kernel_under_workspace(
        "octave",
        |p| format!("fid = fopen('{p}'); if fid < 0, disp('denied'), else, disp(fread(fid, Inf, 'char=>char')'), fclose(fid); end"),
        "fid = fopen('out.txt', 'w'); fprintf(fid, 'hi'); fclose(fid);",
    )
    .await;
}

/// xeus-python's debugger talks to its adapter over loopback TCP on ports it picks itself
/// (5678-5900), which the no-network policy cannot allow without opening those ports to
/// everything: xeus-python needs `sandbox_network` (docs/sandbox.md); its files stay boxed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xeus_python_session_runs_under_workspace_with_network_and_cannot_read_the_planted_file()
{
    other_kernel_under(
        "xpython",
        |p| {
            format!(
                "try:\n    print(open('{p}').read())\nexcept PermissionError:\n    print('denied')"
            )
        },
        "open('out.txt', 'w').write('hi')",
        true,
    )
    .await;
}
