//! What the agent sees of displays (docs/semantics.md, "What a display shows"): outputs are
//! bounded by bytes, not by count, and a display with no readable text still says what it is.
//! Against real ipykernel.

use serde_json::{Value, json};

use crate::common::*;

fn indices(v: &Value) -> Vec<u64> {
    v["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["index"].as_u64())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_small_displays_are_all_shown() {
    let server = Server::start().await;
    let r = server
        .call(
            "execute",
            json!({"code": "for i in range(500):\n    display(i)", "wait_s": 120}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    assert_eq!(indices(&v), (0..500).collect::<Vec<u64>>());
    assert_eq!(v["outputs"][499]["text"], "499", "{}", v["outputs"][499]);
    assert!(
        !v["notices"].to_string().contains("not shown"),
        "{}",
        v["notices"]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_displays_keep_the_response_within_its_bytes_and_say_what_was_left_out() {
    let server = Server::start().await;
    let r = server
        .call(
            "execute",
            json!({"code": "for i in range(3000):\n    display(str(i) + 'x' * 500)", "wait_s": 120}),
        )
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v:.300}");
    let shown = indices(&v);
    assert!(shown.len() < 3000, "{} shown", shown.len());
    assert_eq!(shown.first(), Some(&0));
    assert_eq!(shown.last(), Some(&2999), "the last ones are shown too");
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("display outputs") && notices.contains("not shown"),
        "{notices}"
    );
    let bytes = dump(&r).len();
    eprintln!(
        "3000 displays of 500 bytes: {} shown, response {bytes} bytes",
        shown.len()
    );
    assert!(bytes < 1024 * 1024, "response is {bytes} bytes");
    // A shown output is a resource at its index; one left out says where to find it.
    let run = v["run_id"].as_str().unwrap();
    let read = server
        .client()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "kernel-mcp://runs/{run}/outputs/2999"
        )))
        .await
        .expect("read the last output");
    assert!(format!("{read:?}").contains("2999x"), "{read:?}");
    let missing = server
        .client()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "kernel-mcp://runs/{run}/outputs/{}",
            shown.len()
        )))
        .await;
    assert!(
        format!("{missing:?}").contains("export_history"),
        "{missing:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_display_of_empty_html_or_a_widget_shows_what_it_is() {
    let server = Server::start().await;
    let code = "from IPython.display import HTML, display\n\
                display(HTML('<div style=\"width:40px;height:10px;background:teal\"></div>'))\n\
                display({'application/vnd.jupyter.widget-view+json': {'model_id': 'm', 'version_major': 2}}, raw=True)";
    let r = server.call("execute", json!({"code": code})).await;
    let v = structured(&r);
    assert_eq!(
        v["outputs"][0]["text"], "<IPython.core.display.HTML object>",
        "{v}"
    );
    assert_eq!(
        v["outputs"][1]["text"],
        "[a display with no readable text: application/vnd.jupyter.widget-view+json]",
        "{v}"
    );
    assert!(
        text(&r).contains("IPython.core.display.HTML object"),
        "{}",
        text(&r)
    );
    server.shutdown().await;
}

/// Width and height of a PNG or JPEG from its header.
fn image_size(raw: &[u8]) -> (u32, u32) {
    if raw.starts_with(b"\x89PNG") {
        let be = |i: usize| u32::from_be_bytes(raw[i..i + 4].try_into().unwrap());
        return (be(16), be(20));
    }
    // JPEG: the first SOFn segment.
    let mut i = 2;
    while i + 9 < raw.len() {
        let (marker, len) = (
            raw[i + 1],
            u16::from_be_bytes([raw[i + 2], raw[i + 3]]) as usize,
        );
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            let h = u16::from_be_bytes([raw[i + 5], raw[i + 6]]) as u32;
            let w = u16::from_be_bytes([raw[i + 7], raw[i + 8]]) as u32;
            return (w, h);
        }
        i += 2 + len;
    }
    panic!("not a PNG or JPEG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4000_by_3000_figure_reaches_the_agent_at_1568_px_and_the_resource_keeps_it_whole() {
    use base64::Engine;
    let server = Server::start().await;
    // A matplotlib figure saved at exactly 4000x3000 (the inline backend would trim margins).
    let code = "import io, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n\
                from IPython.display import Image, display\n\
                fig = plt.figure(figsize=(40, 30), dpi=100)\nplt.plot([1, 3, 2])\n\
                buf = io.BytesIO()\nfig.savefig(buf, format='png', dpi=100)\nplt.close(fig)\n\
                display(Image(buf.getvalue()))";
    let r = server
        .call("execute", json!({"code": code, "wait_s": 120}))
        .await;
    let v = structured(&r);
    assert_eq!(status(&v), "ok", "{v}");
    let shown = images(&r);
    assert_eq!(shown.len(), 1, "{}", text(&r));
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&shown[0].1)
        .unwrap();
    let (w, h) = image_size(&raw);
    assert_eq!((w, h), (1568, 1176), "the agent's image keeps the shape");
    // The original is linked, and reads back at full size.
    let uri = format!(
        "kernel-mcp://runs/{}/outputs/0",
        v["run_id"].as_str().unwrap()
    );
    assert!(dump(&r).contains(&uri), "a resource_link to {uri}");
    let read = server
        .client()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .expect("read the original");
    let blob = match &read.contents[0] {
        rmcp::model::ResourceContents::BlobResourceContents { blob, .. } => blob.clone(),
        other => panic!("not a blob: {other:?}"),
    };
    let original = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap();
    assert_eq!(image_size(&original), (4000, 3000));
    assert!(
        v["notices"]
            .to_string()
            .contains("scaled from 4000x3000 to 1568x1176"),
        "{}",
        v["notices"]
    );
    assert_eq!(v["outputs"][0]["image"]["bytes"], original.len(), "{v}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_max_px_sets_the_limit_and_server_info_reports_it() {
    let server = Server::start_with(
        &[("KERNEL_MCP_IMAGE_MAX_PX", std::ffi::OsStr::new("300"))],
        &[],
    )
    .await;
    let info = structured(&server.call("server_info", json!({})).await);
    assert_eq!(info["limits"]["image_max_px"], 300, "{info}");
    let code = "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.figure(figsize=(8, 4), dpi=100); plt.plot([1, 2]); plt.show()";
    let r = server.call("execute", json!({"code": code})).await;
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&images(&r)[0].1)
        .unwrap();
    let (w, h) = image_size(&raw);
    assert_eq!(w.max(h), 300, "{w}x{h}");
    server.shutdown().await;
}
