//! The notebooks of row (p): a 100-cell notebook to run (small computations, print loops,
//! HTML and Markdown displays, a markdown cell every twelve cells) and a 1 000-cell notebook
//! of the same cells, with the outputs such a run leaves, to read. Both are nbformat 4.5 on
//! the bench's kernelspec, every cell with a fixed id (`c0000`…), so each repetition starts
//! from the same bytes.

use serde_json::{Value, json};

/// The code of template `t` for cell `k`: `@K` stands for `k`.
const TEMPLATES: [&str; 10] = [
    "total_@K = sum(v * v for v in data[:@K0])\ntotal_@K",
    "for i in range(10):\n    print(f'step @K.{i}: {i * i}')",
    "display(Markdown(f'**cell @K**: mean = {statistics.mean(data):.4f}'))",
    "stats_@K = {'min': min(data), 'max': max(data), 'n': len(data)}\nstats_@K",
    "def scale_@K(x):\n    return x * @K + 1\n\n[scale_@K(i) for i in range(8)]",
    "words = 'the quick brown fox jumps over the lazy dog'.split()\nsorted(words, key=len)[:5]",
    "x_@K = sorted(data)[@K]",
    "print(json.dumps({'cell': @K, 'values': [round(v, 3) for v in data[:5]]}))",
    "display(HTML('<table><tr><td>@K</td><td>' + str(round(data[@K], 4)) + '</td></tr></table>'))",
    "math.factorial(@K % 30 + 10)",
];

const SETUP: &str = "import json, math, statistics\n\
                     from IPython.display import HTML, Markdown, display\n\
                     data = [math.sin(i / 10) for i in range(1000)]";

/// What cell `k` is: markdown every twelve cells, the imports at 1, else a template.
fn source(k: usize) -> (&'static str, String) {
    if k.is_multiple_of(12) {
        let text = format!(
            "## Part {}\n\nWhat the next cells compute, and why.",
            k / 12 + 1
        );
        return ("markdown", text);
    }
    if k == 1 {
        return ("code", SETUP.to_string());
    }
    ("code", TEMPLATES[k % 10].replace("@K", &k.to_string()))
}

fn wrap(cells: Vec<Value>, kernel: &str) -> Value {
    json!({
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": kernel, "display_name": kernel, "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    })
}

/// `n` cells as a notebook never run (no outputs, no execution counts).
pub fn to_run(n: usize, kernel: &str) -> Value {
    let cells = (0..n)
        .map(|k| {
            let (kind, src) = source(k);
            let id = format!("c{k:04}");
            match kind {
                "markdown" => {
                    json!({"cell_type": "markdown", "id": id, "metadata": {}, "source": src})
                }
                _ => json!({"cell_type": "code", "id": id, "metadata": {}, "source": src,
                            "outputs": [], "execution_count": null}),
            }
        })
        .collect();
    wrap(cells, kernel)
}

/// The outputs template `t` leaves for cell `k` (run as the `count`-th cell).
fn outputs(k: usize, count: usize) -> Value {
    let result = |text: String| {
        json!({"output_type": "execute_result", "execution_count": count, "metadata": {},
               "data": {"text/plain": text}})
    };
    match k % 10 {
        1 => {
            let lines: String = (0..10)
                .map(|i| format!("step {k}.{i}: {}\n", i * i))
                .collect();
            json!([{"output_type": "stream", "name": "stdout", "text": lines}])
        }
        2 => json!([{"output_type": "display_data", "metadata": {}, "data": {
            "text/markdown": format!("**cell {k}**: mean = 0.0173"),
            "text/plain": "<IPython.core.display.Markdown object>"}}]),
        6 => json!([]),
        7 => json!([{"output_type": "stream", "name": "stdout",
                     "text": format!("{{\"cell\": {k}, \"values\": [0.0, 0.1, 0.199, 0.296, 0.389]}}\n")}]),
        8 => json!([{"output_type": "display_data", "metadata": {}, "data": {
            "text/html": format!("<table><tr><td>{k}</td><td>0.4121</td></tr></table>"),
            "text/plain": "<IPython.core.display.HTML object>"}}]),
        3 => json!([result(
            "{'min': -0.9999902065507035, 'max': 0.9999118601072672, 'n': 1000}".into()
        )]),
        4 => json!([result(format!(
            "[1, {}, {}, {}, {}, {}, {}, {}]",
            k + 1,
            2 * k + 1,
            3 * k + 1,
            4 * k + 1,
            5 * k + 1,
            6 * k + 1,
            7 * k + 1
        ))]),
        _ => json!([result(format!("{}", 1_000_000 + k * 7919))]),
    }
}

/// `n` cells as a notebook that was run: every code cell with its count and outputs.
pub fn run_already(n: usize, kernel: &str) -> Value {
    let mut count = 0;
    let cells = (0..n)
        .map(|k| {
            let (kind, src) = source(k);
            let id = format!("c{k:04}");
            if kind == "markdown" {
                return json!({"cell_type": "markdown", "id": id, "metadata": {}, "source": src});
            }
            count += 1;
            let outs = if k == 1 { json!([]) } else { outputs(k, count) };
            json!({"cell_type": "code", "id": id, "metadata": {}, "source": src,
                   "outputs": outs, "execution_count": count})
        })
        .collect();
    wrap(cells, kernel)
}

/// Whether `nb` (as written after a run of [`to_run`]) has every code cell run, and an
/// output in every cell that makes one (all but the imports and the assignments); else what
/// is missing.
pub fn check_run(nb: &Value) -> Result<usize, String> {
    let cells = nb["cells"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut code = 0;
    for (k, c) in cells.iter().enumerate() {
        if c["cell_type"] != "code" {
            continue;
        }
        code += 1;
        if !c["execution_count"].is_number() {
            return Err(format!("cell {k} has no execution count: {c}"));
        }
        let silent = k == 1 || k % 10 == 6;
        let outs = c["outputs"].as_array().map_or(0, Vec::len);
        if !silent && outs == 0 {
            return Err(format!("cell {k} has no output: {c}"));
        }
        if c["outputs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["output_type"] == "error")
        {
            return Err(format!("cell {k} failed: {c}"));
        }
    }
    Ok(code)
}
