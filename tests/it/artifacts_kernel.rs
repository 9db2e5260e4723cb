//! Artifacts made and used by kernel code (`from kernel_mcp import artifact`, docs/broker.md
//! "Artifacts from kernel code") through the real binary, a real Python kernel and the
//! reference MCP server: a 1 MB artifact forwarded to `echo` while the run's result carries
//! only its reference; `artifact(value)` keeps str, bytes and JSON as their MIME types, which
//! the agent's `read_artifact` and `resources/read` give back; `artifact(path=…)` keeps a
//! file, which outlives a kernel restart, saves back whole and goes with its session; a save
//! outside a sandboxed session's grants is refused; a forward over the budget is refused before
//! it is sent; unknown ids, values over 16 MiB and values that are not JSON-safe are clear
//! errors; the oldest is evicted with a notice; 16 MiB goes to the store and back whole.

use base64::Engine;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::broker::{everything_entry, run, stdout_of, write_registry};
use crate::common::history::error_code;
use crate::common::*;

/// The artifact records of `session`, as the agent lists them.
async fn listed(server: &Server, session: &str) -> Vec<Value> {
    let r = server
        .call("list_artifacts", json!({"session_id": session}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    structured(&r)["artifacts"].as_array().unwrap().clone()
}

/// The first read of `id` through the agent's `read_artifact`.
async fn agent_read(server: &Server, id: &str) -> Value {
    let r = server.call("read_artifact", json!({"id": id})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    structured(&r)
}

/// The last line of `stdout`, parsed as JSON.
fn last_json(stdout: &str) -> Value {
    let line = stdout.trim().lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_code_forwards_a_megabyte_artifact_and_the_result_carries_only_its_reference() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({"allowedTools": ["echo"]}))}),
    );
    server.create_session("k").await;
    let code = "from kernel_mcp import artifact, mcp\n\
                ref = artifact('y' * 1_000_000)\n\
                r = artifact.forward(ref, 'everything', 'echo', 'message')\n\
                echoed = mcp.text(r)\n\
                assert echoed.startswith('Echo: yyyy') and len(echoed) > 1_000_000, echoed[:80]\n\
                print([(e['tool'], e['outcome']) for e in mcp.journal()])\n\
                ref";
    let v = run(&server, "k", code).await;
    assert_eq!(status(&v), "ok", "{v:#}");
    let wire = v.to_string();
    assert!(
        wire.len() < 16 * 1024,
        "the run's result is {} bytes: it carries the reference, not the payload",
        wire.len()
    );
    let shown: Value = serde_json::from_str(v["result"].as_str().unwrap()).unwrap();
    let id = shown["id"]
        .as_str()
        .expect("the reference's id")
        .to_string();
    assert_eq!(shown["bytes"], json!(1_000_000), "{shown}");
    assert_eq!(shown["mime"], "text/plain");
    let sha = hex::encode(Sha256::digest("y".repeat(1_000_000)));
    assert_eq!(shown["sha256"], json!(sha));
    assert!(
        v["stdout"].as_str().unwrap().contains("('echo', 'ok')"),
        "journalled like any broker call: {v:#}"
    );
    let records = listed(&server, "k").await;
    let mine = records
        .iter()
        .find(|a| a["id"] == json!(id))
        .expect("listed");
    assert_eq!(mine["origin"], "kernel", "{mine}");
    assert_eq!(mine["session_id"], "k");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_values_keep_their_kind_and_read_back_through_the_agents_tools() {
    let server = Server::start().await;
    server.create_session("v").await;
    let code = "import json\n\
                from kernel_mcp import artifact\n\
                values = ['h\u{e9}llo', b'\\x00\\x01\\xff', {'a': [1, 2.5, None]}, 'a,b\\n1,2\\n']\n\
                refs = [artifact(x) for x in values[:3]] + [artifact(values[3], format='csv')]\n\
                assert [artifact.load(r) for r in refs] == values\n\
                assert artifact.read(refs[0], offset=1, length=2) == 'h\u{e9}llo'.encode()[1:3]\n\
                print(json.dumps(refs))";
    let refs = last_json(&stdout_of(&server, "v", code).await);
    let mimes: Vec<&str> = (0..4).map(|i| refs[i]["mime"].as_str().unwrap()).collect();
    assert_eq!(
        mimes,
        [
            "text/plain",
            "application/octet-stream",
            "application/json",
            "text/csv"
        ]
    );
    let text = agent_read(&server, refs[0]["id"].as_str().unwrap()).await;
    assert_eq!(
        (text["encoding"].as_str(), text["data"].as_str()),
        (Some("text"), Some("h\u{e9}llo"))
    );
    let bytes = agent_read(&server, refs[1]["id"].as_str().unwrap()).await;
    assert_eq!(bytes["encoding"], "base64");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(bytes["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(raw, [0u8, 1, 255]);
    assert_eq!(bytes["sha256"], json!(hex::encode(Sha256::digest(&raw))));
    let uri = format!("kernel-mcp://artifacts/{}", refs[1]["id"].as_str().unwrap());
    let contents = tokio::time::timeout(
        CALL_TIMEOUT,
        server
            .client()
            .read_resource(ReadResourceRequestParams::new(uri)),
    )
    .await
    .expect("resources/read answers")
    .expect("the kernel's artifact is a resource")
    .contents;
    match &contents[0] {
        ResourceContents::BlobResourceContents { blob, .. } => assert_eq!(blob, "AAH/"),
        other => panic!("not a blob: {other:?}"),
    }
    let doc = agent_read(&server, refs[2]["id"].as_str().unwrap()).await;
    let parsed: Value = serde_json::from_str(doc["data"].as_str().unwrap()).unwrap();
    assert_eq!(parsed, json!({"a": [1, 2.5, null]}));

    // Deleted by the agent: the kernel's next use is ARTIFACT_NOT_FOUND, a LookupError.
    let id = refs[0]["id"].as_str().unwrap();
    let r = server.call("delete_artifact", json!({"id": id})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    let code = format!(
        "from kernel_mcp import artifact, ArtifactError\n\
         for ident in ['{id}', 'art-0000000000000000']:\n\
         \x20   try:\n\
         \x20       artifact.read(ident)\n\
         \x20   except ArtifactError as e:\n\
         \x20       print(e.code, isinstance(e, LookupError), str(e)[:60])"
    );
    let out = stdout_of(&server, "v", &code).await;
    assert_eq!(
        out.matches("ARTIFACT_NOT_FOUND True Artifact '").count(),
        2,
        "{out}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_no_artifact_may_hold_is_refused_with_a_clear_error() {
    let server = Server::start().await;
    server.create_session("x").await;
    // Over 16 MiB: refused by the helper, and by kernel-mcp for a request that says so
    // (bypassing the helper's check), before the bytes are read.
    let code = "from kernel_mcp import artifact, ArtifactError\n\
                import kernel_mcp\n\
                big = b'z' * (16 * 1024 * 1024 + 1)\n\
                for keep in [lambda: artifact(big), lambda: kernel_mcp._request('artifact_put', _body=big, mime='text/plain', bytes=len(big)), lambda: artifact(object())]:\n\
                \x20   try:\n\
                \x20       keep()\n\
                \x20       print('kept')\n\
                \x20   except ArtifactError as e:\n\
                \x20       print(e.code, e)\n\
                print(artifact.list())";
    let out = stdout_of(&server, "x", code).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for line in &lines[..2] {
        assert!(
            line.starts_with("LIMIT_EXCEEDED The value is 16777217 bytes; an artifact holds at most 16777216 bytes"),
            "{out}"
        );
    }
    assert!(
        lines[2].starts_with("INVALID_ARGUMENT") && lines[2].contains("JSON-safe"),
        "{out}"
    );
    assert_eq!(lines[3], "[]", "nothing was kept: {out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_artifact_outlives_a_kernel_restart_and_saves_back_whole() {
    let server = Server::start().await;
    server.create_session("f").await;
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(server.workdir().join("data.bin"), &data).unwrap();
    std::fs::write(server.workdir().join("t.json"), b"{\"k\": 1}").unwrap();
    let code = "import json\n\
                from kernel_mcp import artifact\n\
                print(json.dumps([artifact(path='data.bin'), artifact(path='t.json'), artifact(path='data.bin', format='image/png')]))";
    let refs = last_json(&stdout_of(&server, "f", code).await);
    assert_eq!(refs[0]["bytes"], json!(data.len()));
    assert_eq!(refs[0]["sha256"], json!(hex::encode(Sha256::digest(&data))));
    assert_eq!(refs[0]["mime"], "application/octet-stream");
    assert_eq!(refs[1]["mime"], "application/json");
    assert_eq!(refs[2]["mime"], "image/png");
    let records = listed(&server, "f").await;
    let origin = records[0]["origin"].as_str().unwrap();
    assert!(
        origin.starts_with("kernel: /") && origin.ends_with("/data.bin"),
        "{origin}"
    );

    let r = server
        .call("restart_session", json!({"session_id": "f"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let id = refs[0]["id"].as_str().unwrap();
    let code = format!(
        "from kernel_mcp import artifact\n\
         print(artifact.save('{id}', 'copy.bin'))\n\
         print(len(artifact.read('{id}')), artifact.load('{}'))",
        refs[1]["id"].as_str().unwrap()
    );
    let out = stdout_of(&server, "f", &code).await;
    let saved = server.workdir().join("copy.bin");
    assert!(
        out.contains(&format!("{}\n300000 {{'k': 1}}", saved.display())),
        "{out}"
    );
    assert_eq!(std::fs::read(&saved).unwrap(), data);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "saved for its owner only");

    let r = server
        .call("destroy_session", json!({"session_id": "f"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let r = server.call("read_artifact", json!({"id": id})).await;
    assert_eq!(
        error_code(&r),
        "ARTIFACT_NOT_FOUND",
        "gone with its session: {}",
        dump(&r)
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernels_save_is_refused_outside_a_sandboxed_sessions_grants() {
    let server = Server::start().await;
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let r = server
        .call(
            "create_session",
            json!({"session_id": "ws", "sandbox": "workspace", "cwd": project.path()}),
        )
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let target = outside.path().join("stolen.txt");
    let code = format!(
        "from kernel_mcp import artifact, ArtifactError\n\
         ref = artifact('secret')\n\
         try:\n\
         \x20   artifact.save(ref, '{}')\n\
         \x20   print('saved')\n\
         except ArtifactError as e:\n\
         \x20   print(e.code, isinstance(e, PermissionError), e)\n\
         print(artifact.save(ref, 'kept.txt'))",
        target.display()
    );
    let out = stdout_of(&server, "ws", &code).await;
    assert!(
        out.starts_with("INVALID_ARGUMENT True Cannot write") && out.contains("sandbox"),
        "{out}"
    );
    assert!(!target.exists());
    let left: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing written outside: {left:?}");
    assert_eq!(
        std::fs::read_to_string(project.path().join("kept.txt")).unwrap(),
        "secret"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernels_forward_over_the_budget_or_outside_the_grant_is_refused_before_it_is_sent() {
    let server = Server::start().await;
    write_registry(
        server.workdir(),
        json!({"everything": everything_entry(json!({"allowedTools": ["echo"]}))}),
    );
    server.create_session("b").await;
    // 9 MB of backslashes: within an artifact's 16 MiB, twice that as a JSON string.
    let code = "from kernel_mcp import artifact, mcp, ArtifactError\n\
                ref = artifact('\\\\' * 9_000_000)\n\
                try:\n\
                \x20   artifact.forward(ref, 'everything', 'echo', 'message')\n\
                except ArtifactError as e:\n\
                \x20   print(e.code, e)\n\
                try:\n\
                \x20   artifact.forward(ref, 'everything', 'get-sum', 'a')\n\
                except PermissionError as e:\n\
                \x20   print('PermissionError', e)\n\
                print(mcp.journal())";
    let out = stdout_of(&server, "b", code).await;
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("LIMIT_EXCEEDED") && lines[0].contains("at most"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("PermissionError") && lines[1].contains("allowedTools"),
        "{out}"
    );
    assert_eq!(lines[2], "[]", "nothing was sent: {out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_code_past_64_artifacts_evicts_the_oldest_with_a_notice() {
    let server = Server::start().await;
    server.create_session("e").await;
    let code = "from kernel_mcp import artifact\n\
                refs = [artifact(str(i)) for i in range(65)]\n\
                kept = [a.id for a in artifact.list()]\n\
                print(refs[0].id, len(kept), refs[0].id in kept, refs[64].id in kept)";
    let v = run(&server, "e", code).await;
    assert_eq!(status(&v), "ok", "{v:#}");
    let out = v["stdout"].as_str().unwrap();
    let first = out.split_whitespace().next().unwrap();
    assert!(out.ends_with("64 False True\n"), "{out}");
    let stderr = v["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains(&format!("Artifact {first} ")) && stderr.contains("evicted"),
        "the notice names the evicted artifact: {stderr}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_value_goes_to_the_store_and_back_whole() {
    let server = Server::start().await;
    server.create_session("m").await;
    let code = "import hashlib, os, time\n\
                from kernel_mcp import artifact\n\
                data = os.urandom(16 * 1024 * 1024)\n\
                t0 = time.perf_counter(); ref = artifact(data); t1 = time.perf_counter()\n\
                back = artifact.read(ref); t2 = time.perf_counter()\n\
                assert back == data and ref.sha256 == hashlib.sha256(data).hexdigest()\n\
                print('%.0f %.0f' % ((t1 - t0) * 1000, (t2 - t1) * 1000))";
    let out = stdout_of(&server, "m", code).await;
    let ms: Vec<&str> = out.split_whitespace().collect();
    eprintln!(
        "16 MiB from kernel code: keep {} ms, read back {} ms",
        ms[0], ms[1]
    );
    let records = listed(&server, "m").await;
    assert_eq!(records[0]["bytes"], json!(16 * 1024 * 1024));
    server.shutdown().await;
}
