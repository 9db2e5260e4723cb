//! The Jupyter face of `kernel-mcp service --http` (docs/jupyter.md), with real Jupyter clients
//! on 127.0.0.1: a Jupyter Server from `./.venv-gw` on `--gateway-url` of the service lists the
//! agent's session and runs a person's cell in its namespace over its own websocket; the agent
//! sees that cell in the session's history, marked as another client's, and its own runs go on
//! beside it; a kernel started through the API is a session agents list. Every route needs the
//! token (a websocket without it is refused before it upgrades); an adopted kernel, and a
//! session an agent uses, are never restarted or deleted through the API; an MCP connection's
//! own `default` is never one of the API's kernels. The live notebook validates with nbformat
//! after each run; a notebook open on a Jupyter Server is adopted by its path.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::gateways::{Backend, GatewayProc};
use crate::common::jupyter::{FaceService, JupyterOnFace, gw_python, person_runs, rest};
use crate::common::wait_until;

/// The agent's session `id` (created with `code` run in it) and its kernel id.
async fn agent_session(agent: &crate::common::http::HttpClient, id: &str, code: &str) -> String {
    let info = agent
        .call("create_session", json!({"session_id": id}))
        .await;
    let kernel_id = info["kernel_id"].as_str().expect("a kernel_id").to_string();
    let r = agent
        .call("execute", json!({"session_id": id, "code": code}))
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    kernel_id
}

#[tokio::test]
async fn jupyter_server_on_the_service_runs_a_persons_cell_in_the_agents_namespace() {
    let face = FaceService::start(&[], &[]).await;
    let agent = face.agent().await;
    let kernel_id = agent_session(&agent, "agent", "x = 21").await;
    let mut js = JupyterOnFace::start(&face, "jupyter-server").await;

    // Jupyter Server offers the agent's session as a kernelspec of its own, and a notebook
    // attached to the session's kernel id lists that kernel.
    let (_, specs) = rest("GET", &js.url("/api/kernelspecs"), Some(&js.token), None).await;
    let spec = &specs["kernelspecs"]["kernel-mcp-session.agent"];
    assert_eq!(
        spec["spec"]["metadata"]["kernel_mcp"]["kernel_id"],
        kernel_id.as_str(),
        "{specs}"
    );
    let nb = js
        .open_notebook("agent.ipynb", json!({"id": kernel_id}))
        .await;
    assert_eq!(nb["kernel"]["id"], kernel_id.as_str(), "{nb}");
    // Choosing the session's kernelspec for a notebook attaches it to the same kernel.
    let picked = js
        .open_notebook("picked.ipynb", json!({"name": "kernel-mcp-session.agent"}))
        .await;
    assert_eq!(picked["kernel"]["id"], kernel_id.as_str(), "{picked}");
    let (_, kernels) = rest("GET", &js.url("/api/kernels"), Some(&js.token), None).await;
    assert!(
        kernels
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["id"] == kernel_id.as_str()),
        "Jupyter Server lists the agent's kernel: {kernels}"
    );

    // The person's cell, over Jupyter Server's own websocket, reads the agent's variable.
    let ran = person_runs(&js.channels(&kernel_id), &js.token, "json", "print(x * 2)").await;
    assert_eq!(ran["stdout"], "42\n", "{ran}");
    assert_eq!(ran["reply"], "ok", "{ran}");
    assert_eq!(ran["kernel_info"], true, "{ran}");

    // The agent sees it in the history as another client's cell, and runs on beside it: its
    // own output holds nothing of the person's.
    let h = agent
        .call("get_history", json!({"session_id": "agent"}))
        .await;
    let last = &h["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["code"], "print(x * 2)", "{h}");
    assert_eq!(last["other_client"], true, "{h}");
    assert!(last["output"].as_str().unwrap().contains("42"), "{h}");
    assert!(
        h["entries"][0].get("other_client").is_none(),
        "the agent's own: {h}"
    );
    let r = agent
        .call(
            "execute",
            json!({"session_id": "agent", "code": "print(x + 1)"}),
        )
        .await;
    assert_eq!(r["stdout"], "22\n", "{r}");

    // A notebook that starts a kernel through Jupyter Server starts a session agents list,
    // named after its kernel id.
    let other = js
        .open_notebook("new.ipynb", json!({"name": "python3"}))
        .await;
    let new_id = other["kernel"]["id"]
        .as_str()
        .expect("a kernel id")
        .to_string();
    let list = agent.call("list_sessions", json!({})).await;
    let new = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kernel_id"] == new_id.as_str())
        .unwrap_or_else(|| panic!("no session for kernel {new_id}: {list}"))
        .clone();
    assert_eq!(new["session_id"], new_id.as_str(), "{new}");

    // Shutting the agent's kernel down from Jupyter is refused, saying why; the person's own
    // kernel is shut down.
    let (status, body) = rest(
        "DELETE",
        &face.url(&format!("/api/kernels/{kernel_id}")),
        Some(&face.token),
        None,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("destroy_session"),
        "{body}"
    );
    let (status, _) = rest(
        "DELETE",
        &js.url(&format!("/api/kernels/{new_id}")),
        Some(&js.token),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let list = agent.call("list_sessions", json!({})).await;
    assert!(
        !list.to_string().contains(&new_id),
        "the person's kernel is gone: {list}"
    );

    // Jupyter Server shuts down; the agent's session goes on with its state.
    js.stop();
    let r = agent
        .call(
            "execute",
            json!({"session_id": "agent", "code": "print(x)"}),
        )
        .await;
    assert_eq!(r["stdout"], "21\n", "{r}");
    face.stop().await;
}

#[tokio::test]
async fn the_face_speaks_v1_directly_and_every_route_needs_the_token() {
    let face = FaceService::start(&[], &[]).await;
    let agent = face.agent().await;
    let kernel_id = agent_session(&agent, "shared", "y = 5").await;
    let k = format!("/api/kernels/{kernel_id}");
    let routes = [
        ("GET", "/api".to_string()),
        ("GET", "/api/kernelspecs".to_string()),
        ("GET", "/api/kernelspecs/python3".to_string()),
        ("GET", "/api/kernels".to_string()),
        ("POST", "/api/kernels".to_string()),
        ("GET", k.clone()),
        ("DELETE", k.clone()),
        ("POST", format!("{k}/interrupt")),
        ("POST", format!("{k}/restart")),
        ("GET", format!("{k}/channels")),
    ];
    for (method, path) in &routes {
        let (status, _) = rest(method, &face.url(path), None, None).await;
        assert_eq!(status, 401, "{method} {path} without a token");
        let (status, _) = rest(method, &face.url(path), Some("wrong"), None).await;
        assert_eq!(status, 401, "{method} {path} with a wrong token");
    }
    // A websocket handshake without the token is answered 401, never 101.
    let head = raw_upgrade(face.port, &format!("{k}/channels")).await;
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let head = raw_upgrade(face.port, &format!("{k}/channels?token=wrong")).await;
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    // Nothing was done: the session is there, its state too.
    let r = agent
        .call(
            "execute",
            json!({"session_id": "shared", "code": "print(y)"}),
        )
        .await;
    assert_eq!(r["stdout"], "5\n", "{r}");

    // With the token in the query, the v1 subprotocol and the JSON framing both work.
    let ws = format!("ws://127.0.0.1:{}{k}/channels", face.port);
    let v1 = person_runs(&ws, &face.token, "v1", "print(y * 3)").await;
    assert_eq!(v1["subprotocol"], "v1.kernel.websocket.jupyter.org", "{v1}");
    assert_eq!(
        (v1["stdout"].as_str(), v1["reply"].as_str()),
        (Some("15\n"), Some("ok")),
        "{v1}"
    );
    let plain = person_runs(&ws, &face.token, "json", "print(y * 4)").await;
    assert_eq!(plain["subprotocol"], Value::Null, "{plain}");
    assert_eq!(plain["stdout"], "20\n", "{plain}");
    // A person's long cell is interrupted through the API (no run of the agent is current):
    // the kernel stops it and keeps its state.
    let sleeper = {
        let (ws, token) = (ws.clone(), face.token.clone());
        tokio::spawn(
            async move { person_runs(&ws, &token, "v1", "import time; time.sleep(60)").await },
        )
    };
    // Interrupt until the cell stops: a SIGINT that comes before the kernel runs the cell is
    // lost (ipykernel only interrupts running code), so it is repeated.
    let t0 = std::time::Instant::now();
    let mut sleeper = sleeper;
    let slept = loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let interrupt = format!("{}/interrupt", face.url(&k));
        let (status, _) = rest("POST", &interrupt, Some(&face.token), None).await;
        assert_eq!(status, 204);
        if let Ok(done) = tokio::time::timeout(Duration::from_millis(500), &mut sleeper).await {
            break done.unwrap();
        }
    };
    assert_eq!(slept["reply"], "error", "interrupted: {slept}");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let r = agent
        .call(
            "execute",
            json!({"session_id": "shared", "code": "print(y)"}),
        )
        .await;
    assert_eq!(r["stdout"], "5\n", "the state is kept: {r}");

    let h = agent
        .call(
            "get_history",
            json!({"session_id": "shared", "latest_n": 4}),
        )
        .await;
    let codes: Vec<&str> = h["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "print(y * 3)",
            "print(y * 4)",
            "import time; time.sleep(60)",
            "print(y)"
        ],
        "{h}"
    );
    face.stop().await;
}

/// The first line of the answer to a websocket handshake for `path` with no Authorization.
async fn raw_upgrade(port: u16, path: &str) -> String {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        .unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn an_agents_own_default_is_never_a_kernel_of_the_jupyter_api() {
    let face = FaceService::start(&[], &[]).await;
    let agent = face.agent().await;
    // `execute` without session_id: this connection's own `default`, private to it.
    let r = agent.call("execute", json!({"code": "secret = 1"})).await;
    assert_eq!(r["status"], "ok", "{r}");
    let info = agent
        .call("get_session", json!({"session_id": "default"}))
        .await;
    let own = info["kernel_id"].as_str().expect("a kernel_id").to_string();
    let named = agent_session(&agent, "named", "x = 1").await;
    let token = Some(face.token.as_str());
    let (status, kernels) = rest("GET", &face.url("/api/kernels"), token, None).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = kernels
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["id"].as_str())
        .collect();
    assert_eq!(ids, [named.as_str()], "only the named session: {kernels}");
    let (status, _) = rest(
        "GET",
        &face.url(&format!("/api/kernels/{own}")),
        token,
        None,
    )
    .await;
    assert_eq!(status, 404);
    let interrupt = face.url(&format!("/api/kernels/{own}/interrupt"));
    assert_eq!(rest("POST", &interrupt, token, None).await.0, 404);
    let (_, specs) = rest("GET", &face.url("/api/kernelspecs"), token, None).await;
    assert!(
        specs["kernelspecs"]["kernel-mcp-session.named"].is_object(),
        "{specs}"
    );
    assert!(
        specs["kernelspecs"]["kernel-mcp-session.default"].is_null(),
        "{specs}"
    );
    // Nor may the API name a `default` of its own.
    let ask = json!({"metadata": {"session_id": "default"}});
    let (status, why) = rest("POST", &face.url("/api/kernels"), token, Some(ask)).await;
    assert_eq!(status, 400, "{why}");
    assert!(
        why["message"].as_str().unwrap().contains("default"),
        "{why}"
    );
    let listed = agent.call("list_sessions", json!({})).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 2, "{listed}");
    face.stop().await;
}

#[tokio::test]
async fn adopted_and_agents_kernels_are_never_restarted_or_deleted_through_the_api() {
    let face = FaceService::start(&[], &[]).await;
    let agent = face.agent().await;
    // A kernel a person started, adopted by the agent.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kernel-person.json");
    let mut person = std::process::Command::new(crate::common::venv().join("bin/python"))
        .args(["-m", "ipykernel_launcher", "-f"])
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(30), || file.exists()).await);
    let adopted = agent
        .call(
            "create_session",
            json!({"session_id": "theirs", "connection_file": file}),
        )
        .await;
    let adopted_id = adopted["kernel_id"]
        .as_str()
        .expect("a kernel id")
        .to_string();
    let k = |id: &str, tail: &str| face.url(&format!("/api/kernels/{id}{tail}"));
    let (status, body) = rest("POST", &k(&adopted_id, "/restart"), Some(&face.token), None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("did not start"),
        "{body}"
    );
    let (status, body) = rest("DELETE", &k(&adopted_id, ""), Some(&face.token), None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        person.try_wait().unwrap().is_none(),
        "the person's kernel runs on"
    );
    let s = agent
        .call("get_session", json!({"session_id": "theirs"}))
        .await;
    assert_eq!(s["generation"], 1, "not restarted: {s}");

    // A kernel started through the API that an agent has used is not deleted either; one
    // that only people used is.
    let (status, started) = rest(
        "POST",
        &face.url("/api/kernels"),
        Some(&face.token),
        Some(json!({"name": "python3", "metadata": {"session_id": "lab"}})),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    let lab_id = started["id"].as_str().unwrap().to_string();
    let r = agent
        .call("execute", json!({"session_id": "lab", "code": "z = 1"}))
        .await;
    assert_eq!(r["status"], "ok", "{r}");
    let (status, body) = rest("DELETE", &k(&lab_id, ""), Some(&face.token), None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("in use"),
        "{body}"
    );
    let (status, fresh) = rest("POST", &face.url("/api/kernels"), Some(&face.token), None).await;
    assert_eq!(status, 201, "{fresh}");
    let fresh_id = fresh["id"].as_str().unwrap();
    let (status, _) = rest("POST", &k(fresh_id, "/interrupt"), Some(&face.token), None).await;
    assert_eq!(status, 204);
    let (status, restarted) = rest("POST", &k(fresh_id, "/restart"), Some(&face.token), None).await;
    assert_eq!(status, 200, "{restarted}");
    let s = agent
        .call("get_session", json!({"session_id": fresh_id}))
        .await;
    assert_eq!(s["generation"], 2, "restarted: {s}");
    let (status, _) = rest("DELETE", &k(fresh_id, ""), Some(&face.token), None).await;
    assert_eq!(status, 204);
    let (status, _) = rest("GET", &k(fresh_id, ""), Some(&face.token), None).await;
    assert_eq!(status, 404);

    agent
        .call("destroy_session", json!({"session_id": "theirs"}))
        .await;
    let _ = person.kill();
    let _ = person.wait();
    face.stop().await;
}

/// `nbformat.validate` of the notebook at `path`, with its cell count: `(ok, cells, detail)`.
async fn validate(path: &std::path::Path) -> (bool, usize, String) {
    let code = "import sys, nbformat\nnb = nbformat.read(sys.argv[1], as_version=4)\nnbformat.validate(nb)\nprint(len(nb.cells))";
    let out = tokio::process::Command::new(gw_python())
        .args(["-c", code])
        .arg(path)
        .output()
        .await
        .unwrap();
    let n = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (
        out.status.success(),
        n,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_live_notebook_validates_with_nbformat_after_each_run() {
    use std::os::unix::fs::PermissionsExt;
    let face = FaceService::start(&[], &[]).await;
    // `create_session(notebook)` is a default tool's parameter; `mirror_notebook` is the
    // `notebook` set's.
    let agent = face.agent_with("default,notebook").await;
    let dir = tempfile::tempdir().unwrap();
    let info = agent
        .call(
            "create_session",
            json!({"session_id": "nb", "cwd": dir.path(), "notebook": "live.ipynb"}),
        )
        .await;
    assert_eq!(info["session_id"], "nb", "{info}");
    let path = dir.path().join("live.ipynb");
    let cells = [
        "print('hello')",
        "from IPython.display import display, HTML\nh = display(HTML('<b>first</b>'), display_id=True)",
        "h.update(HTML('<i>updated</i>'))",
        "1 / 0",
        "{'a': 1}",
    ];
    for (i, code) in cells.iter().enumerate() {
        agent
            .call("execute", json!({"session_id": "nb", "code": code}))
            .await;
        let want = i + 1;
        let mut last = (false, 0, String::new());
        for _ in 0..50 {
            last = validate(&path).await;
            if last.1 == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(last.0 && last.1 == want, "after run {want}: {last:?}");
    }
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(nb["nbformat_minor"], 5);
    assert_eq!(
        nb["metadata"]["kernelspec"]["name"],
        "kernel-mcp-session.nb"
    );
    let html = &nb["cells"][1]["outputs"][0]["data"]["text/html"];
    assert_eq!(
        html, "<i>updated</i>",
        "the display update is applied: {}",
        nb["cells"][1]
    );
    assert_eq!(nb["cells"][3]["outputs"][0]["output_type"], "error");
    assert!(
        nb["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"].is_string())
    );

    // mirror_notebook moves it; the new file has every cell so far.
    let moved = agent
        .call(
            "mirror_notebook",
            json!({"session_id": "nb", "path": "second"}),
        )
        .await;
    assert_eq!(moved["entries"], 5, "{moved}");
    let second = dir.path().join("second.ipynb");
    assert_eq!(validate(&second).await.1, 5);
    face.stop().await;
}

#[tokio::test]
async fn a_notebook_open_on_jupyter_server_is_adopted_by_its_path() {
    let js = GatewayProc::start(Backend::JupyterServer).await;
    let face = FaceService::start(
        &["--gateway", &format!("js={}", js.url)],
        &[("KERNEL_MCP_GATEWAY_TOKEN", js.token.as_str())],
    )
    .await;
    // A person opens a notebook on that server and sets a variable in its kernel.
    let body = json!({"path": "work/nb.ipynb", "type": "notebook", "name": "nb.ipynb",
        "kernel": {"name": "python3"}});
    let (status, s) = rest(
        "POST",
        &format!("{}/api/sessions", js.url),
        Some(&js.token),
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{s}");
    let kernel_id = s["kernel"]["id"].as_str().unwrap().to_string();
    let ws = format!(
        "ws://127.0.0.1:{}/api/kernels/{kernel_id}/channels",
        js.port
    );
    let ran = person_runs(&ws, &js.token, "json", "y = 7").await;
    assert_eq!(ran["reply"], "ok", "{ran}");

    let agent = face.agent().await;
    let info = agent
        .call(
            "create_session",
            json!({"session_id": "byp", "gateway": "js", "notebook_path": "/work/nb.ipynb"}),
        )
        .await;
    assert_eq!(info["kernel_id"], kernel_id.as_str(), "{info}");
    assert_eq!(info["attached"], true, "{info}");
    let r = agent
        .call(
            "execute",
            json!({"session_id": "byp", "code": "print(y * 6)"}),
        )
        .await;
    assert_eq!(r["stdout"], "42\n", "{r}");
    // An unknown path says so.
    let bad = agent
        .call(
            "create_session",
            json!({"session_id": "nope", "gateway": "js", "notebook_path": "missing.ipynb"}),
        )
        .await;
    assert_eq!(bad["error_code"], "KERNEL_NOT_FOUND", "{bad}");
    agent
        .call("destroy_session", json!({"session_id": "byp"}))
        .await;
    assert!(
        js.kernel_ids().await.contains(&kernel_id),
        "the notebook's kernel runs on"
    );
    face.stop().await;
}
