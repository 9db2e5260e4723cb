use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use super::*;
use crate::notebook::edit::{EditError, EditOp, apply};

#[derive(Debug)]
enum TestError {
    Edit(EditError),
    Notebook(NotebookError),
}

impl From<NotebookError> for TestError {
    fn from(e: NotebookError) -> TestError {
        TestError::Notebook(e)
    }
}

fn ops(v: Value) -> Vec<EditOp> {
    serde_json::from_value(v).unwrap()
}

fn write_nb(path: &Path, cells: &[(&str, &str)]) {
    let cells: Vec<Value> = cells
        .iter()
        .map(|(id, s)| json!({"cell_type": "code", "id": id, "metadata": {}, "source": s, "outputs": [], "execution_count": null}))
        .collect();
    let v = json!({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5});
    std::fs::write(path, v.to_string()).unwrap();
}

fn sources_on_disk(path: &Path) -> Vec<String> {
    let nb = Notebook::parse(&std::fs::read(path).unwrap()).unwrap();
    nb.cells().iter().map(|c| c.source()).collect()
}

async fn edit(f: &mut NotebookFile, v: Value) -> Result<Written, TestError> {
    let ops = ops(v);
    f.change(|nb| apply(nb, &ops).map_err(TestError::Edit))
        .await
        .map(|(_, w)| w)
}

fn nbformat_validate(file: &Path) {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = Command::new(python)
        .args([
            "-c",
            "import nbformat, sys; nbformat.validate(nbformat.read(sys.argv[1], as_version=4))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn an_edit_is_written_atomically_keeping_the_files_mode_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.ipynb");
    write_nb(&path, &[("a", "1"), ("b", "2")]);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut f = NotebookFile::open(&path, Reach::Anywhere).await.unwrap();
    let w = edit(
        &mut f,
        json!([{"op": "insert", "source": "x = 1\ny = 2", "after": "a"}]),
    )
    .await
    .unwrap();
    assert!(w.wrote && !w.merged_theirs);
    assert_eq!(sources_on_disk(&path), ["1", "x = 1\ny = 2", "2"]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    nbformat_validate(&path);
}

#[tokio::test]
async fn a_change_that_changes_nothing_does_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.ipynb");
    write_nb(&path, &[("a", "1")]);
    let mut f = NotebookFile::open(&path, Reach::Anywhere).await.unwrap();
    edit(&mut f, json!([{"op": "replace", "id": "a", "source": "1"}]))
        .await
        .unwrap();
    // The first write puts the file in Jupyter's layout; the same change again writes nothing.
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let w = edit(&mut f, json!([{"op": "replace", "id": "a", "source": "1"}]))
        .await
        .unwrap();
    assert!(!w.wrote);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
}

#[tokio::test]
async fn a_persons_save_to_another_cell_is_merged_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.ipynb");
    write_nb(&path, &[("a", "1"), ("b", "2")]);
    let mut f = NotebookFile::open(&path, Reach::Anywhere).await.unwrap();
    write_nb(&path, &[("a", "1"), ("b", "person's")]);
    let w = edit(
        &mut f,
        json!([{"op": "replace", "id": "a", "source": "agent's"}]),
    )
    .await
    .unwrap();
    assert!(w.wrote && w.merged_theirs);
    assert_eq!(sources_on_disk(&path), ["agent's", "person's"]);
}

#[tokio::test]
async fn the_same_cell_changed_by_both_keeps_the_persons_file_and_saves_ours_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.ipynb");
    write_nb(&path, &[("a", "1"), ("b", "2")]);
    let mut f = NotebookFile::open(&path, Reach::Anywhere).await.unwrap();
    write_nb(&path, &[("a", "1"), ("b", "person's")]);
    let persons = std::fs::read(&path).unwrap();
    let e = edit(
        &mut f,
        json!([{"op": "replace", "id": "b", "source": "agent's"}]),
    )
    .await
    .unwrap_err();
    let TestError::Notebook(NotebookError::Conflict { cells, kept, .. }) = e else {
        panic!("{e:?}")
    };
    assert_eq!(cells, vec!["b"]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        persons,
        "the person's file is untouched"
    );
    assert_eq!(kept, dir.path().join("a.kernel-mcp-1.ipynb"));
    assert_eq!(sources_on_disk(&kept), ["1", "agent's"]);
    // The agent now sees the person's version and can redo its change.
    assert_eq!(f.base().cells()[1].source(), "person's");
    edit(
        &mut f,
        json!([{"op": "replace", "id": "b", "source": "agent's"}]),
    )
    .await
    .unwrap();
    assert_eq!(sources_on_disk(&path), ["1", "agent's"]);
}

#[tokio::test]
async fn a_failed_edit_and_a_broken_file_on_disk_leave_the_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.ipynb");
    write_nb(&path, &[("a", "1")]);
    let mut f = NotebookFile::open(&path, Reach::Anywhere).await.unwrap();
    let original = std::fs::read(&path).unwrap();
    assert!(matches!(
        edit(&mut f, json!([{"op": "delete", "id": "zz"}])).await,
        Err(TestError::Edit(EditError::UnknownCell { .. }))
    ));
    assert_eq!(std::fs::read(&path).unwrap(), original);
    std::fs::write(&path, b"{\"cells\": [").unwrap();
    let e = edit(&mut f, json!([{"op": "replace", "id": "a", "source": "2"}]))
        .await
        .unwrap_err();
    assert!(
        matches!(e, TestError::Notebook(NotebookError::Invalid { .. })),
        "{e:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"cells\": [");
}

#[tokio::test]
async fn fifos_directories_and_oversized_files_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("p.ipynb");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let e = NotebookFile::open(&fifo, Reach::Anywhere)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("FIFO"), "{e}");
    let e = NotebookFile::open(dir.path(), Reach::Anywhere)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("directory"), "{e}");
    let big = dir.path().join("big.ipynb");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_NOTEBOOK_BYTES as u64 + 1)
        .unwrap();
    let e = NotebookFile::open(&big, Reach::Anywhere)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("over the limit"), "{e}");
    let e = NotebookFile::open(&dir.path().join("none.ipynb"), Reach::Anywhere)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
}

#[tokio::test]
async fn a_symlinked_notebook_is_written_through_to_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.ipynb");
    let link = dir.path().join("link.ipynb");
    write_nb(&target, &[("a", "1")]);
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut f = NotebookFile::open(&link, Reach::Anywhere).await.unwrap();
    edit(&mut f, json!([{"op": "replace", "id": "a", "source": "2"}]))
        .await
        .unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(sources_on_disk(&target), ["2"]);
}

#[tokio::test]
async fn refresh_sees_a_change_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.ipynb");
    write_nb(&path, &[("a", "1")]);
    let mut f = NotebookFile::open(&path, Reach::Anywhere).await.unwrap();
    assert!(!f.refresh().await.unwrap());
    write_nb(&path, &[("a", "1"), ("b", "new")]);
    assert!(f.refresh().await.unwrap());
    assert_eq!(f.base().cells().len(), 2);
}
