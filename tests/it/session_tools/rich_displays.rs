//! Rich displays as the agent reads them: Markdown, JSON and LaTeX displays read as their
//! richest text form, and the notebook export keeps every MIME type the kernel sent.

use crate::common::history::*;
use crate::common::*;
use serde_json::json;

/// `display(Markdown(...))`, `display(JSON(...))` and `display(Latex(...))` read as their
/// markdown, pretty JSON and LaTeX (not `<IPython.core.display.… object>`), and the notebook
/// export keeps every MIME type the kernel sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rich_displays_read_as_their_richest_form_and_export_whole() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tmpdir();
    create_session_with(&server, json!({"session_id": "rich", "cwd": cwd.path()})).await;
    let v = exec_ok(
        &server,
        "rich",
        "from IPython.display import display, Markdown, JSON, Latex\n\
         display(Markdown('# hi'))\n\
         display(JSON({'a': [1, 2]}))\n\
         display(Latex(r'$x^2$'))",
    )
    .await;
    let texts: Vec<&str> = v["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("no outputs: {v}"))
        .iter()
        .map(|o| o["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        texts,
        ["# hi", "{\n  \"a\": [\n    1,\n    2\n  ]\n}", "$x^2$"],
        "{v}"
    );

    let path = cwd.path().join("rich.ipynb");
    let r = server
        .call(
            "export_history",
            json!({"session_id": "rich", "path": path, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    assert_valid_notebook(&path);
    let nb = read_json(&path);
    let outputs = nb["cells"][0]["outputs"].as_array().unwrap();
    let keys = |i: usize| -> Vec<&str> {
        let mut k: Vec<&str> = outputs[i]["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(0), ["text/markdown", "text/plain"], "{nb}");
    assert_eq!(keys(1), ["application/json", "text/plain"], "{nb}");
    assert_eq!(keys(2), ["text/latex", "text/plain"], "{nb}");
    assert_eq!(outputs[1]["data"]["application/json"], json!({"a": [1, 2]}));
    assert_eq!(
        outputs[0]["data"]["text/plain"], "<IPython.core.display.Markdown object>",
        "the bundle is kept as sent: {nb}"
    );

    server.destroy("rich").await;
    server.shutdown().await;
}
