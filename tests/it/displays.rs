//! What the agent sees of displays (DESIGN §16): outputs are bounded by bytes, not by count,
//! and a display with no readable text still says what it is. Against real ipykernel.

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
