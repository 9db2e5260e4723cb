use super::*;

fn text(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

#[test]
fn a_pre_4_5_notebook_gets_positional_ids_and_is_written_as_4_5() {
    let nb = Notebook::parse(&text(json!({
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# T\n", "more"]},
            {"cell_type": "code", "metadata": {}, "source": "1+1", "outputs": [], "execution_count": null},
        ],
        "metadata": {"kernelspec": {"name": "python3"}},
        "nbformat": 4, "nbformat_minor": 2,
    })))
    .unwrap();
    assert_eq!(
        nb.cells().iter().map(Cell::id).collect::<Vec<_>>(),
        vec!["cell-1", "cell-2"]
    );
    assert_eq!(nb.cells()[0].source(), "# T\nmore");
    assert_eq!(nb.kernelspec_name(), Some("python3"));
    let again = Notebook::parse(nb.to_text().as_bytes()).unwrap();
    assert_eq!(again.top()["nbformat_minor"], json!(5));
    assert_eq!(again.cells()[1].id(), "cell-2");
}

#[test]
fn unknown_keys_survive_a_read_and_a_write() {
    let nb = Notebook::parse(&text(json!({
        "cells": [{"cell_type": "raw", "id": "r1", "metadata": {"tags": ["x"]}, "source": "", "attachments": {"a.png": {}}, "x_future": 1}],
        "metadata": {"custom": {"k": 1}},
        "nbformat": 4, "nbformat_minor": 5, "extra_top": true,
    })))
    .unwrap();
    let back: Value = serde_json::from_str(&nb.to_text()).unwrap();
    assert_eq!(back["extra_top"], json!(true));
    assert_eq!(back["cells"][0]["x_future"], json!(1));
    assert_eq!(back["cells"][0]["attachments"], json!({"a.png": {}}));
    assert_eq!(back["metadata"]["custom"], json!({"k": 1}));
}

#[test]
fn written_text_is_jupyters_layout_sorted_one_space_lines_split() {
    let mut nb = Notebook::empty(
        json!({"name": "python3", "display_name": "Python 3", "language": "python"}),
    );
    nb.cells_mut()
        .push(Cell::new(CellType::Code, "a".into(), "x = 1\nprint(x)"));
    nb.cells_mut()[0].set_run(
        vec![
            json!({"output_type": "stream", "name": "stdout", "text": "1\n2\n"}),
            json!({"output_type": "display_data", "metadata": {}, "data": {"text/plain": "a\nb", "image/png": "AAAA\n", "application/json": {"k": 1}}}),
        ],
        Some(1),
    );
    let t = nb.to_text();
    assert!(
        t.starts_with("{\n \"cells\": [\n  {\n   \"cell_type\": \"code\""),
        "{t}"
    );
    assert!(t.ends_with("}\n"));
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["cells"][0]["source"], json!(["x = 1\n", "print(x)"]));
    assert_eq!(v["cells"][0]["outputs"][0]["text"], json!(["1\n", "2\n"]));
    let data = &v["cells"][0]["outputs"][1]["data"];
    assert_eq!(data["text/plain"], json!(["a\n", "b"]));
    assert_eq!(
        data["image/png"],
        json!("AAAA\n"),
        "binary data stays one string"
    );
    assert_eq!(data["application/json"], json!({"k": 1}));
}

#[test]
fn split_lines_matches_pythons_splitlines_keepends() {
    let got = split_lines("a\r\nb\rc\u{2028}d\x0ce\n\nf");
    assert_eq!(
        got,
        json!(["a\r\n", "b\r", "c\u{2028}", "d\x0c", "e\n", "\n", "f"])
    );
    assert_eq!(split_lines(""), json!([]));
}

#[test]
fn malformed_files_are_refused_with_what_is_wrong() {
    let cases: [(&[u8], &str); 7] = [
        (b"{\"cells\": [", "not valid JSON"),
        (b"[]", "not an nbformat"),
        (br#"{"nbformat": 3, "worksheets": []}"#, "nbconvert"),
        (br#"{"nbformat": 5, "cells": []}"#, "newer"),
        (br#"{"nbformat": 4, "metadata": {}}"#, "no list of cells"),
        (
            br#"{"nbformat": 4, "cells": [{"cell_type": "code"}]}"#,
            "cell 0",
        ),
        (
            br#"{"nbformat": 4, "cells": [{"cell_type": "sql", "source": ""}]}"#,
            "unknown cell_type",
        ),
    ];
    for (bytes, want) in cases {
        let e = Notebook::parse(bytes).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn duplicate_or_invalid_ids_are_replaced_and_valid_ones_kept() {
    let nb = Notebook::parse(&text(json!({
        "cells": [
            {"cell_type": "code", "id": "same", "metadata": {}, "source": "", "outputs": [], "execution_count": null},
            {"cell_type": "code", "id": "same", "metadata": {}, "source": "", "outputs": [], "execution_count": null},
            {"cell_type": "code", "id": "has space", "metadata": {}, "source": "", "outputs": [], "execution_count": null},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    })))
    .unwrap();
    let ids: Vec<&str> = nb.cells().iter().map(Cell::id).collect();
    assert_eq!(ids[0], "same");
    assert_eq!(&ids[1..], ["cell-2", "cell-3"]);
}
