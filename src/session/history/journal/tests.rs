//! The journal's round trips, torn lines, naming, location, mode and pruning.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::session::history::HistoryOutput;
use crate::session::history::sample_entry as entry;
use crate::session::types::{ErrorInfo, RunStatus};

fn header(id: &str, created_at: &str) -> JournalHeader {
    JournalHeader {
        session_id: id.to_string(),
        kernel: "python3".into(),
        display_name: "Python 3 (ipykernel)".into(),
        language: "python".into(),
        created_at: created_at.into(),
        private: false,
        sandbox: Default::default(),
        cwd: None,
    }
}

#[test]
fn a_display_update_record_replays_onto_earlier_entries_and_old_lines_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::create(dir.path(), &header("s", "2025-01-02T03:04:05Z")).unwrap();
    let shown = |text: &str| HistoryOutput {
        kind: "display_data".into(),
        data: serde_json::json!({"text/plain": text})
            .as_object()
            .unwrap()
            .clone(),
        display_id: Some("d1".into()),
        ..Default::default()
    };
    let mut first = entry("r1", "display", RunStatus::Ok);
    first.outputs.push(shown("v1"));
    j.append(&JournalRecord::Entry(first)).unwrap();
    j.append(&JournalRecord::DisplayUpdated(shown("v2")))
        .unwrap();
    // A line from before `order` and `display_id` were kept.
    let old = r#"{"entry":{"run_id":"r0","code":"x","status":"ok","execution_count":1,"generation":1,"stdout":"","stderr":"","result":null,"error":null,"outputs":[{"kind":"display_data","data":{"text/plain":"t"}}],"finished_at":"2025-01-02T03:04:05Z"}}"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(j.path())
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{old}\n").as_bytes()))
        .unwrap();
    let got = read_journal(j.path()).unwrap();
    assert_eq!(got.entries[0].outputs[0].data["text/plain"], "v2");
    assert_eq!(got.entries[1].run_id, "r0");
    assert_eq!(got.entries[1].order, None);
    assert_eq!(got.entries[1].outputs[0].display_id, None);
}

#[test]
fn journal_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let head = header("my-sess", "2025-01-02T03:04:05.123Z");
    let mut j = Journal::create(dir.path(), &head).unwrap();
    let name = j.path().file_name().unwrap().to_str().unwrap().to_string();
    let stamp = journal_name_stamp(name.strip_prefix("my-sess-").unwrap());
    assert!(stamp.is_some(), "unexpected journal name {name}");
    let mode = fs::metadata(j.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let e = |id: &str| entry(id, &format!("x = '{id}'"), RunStatus::Ok);
    j.append(&JournalRecord::Entry(e("r1"))).unwrap();
    j.append(&JournalRecord::LanguageInfo(json_info(".py")))
        .unwrap();
    j.append(&JournalRecord::Cleared).unwrap();
    for id in ["r2", "r3", "r4", "r5"] {
        j.append(&JournalRecord::Entry(e(id))).unwrap();
    }
    j.append(&JournalRecord::Deleted(vec!["r3".into(), "r5".into()]))
        .unwrap();
    let with_error = HistoryEntry {
        error: Some(ErrorInfo {
            ename: "E".into(),
            evalue: "v".into(),
            traceback: vec!["tb".into()],
        }),
        outputs: vec![HistoryOutput {
            kind: "execute_result".into(),
            data: serde_json::json!({
                "text/plain": "1",
                "text/html": "<b>1</b>",
                "application/json": {"n": [1, 2]},
            })
            .as_object()
            .unwrap()
            .clone(),
            metadata: serde_json::json!({"application/json": {"expanded": false}})
                .as_object()
                .unwrap()
                .clone(),
            ..Default::default()
        }],
        ..entry("r6", "1/0", RunStatus::Error)
    };
    j.append(&JournalRecord::Entry(with_error.clone())).unwrap();

    let text = fs::read_to_string(j.path()).unwrap();
    assert_eq!(
        serde_json::from_str::<JournalHeader>(text.lines().next().unwrap()).unwrap(),
        head
    );
    let got = read_journal(j.path()).unwrap();
    assert_eq!(got.header, head);
    assert_eq!(got.entries, vec![e("r2"), e("r4"), with_error]);
    assert_eq!(got.language_info, json_info(".py"));
}

#[test]
fn journals_from_before_whole_bundles_still_load() {
    // An entry line as written when outputs kept only text/plain and the image.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old-20250101T000000-abcd.jsonl");
    let head = serde_json::to_string(&header("old", "2025-01-01T00:00:00Z")).unwrap();
    let line = r#"{"entry":{"run_id":"r1","code":"plot()","status":"ok","execution_count":1,"generation":1,"stdout":"","stderr":"","result":null,"error":null,"outputs":[{"kind":"display_data","data":{"image/png":"iVBORw0KGgo=","text/plain":"<Figure size 640x480 with 1 Axes>"}}],"finished_at":"2025-01-01T00:00:01Z"}}"#;
    fs::write(&path, format!("{head}\n{line}\n")).unwrap();
    let got = read_journal(&path).unwrap();
    assert_eq!(got.entries.len(), 1);
    let output = &got.entries[0].outputs[0];
    assert_eq!(output.data["image/png"], "iVBORw0KGgo=");
    assert_eq!(
        output.data["text/plain"],
        "<Figure size 640x480 with 1 Axes>"
    );
    assert!(output.metadata.is_empty());
    // Written back, an empty metadata is left out: the line is the same as before.
    let again = serde_json::to_string(&JournalRecord::Entry(got.entries[0].clone())).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&again).unwrap(),
        serde_json::from_str::<Value>(line).unwrap()
    );
}

fn json_info(ext: &str) -> Value {
    serde_json::json!({"name": "python", "file_extension": ext})
}

#[test]
fn journal_torn_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::create(dir.path(), &header("s", "2025-01-01T00:00:00Z")).unwrap();
    j.append(&JournalRecord::Entry(entry("r1", "a = 1", RunStatus::Ok)))
        .unwrap();
    let path = j.path().to_path_buf();
    drop(j);
    let mut text = fs::read_to_string(&path).unwrap();
    // A crash mid-write: the last line is cut short.
    let full =
        serde_json::to_string(&JournalRecord::Entry(entry("r2", "b", RunStatus::Ok))).unwrap();
    let torn = format!("{text}{}", &full[..full.len() / 2]);
    fs::write(&path, &torn).unwrap();
    let got = read_journal(&path).unwrap();
    assert_eq!(got.entries, vec![entry("r1", "a = 1", RunStatus::Ok)]);
    assert_eq!(got.language_info, Value::Null);
    assert!(got.torn_tail, "the torn line is reported");

    // Damage in the middle: skipped, later records still apply.
    text.push_str("{not json\n");
    text.push_str(&full);
    text.push('\n');
    fs::write(&path, &text).unwrap();
    let got = read_journal(&path).unwrap();
    let ids: Vec<&str> = got.entries.iter().map(|e| e.run_id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2"]);

    // No valid header: an error, not an empty history.
    fs::write(&path, "{\"session_id\": \"s\"").unwrap();
    let err = read_journal(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    fs::write(&path, "").unwrap();
    assert!(read_journal(&path).is_err());
}

#[test]
fn latest_journal_picks_newest_of_that_session() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, id: &str| {
        let head = serde_json::to_string(&header(id, "2025-01-01T00:00:00Z")).unwrap();
        fs::write(dir.path().join(name), format!("{head}\n")).unwrap();
    };
    write("a-20240101T000000-abcd.jsonl", "a");
    write("a-20250101T000000-0123.jsonl", "a");
    write("a-20241231T235959-ffff.jsonl", "a");
    // Newer, but another session's (`a-b`, whose names also start with `a-`).
    write("a-b-20990101T000000-ffff.jsonl", "a-b");
    write("a-b-20980101T000000-ffff.jsonl", "a-b");
    // Newer and named like `a`'s, but the header says otherwise.
    write("a-20990101T000000-eeee.jsonl", "x");
    // Not a journal name.
    write("a-20990101T000000-eeee.jsonl.bak", "a");
    let latest = |id: &str| {
        latest_journal(dir.path(), id).map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
    };
    assert_eq!(latest("a").as_deref(), Some("a-20250101T000000-0123.jsonl"));
    assert_eq!(
        latest("a-b").as_deref(),
        Some("a-b-20990101T000000-ffff.jsonl")
    );
    assert_eq!(latest("b"), None);
    assert_eq!(latest_journal(&dir.path().join("missing"), "a"), None);

    // Two journals in the same second: the later header wins.
    let first = Journal::create(dir.path(), &header("c", "2025-01-01T00:00:00.100Z")).unwrap();
    let second = Journal::create(dir.path(), &header("c", "2025-01-01T00:00:00.200Z")).unwrap();
    let got = latest_journal(dir.path(), "c").unwrap();
    if first.path().file_name().unwrap().to_str().unwrap()[2..17]
        == second.path().file_name().unwrap().to_str().unwrap()[2..17]
    {
        assert_eq!(got, second.path());
    }
}

#[test]
fn a_private_journal_is_never_found_by_name_and_old_headers_are_public() {
    let dir = tempfile::tempdir().unwrap();
    let public = Journal::create(dir.path(), &header("default", "2025-01-01T00:00:00Z")).unwrap();
    let private = JournalHeader {
        private: true,
        ..header("default", "2099-01-01T00:00:00Z")
    };
    let mine = Journal::create(dir.path(), &private).unwrap();
    assert_eq!(
        latest_journal(dir.path(), "default").as_deref(),
        Some(public.path())
    );
    let line = fs::read_to_string(mine.path()).unwrap();
    assert!(line.contains(r#""private":true"#), "{line}");
    let plain = fs::read_to_string(public.path()).unwrap();
    assert!(!plain.contains("private"), "{plain}");
    let old: JournalHeader = serde_json::from_str(
        r#"{"session_id":"a","kernel":"k","display_name":"d","language":"l","created_at":"t"}"#,
    )
    .unwrap();
    assert!(!old.private);
}

#[test]
fn journal_dir_location_and_mode() {
    let os = |s: &str| std::ffi::OsString::from(s);
    assert_eq!(
        journal_dir_from(Some(&os("/x/state")), Some(&os("/home/u"))),
        Some(PathBuf::from("/x/state/kernel-mcp/history"))
    );
    assert_eq!(
        journal_dir_from(Some(&os("relative")), Some(&os("/home/u"))),
        Some(PathBuf::from("/home/u/.local/state/kernel-mcp/history"))
    );
    assert_eq!(
        journal_dir_from(None, Some(&os("/home/u"))),
        Some(PathBuf::from("/home/u/.local/state/kernel-mcp/history"))
    );
    assert_eq!(journal_dir_from(None, None), None);

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state/kernel-mcp/history");
    create_private_dir(&dir).unwrap();
    create_private_dir(&dir).unwrap();
    for d in [&dir, &tmp.path().join("state")] {
        let mode = fs::metadata(d).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", d.display());
    }
}

#[test]
fn create_rejects_unusable_ids() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["", "a/b"] {
        let err = Journal::create(dir.path(), &header(id, "2025-01-01T00:00:00Z"))
            .err()
            .unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}

#[test]
fn pruning_removes_only_old_journals() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old-20200101T000000-abcd.jsonl");
    let new = dir.path().join("new-20260101T000000-abcd.jsonl");
    let other = dir.path().join("notes.txt");
    for p in [&old, &new, &other] {
        std::fs::write(p, "{}\n").unwrap();
    }
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(90 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&other)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    assert_eq!(prune_journals(dir.path(), JOURNAL_RETENTION), 1);
    assert!(!old.exists() && new.exists() && other.exists());
}
