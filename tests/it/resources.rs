//! Runs' outputs as MCP resources: a shortened stream and an image over the response cap
//! come with `resource_link` blocks, and `resources/read` returns the whole text (in 8 MiB
//! pieces) and the image's exact bytes.

use crate::common::*;
use base64::Engine;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::json;

/// The URIs of a result's resource links.
fn links(r: &rmcp::model::CallToolResult) -> Vec<String> {
    r.content
        .iter()
        .filter_map(|c| c.as_resource_link().map(|l| l.uri.clone()))
        .collect()
}

async fn read(server: &Server, uri: &str) -> Vec<ResourceContents> {
    tokio::time::timeout(
        CALL_TIMEOUT,
        server
            .client()
            .read_resource(ReadResourceRequestParams::new(uri)),
    )
    .await
    .expect("resources/read answers")
    .unwrap_or_else(|e| panic!("resources/read {uri}: {e}"))
    .contents
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_megabyte_print_links_its_stdout_and_reading_it_returns_the_whole_text() {
    let server = Server::start().await;
    let r = server
        .call("execute", json!({"code": "print('x' * 10_000_000)"}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", text(&r));
    let run = v["run_id"].as_str().unwrap();
    let uri = format!("kernel-mcp://runs/{run}/stdout");
    assert!(
        links(&r).contains(&uri),
        "no link to {uri}: {:?}",
        links(&r)
    );

    let mut whole = String::new();
    let mut next = Some(uri);
    let mut reads = 0;
    while let Some(uri) = next.take() {
        reads += 1;
        assert!(reads <= 4, "too many pieces");
        let contents = read(&server, &uri).await;
        match &contents[0] {
            ResourceContents::TextResourceContents { text, .. } => whole.push_str(text),
            other => panic!("not text: {other:?}"),
        }
        if let Some(ResourceContents::TextResourceContents { uri, .. }) = contents.get(1) {
            next = Some(uri.clone());
        }
    }
    assert_eq!(whole.len(), 10_000_001, "every byte, with the newline");
    assert!(whole.trim_end().bytes().all(|b| b == b'x'));
    assert_eq!(reads, 2, "8 MiB, then the rest");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_megabyte_png_is_a_link_that_reads_back_as_the_same_bytes() {
    let server = Server::start().await;
    let code = "import base64, os\n\
                data = b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(3_000_000)\n\
                open('big.png', 'wb').write(data)\n\
                display({'image/png': base64.b64encode(data).decode(), 'text/plain': '<big>'}, raw=True)";
    let r = server.call("execute", json!({"code": code})).await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{}", text(&r));
    assert!(images(&r).is_empty(), "the image is not inline");
    let run = v["run_id"].as_str().unwrap();
    let uri = format!("kernel-mcp://runs/{run}/outputs/0");
    assert!(
        links(&r).contains(&uri),
        "no link to {uri}: {:?}",
        links(&r)
    );

    let contents = read(&server, &uri).await;
    let ResourceContents::BlobResourceContents {
        blob, mime_type, ..
    } = &contents[0]
    else {
        panic!("not a blob: {:?}", contents[0]);
    };
    assert_eq!(mime_type.as_deref(), Some("image/png"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .expect("base64");
    let written = std::fs::read(server.workdir().join("big.png")).expect("big.png");
    assert_eq!(bytes.len(), written.len());
    assert!(bytes == written, "the bytes differ");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_of_an_unknown_run_is_not_found_and_templates_are_listed() {
    let server = Server::start().await;
    let e = server
        .client()
        .read_resource(ReadResourceRequestParams::new(
            "kernel-mcp://runs/run-000000000000/stdout",
        ))
        .await;
    assert!(e.is_err(), "{e:?}");
    let templates = server
        .client()
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    let uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert!(
        uris.contains(&"kernel-mcp://runs/{run_id}/stdout"),
        "{uris:?}"
    );
    assert!(
        uris.contains(&"kernel-mcp://runs/{run_id}/outputs/{index}"),
        "{uris:?}"
    );
    server.shutdown().await;
}
