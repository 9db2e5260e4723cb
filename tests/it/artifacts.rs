//! Artifacts (docs/tools.md "Artifacts") through the real binary and a real Python kernel: a
//! result too large for its response carries `truncated.result.artifact` beside its preview,
//! whose bytes read back by range (`read_artifact`, 64 KiB at most) and as the resource
//! `kernel-mcp://artifacts/{id}`, with the sha256 of the whole text; it outlives a kernel
//! restart and goes with its session (`ARTIFACT_NOT_FOUND`); past 64 per session the oldest
//! is evicted with a notice; `save_artifact` writes inside a sandboxed session's cwd and is
//! refused outside it; `delete_artifact` forgets one.

use std::time::Instant;

use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::history::error_code;
use crate::common::*;

/// Python code whose result is `n` x's and `END` (its repr: quoted, `n + 5` bytes).
fn big(n: usize) -> String {
    format!("'x' * {n} + 'END'")
}

/// The artifact beside a run's cut result.
fn result_artifact(v: &Value) -> Value {
    let a = v["truncated"]["result"]["artifact"].clone();
    assert!(a["id"].is_string(), "no artifact beside the result: {v}");
    a
}

async fn read(server: &Server, id: &str, offset: u64, length: Option<u64>) -> Value {
    let mut args = json!({"id": id, "offset": offset});
    if let Some(l) = length {
        args["length"] = json!(l);
    }
    let r = server.call("read_artifact", args).await;
    assert!(!is_error(&r), "{}", dump(&r));
    structured(&r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_result_carries_an_artifact_that_reads_back_whole_by_range_and_as_a_resource() {
    let server = Server::start().await;
    server.create_session("a").await;
    let v = server.exec("a", &big(200_000)).await;
    assert_eq!(status(&v), "ok", "{v}");
    let a = result_artifact(&v);
    let whole = format!("'{}END'", "x".repeat(200_000));
    assert_eq!(a["bytes"], json!(whole.len()), "{a}");
    assert_eq!(a["mime"], "text/plain");
    assert_eq!(a["sha256"], json!(hex::encode(Sha256::digest(&whole))));
    let id = a["id"].as_str().unwrap().to_string();

    // By range: at most 64 KiB a read, whatever is asked; the pieces make the whole.
    let mut got = String::new();
    let mut offset = 0;
    let mut timings = Vec::new();
    while offset < whole.len() as u64 {
        let t0 = Instant::now();
        let page = read(&server, &id, offset, Some(1 << 20)).await;
        timings.push(t0.elapsed());
        assert_eq!(page["encoding"], "text");
        let data = page["data"].as_str().unwrap();
        assert!(data.len() <= 65_536, "{} bytes in one read", data.len());
        got.push_str(data);
        offset = page["next_offset"].as_u64().unwrap();
    }
    assert_eq!(got, whole);
    timings.sort();
    eprintln!(
        "read_artifact of 64 KiB: p50 {:?}, max {:?} ({} reads)",
        timings[timings.len() / 2],
        timings.last().unwrap(),
        timings.len()
    );
    let past = server
        .call(
            "read_artifact",
            json!({"id": id, "offset": whole.len() + 1}),
        )
        .await;
    assert_eq!(error_code(&past), "INVALID_ARGUMENT", "{}", dump(&past));

    // A second look at the run names the same artifact.
    let run_id = v["run_id"].as_str().unwrap();
    let again = structured(
        &server
            .call("get_execution", json!({"run_id": run_id}))
            .await,
    );
    assert_eq!(result_artifact(&again)["id"], json!(id));

    // As a resource.
    let uri = format!("kernel-mcp://artifacts/{id}");
    let contents = tokio::time::timeout(
        CALL_TIMEOUT,
        server
            .client()
            .read_resource(ReadResourceRequestParams::new(uri.clone())),
    )
    .await
    .expect("resources/read answers")
    .expect("the artifact reads")
    .contents;
    match &contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, &whole),
        other => panic!("not text: {other:?}"),
    }

    let listed = structured(
        &server
            .call("list_artifacts", json!({"session_id": "a"}))
            .await,
    );
    assert_eq!(listed["artifacts"][0]["id"], json!(id), "{listed}");
    assert_eq!(
        listed["artifacts"][0]["origin"],
        json!(format!("{run_id}/result"))
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_outlives_a_kernel_restart_and_goes_with_its_session() {
    let server = Server::start().await;
    server.create_session("r").await;
    let v = server.exec("r", &big(30_000)).await;
    let id = result_artifact(&v)["id"].as_str().unwrap().to_string();
    let r = server
        .call("restart_session", json!({"session_id": "r"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let page = read(&server, &id, 0, Some(10)).await;
    assert_eq!(page["data"], "'xxxxxxxxx");

    let r = server
        .call("destroy_session", json!({"session_id": "r"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    for (tool, args) in [
        ("read_artifact", json!({"id": id})),
        ("save_artifact", json!({"id": id, "path": "x.txt"})),
        ("delete_artifact", json!({"id": id})),
        ("read_artifact", json!({"id": "art-0000000000000000"})),
    ] {
        let r = server.call(tool, args).await;
        assert_eq!(error_code(&r), "ARTIFACT_NOT_FOUND", "{tool}: {}", dump(&r));
    }
    let listed = structured(&server.call("list_artifacts", json!({})).await);
    assert_eq!(listed["artifacts"], json!([]), "{listed}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_64_artifacts_the_oldest_is_evicted_with_a_notice() {
    let server = Server::start().await;
    server.create_session("e").await;
    let mut ids = Vec::new();
    for i in 0..64 {
        let v = server
            .exec("e", &format!("str({i}) + {}", big(21_000)))
            .await;
        ids.push(result_artifact(&v)["id"].as_str().unwrap().to_string());
        let notices = v["notices"].to_string();
        assert!(!notices.contains("evicted"), "run {i}: {notices}");
    }
    let v = server.exec("e", &big(21_000)).await;
    let newest = result_artifact(&v)["id"].as_str().unwrap().to_string();
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("evicted") && notices.contains(&ids[0]),
        "the notice names the evicted artifact: {notices}"
    );
    let r = server.call("read_artifact", json!({"id": ids[0]})).await;
    assert_eq!(error_code(&r), "ARTIFACT_NOT_FOUND", "{}", dump(&r));
    let listed = structured(
        &server
            .call("list_artifacts", json!({"session_id": "e"}))
            .await,
    );
    let kept: Vec<&str> = listed["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(kept.len(), 64);
    assert!(kept.contains(&ids[1].as_str()) && kept.contains(&newest.as_str()));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_writes_inside_a_sandboxed_sessions_cwd_and_is_refused_outside_it() {
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
    let v = server.exec("ws", &big(25_000)).await;
    let a = result_artifact(&v);
    let id = a["id"].as_str().unwrap();

    let target = outside.path().join("stolen.txt");
    let r = server
        .call(
            "save_artifact",
            json!({"id": id, "path": target.display().to_string()}),
        )
        .await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{}", dump(&r));
    assert!(text(&r).contains("sandbox"), "{}", text(&r));
    assert!(!target.exists());

    let r = server
        .call("save_artifact", json!({"id": id, "path": "kept.txt"}))
        .await;
    assert!(!is_error(&r), "{}", dump(&r));
    let saved = std::fs::read(project.path().join("kept.txt")).unwrap();
    assert_eq!(json!(hex::encode(Sha256::digest(&saved))), a["sha256"]);

    let r = server.call("delete_artifact", json!({"id": id})).await;
    assert!(!is_error(&r), "{}", dump(&r));
    let r = server.call("read_artifact", json!({"id": id})).await;
    assert_eq!(error_code(&r), "ARTIFACT_NOT_FOUND", "{}", dump(&r));
    server.shutdown().await;
}
