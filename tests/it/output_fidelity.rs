//! Issue 17 regressions against the real binary and real ipykernel: the notebook export keeps
//! the kernel's order of outputs (streams as nbclient coalesces them, figures and `Out[]`),
//! `display_id` updates reach earlier runs and their exported cells (also after a journal
//! replay), and SVG figures reach the agent and the export.

use std::path::Path;

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

/// Export session `s`'s history as a notebook to `dir/name.ipynb`, check it is valid, and
/// return it.
async fn export_notebook(server: &Server, dir: &Path, name: &str) -> Value {
    let path = dir.join(format!("{name}.ipynb"));
    let r = server
        .call(
            "export_history",
            json!({"session_id": "s", "path": path, "format": "notebook"}),
        )
        .await;
    assert!(!is_error(&r), "export_history: {}", dump(&r));
    assert_valid_notebook(&path);
    let text = std::fs::read_to_string(&path).expect("the export");
    serde_json::from_str(&text).expect("the export is JSON")
}

/// A cell's outputs as short strings: `stream:stdout:<text>`, `display_data:<mimes>`,
/// `execute_result:<text/plain>`, `error:<ename>`.
fn outline(cell: &Value) -> Vec<String> {
    cell["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| match o["output_type"].as_str().unwrap_or("") {
            "stream" => format!(
                "stream:{}:{}",
                o["name"].as_str().unwrap_or(""),
                o["text"].as_str().unwrap_or("")
            ),
            "execute_result" => format!(
                "execute_result:{}",
                o["data"]["text/plain"].as_str().unwrap_or("")
            ),
            "display_data" => {
                let mimes: Vec<&str> = o["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.as_str())
                    .collect();
                format!("display_data:{}", mimes.join(","))
            }
            "error" => format!("error:{}", o["ename"].as_str().unwrap_or("")),
            other => other.to_string(),
        })
        .collect()
}

fn cell(nb: &Value, i: usize) -> &Value {
    &nb["cells"][i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_keeps_the_kernels_order_of_streams_figures_and_out() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tempfile::tempdir().expect("temp dir");
    create_session_with(&server, json!({"session_id": "s", "cwd": cwd.path()})).await;
    let r = exec_ok(
        &server,
        "s",
        // ipykernel buffers each stream and sends them in whichever order they flush (without
        // `flush=True` it sends `b` then `a\nc`, and nbclient records that); flushed, the
        // kernel sends three messages, and the notebook shows three outputs.
        "import sys\nprint('a', file=sys.stderr, flush=True); print('b', flush=True); print('c', file=sys.stderr, flush=True)",
    )
    .await;
    // The agent's view is unchanged: one text per stream.
    assert_eq!(r["stdout"], "b\n", "{r}");
    assert_eq!(r["stderr"], "a\nc\n", "{r}");
    exec_ok(
        &server,
        "s",
        "%matplotlib inline\nimport matplotlib.pyplot as plt",
    )
    .await;
    let r = exec_ok(
        &server,
        "s",
        "print('before')\nplt.plot([1, 2]); plt.show()\nprint('after')\n41 + 1",
    )
    .await;
    assert_eq!(r["result"], "42", "{r}");
    assert_eq!(r["stdout"], "before\nafter\n", "{r}");
    // A text-only Out[] is the result, not an output, as before.
    assert_eq!(r["outputs"].as_array().map(Vec::len), Some(1), "{r}");
    let e = server
        .exec("s", "print('x')\nsys.stdout.flush()\nraise KeyError('k')")
        .await;
    assert_eq!(status(&e), "error", "{e}");

    let nb = export_notebook(&server, cwd.path(), "order").await;
    assert_eq!(
        outline(cell(&nb, 0)),
        [
            "stream:stderr:a\n",
            "stream:stdout:b\n",
            "stream:stderr:c\n"
        ],
        "three outputs in the kernel's order, as nbclient has them"
    );
    assert_eq!(
        outline(cell(&nb, 2)),
        [
            "stream:stdout:before\n",
            "display_data:image/png,text/plain",
            "stream:stdout:after\n",
            "execute_result:42",
        ],
        "the figure between its prints and Out[] last"
    );
    assert_eq!(
        cell(&nb, 2)["outputs"][3]["execution_count"],
        cell(&nb, 2)["execution_count"]
    );
    assert_eq!(
        outline(cell(&nb, 3)),
        ["stream:stdout:x\n", "error:KeyError"]
    );

    server.destroy("s").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_display_update_reaches_the_earlier_run_and_its_exported_cell_also_from_the_journal() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tempfile::tempdir().expect("temp dir");
    create_session_with(&server, json!({"session_id": "s", "cwd": cwd.path()})).await;
    let first = exec_ok(
        &server,
        "s",
        "from IPython.display import display, Markdown\nh = display(Markdown('v1'), display_id=True)\nprint('shown')",
    )
    .await;
    let first_run = first["run_id"].as_str().expect("run id").to_string();
    assert_eq!(first["outputs"][0]["text"], "v1", "{first}");
    exec_ok(&server, "s", "h.update(Markdown('v2'))").await;
    // A later display with the same id updates the earlier one too, and is shown.
    let third = exec_ok(
        &server,
        "s",
        "display(Markdown('v3'), display_id=h.display_id)",
    )
    .await;
    assert_eq!(third["outputs"][0]["text"], "v3", "{third}");
    let again = structured(
        &server
            .call("get_execution", json!({"run_id": first_run}))
            .await,
    );
    assert_eq!(again["outputs"][0]["text"], "v3", "{again}");

    let nb = export_notebook(&server, cwd.path(), "live").await;
    let first_cell = &cell(&nb, 0)["outputs"];
    assert_eq!(first_cell[0]["data"]["text/markdown"], "v3", "{first_cell}");
    assert_eq!(first_cell[1]["text"], "shown\n", "{first_cell}");
    assert_eq!(
        cell(&nb, 1)["outputs"].as_array().map(Vec::len),
        Some(0),
        "an update is no output of its own cell"
    );
    assert_eq!(
        cell(&nb, 2)["outputs"][0]["data"]["text/markdown"],
        "v3",
        "{nb}"
    );

    // The next server exports the same from the journal.
    server.destroy("s").await;
    server.shutdown().await;
    let server = state.start_server().await;
    let nb = export_notebook(&server, cwd.path(), "journal").await;
    assert_eq!(
        cell(&nb, 0)["outputs"][0]["data"]["text/markdown"],
        "v3",
        "{nb}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_svg_figure_reaches_the_agent_as_bounded_text_and_the_export_as_svg() {
    let state = StateHome::new();
    let server = state.start_server().await;
    let cwd = tempfile::tempdir().expect("temp dir");
    create_session_with(&server, json!({"session_id": "s", "cwd": cwd.path()})).await;
    let r = exec_ok(
        &server,
        "s",
        "%matplotlib inline\n%config InlineBackend.figure_formats = ['svg']\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2]); plt.title('svgtitle'); plt.show()",
    )
    .await;
    let out = &r["outputs"][0];
    assert_eq!(
        out["mime_types"],
        json!(["image/svg+xml", "text/plain"]),
        "{r}"
    );
    let text = out["text"].as_str().expect("a text");
    assert!(text.starts_with("<Figure size"), "{text:.300}");
    assert!(text.contains("<svg"), "the SVG itself: {text:.300}");
    assert!(text.len() <= 20_200, "bounded: {}", text.len());

    let nb = export_notebook(&server, cwd.path(), "svg").await;
    let svg = &cell(&nb, 0)["outputs"][0]["data"]["image/svg+xml"];
    let svg = svg
        .as_str()
        .map(String::from)
        .or_else(|| {
            svg.as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
        })
        .expect("image/svg+xml kept");
    assert!(
        svg.contains("<svg") && svg.contains("svgtitle"),
        "{svg:.300}"
    );

    server.destroy("s").await;
    server.shutdown().await;
}
