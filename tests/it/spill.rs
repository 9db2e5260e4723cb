//! A run's output past 8 MiB goes to a spool file (docs/performance.md, "Large outputs: the
//! spool"): 0600 in the state directory, read back byte for byte by pages, resources and the
//! export, removed with its run or its session, and left behind by a killed server only until
//! the next server starts.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::history::{StateHome, kill_server};
use crate::common::*;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::json;

/// About 18.8 MB of numbered lines with two- and three-byte characters.
const FLOOD: &str = "for i in range(100_000):\n    print(f'{i:06d} ' + 'é漢x' * 30)";

fn expected_flood() -> String {
    let tail = "é漢x".repeat(30);
    (0..100_000).map(|i| format!("{i:06} {tail}\n")).collect()
}

/// The spool files under `state` (`kernel-mcp/spool/<server>/<file>`).
fn spool_files(state: &Path) -> Vec<PathBuf> {
    let base = state.join("kernel-mcp").join("spool");
    let mut out = Vec::new();
    for server in std::fs::read_dir(base).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(server.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.file_name() != "lock" {
                out.push(f.path());
            }
        }
    }
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("exists").permissions().mode() & 0o777
}

async fn page_all(server: &Server, run: &str) -> String {
    let mut whole = String::new();
    let mut offset = 0;
    loop {
        let r = server
            .call(
                "get_execution",
                json!({"run_id": run, "stream": "stdout", "offset": offset, "limit": 1_048_576}),
            )
            .await;
        let v = structured(&r);
        let text = v["text"].as_str().expect("a page").to_string();
        if text.is_empty() {
            return whole;
        }
        whole.push_str(&text);
        offset = v["next_offset"].as_u64().expect("next_offset") as usize;
    }
}

async fn read_resource_all(server: &Server, run: &str) -> String {
    let mut whole = String::new();
    let mut next = Some(format!("kernel-mcp://runs/{run}/stdout"));
    while let Some(uri) = next.take() {
        let contents = tokio::time::timeout(
            CALL_TIMEOUT,
            server
                .client()
                .read_resource(ReadResourceRequestParams::new(&uri)),
        )
        .await
        .expect("resources/read answers")
        .unwrap_or_else(|e| panic!("resources/read {uri}: {e}"))
        .contents;
        match &contents[0] {
            ResourceContents::TextResourceContents { text, .. } => whole.push_str(text),
            other => panic!("not text: {other:?}"),
        }
        if let Some(ResourceContents::TextResourceContents { uri, .. }) = contents.get(1) {
            next = Some(uri.clone());
        }
    }
    whole
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_run_reads_back_byte_for_byte_and_its_file_goes_with_the_session() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    let r = server
        .call(
            "execute",
            json!({"session_id": "s", "code": FLOOD, "wait_s": 300}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", text(&r));
    let expected = expected_flood();
    assert_eq!(
        v["truncated"]["stdout"]["total_bytes"].as_u64(),
        Some(expected.len() as u64)
    );
    let run = v["run_id"].as_str().expect("run_id").to_string();

    let files = spool_files(state.path());
    assert_eq!(files.len(), 1, "one spilled stream: {files:?}");
    assert_eq!(
        files[0].file_name().unwrap().to_string_lossy(),
        format!("{run}.stdout")
    );
    assert_eq!(mode(&files[0]), 0o600);
    assert_eq!(mode(files[0].parent().unwrap()), 0o700);

    let paged = page_all(&server, &run).await;
    assert!(paged == expected, "pages differ from the printed text");
    let read = read_resource_all(&server, &run).await;
    assert!(
        read == expected,
        "the resource differs from the printed text"
    );

    // The export keeps each stream of an entry as head + tail: both read from the spool.
    let notebook = state.path().join("out.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": notebook, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let nb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&notebook).expect("notebook")).unwrap();
    let out = &nb["cells"][0]["outputs"][0];
    let exported = match &out["text"] {
        serde_json::Value::Array(lines) => lines.iter().filter_map(|l| l.as_str()).collect(),
        t => t.as_str().unwrap_or_default().to_string(),
    };
    let cut = expected.floor_char_boundary(30_000);
    let from = expected.ceil_char_boundary(expected.len() - 30_000);
    let (head, tail) = (&expected[..cut], &expected[from..]);
    assert!(exported.starts_with(head), "the export's head");
    assert!(exported.ends_with(tail), "the export's tail");

    server.destroy("s").await;
    assert!(
        spool_files(state.path()).is_empty(),
        "destroy_session removed the spool file"
    );
    server.shutdown().await;
}

/// One write of about 19 MB: ipykernel sends it as one `stream` message, whose content frame
/// the server reads in pieces through a transit file; JSON escapes (tab, quote, backslash)
/// and four-byte characters fall on every kind of piece boundary.
const ONE_WRITE: &str = "import sys\nsys.stdout.write(''.join(f'{i:07d}\\t\"q\" \\\\ é😀\\n' for i in range(800_000)))\nsys.stdout.flush()";

fn expected_write() -> String {
    (0..800_000)
        .map(|i| format!("{i:07}\t\"q\" \\ é😀\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_huge_write_with_escapes_reads_back_byte_for_byte() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    let v = exec_ok_wait(&server, ONE_WRITE).await;
    let expected = expected_write();
    assert_eq!(
        v["truncated"]["stdout"]["total_bytes"].as_u64(),
        Some(expected.len() as u64),
        "{v}"
    );
    let run = v["run_id"].as_str().expect("run_id").to_string();
    let paged = page_all(&server, &run).await;
    assert!(paged.len() == expected.len(), "{} bytes paged", paged.len());
    assert!(paged == expected, "pages differ from the written text");
    server.destroy("s").await;
    assert!(spool_files(state.path()).is_empty(), "nothing is left");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_file_goes_when_its_run_is_forgotten() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    let v = exec_ok_wait(&server, "print('y' * 9_000_000)").await;
    let run = v["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(spool_files(state.path()).len(), 1);
    // A session keeps its last 256 finished runs.
    for _ in 0..256 {
        let v = server.exec("s", "pass").await;
        assert_eq!(status(&v), "ok");
    }
    assert!(
        spool_files(state.path()).is_empty(),
        "the forgotten run's file is gone"
    );
    let r = server.call("get_execution", json!({"run_id": run})).await;
    assert!(is_error(&r), "the run itself is forgotten too");
    server.shutdown().await;
}

async fn exec_ok_wait(server: &Server, code: &str) -> serde_json::Value {
    let r = server
        .call(
            "execute",
            json!({"session_id": "s", "code": code, "wait_s": 300}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", text(&r));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spool_of_a_killed_server_is_removed_when_the_next_one_starts() {
    let state = StateHome::new();
    let server = state.start_server().await;
    server.create_session("s").await;
    exec_ok_wait(&server, "print('z' * 9_000_000)").await;
    let left = spool_files(state.path());
    assert_eq!(left.len(), 1);
    kill_server(server).await;
    assert!(left[0].exists(), "a killed server cleans nothing up");

    let next = state.start_server().await;
    assert!(!left[0].exists(), "the next server pruned it at start");
    assert!(
        !left[0].parent().unwrap().exists(),
        "with the dead server's directory"
    );
    next.shutdown().await;
}
