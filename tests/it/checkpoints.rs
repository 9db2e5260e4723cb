//! Issue 14 acceptance for checkpoints, history by id and server identity, against the real
//! binary and real ipykernel: a namespace with an int, a dict of lists, a set, bytes, a
//! function and an open file checkpointed and restored into the restarted session (the first
//! four back, the last two named as skipped); a corrupted file refused with nothing loaded;
//! non-Python kernels refused; `get_history(latest_n)` / `get_history(run_id)`; and
//! `server_instance` differing between two server processes.

use crate::common::history::*;
use crate::common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_restores_the_data_into_a_restarted_session_and_names_what_it_skipped() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    create_session_with(&server, json!({"session_id": "s", "cwd": dir.path()})).await;
    exec_ok(
        &server,
        "s",
        "n = 12345678901234567890123\n\
         d = {'a': [1, 2.5, None], 'b': [], (1, 'k'): [True, 'x']}\n\
         st = {1, 'two', (3, b'\\x00')}\n\
         raw = b'\\x00\\xffbytes'\n\
         def f(x):\n    return x\n\
         fh = open('notes.txt', 'w')\n\
         class Loud:\n    def __repr__(self):\n        raise RuntimeError('repr called')\n\
         loud = [Loud()]\n\
         ring = []\nring.append(ring)\n\
         deep = cur = {}\n\
         for _ in range(60):\n    cur['k'] = {}\n    cur = cur['k']\n\
         del cur\n",
    )
    .await;
    let r = server
        .call(
            "checkpoint_session",
            json!({"session_id": "s", "path": "ck.json"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = structured(&r);
    assert_eq!(v["saved"], json!(["d", "n", "raw", "st"]), "{v}");
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for name in ["f", "fh", "Loud", "loud", "ring", "deep"] {
        assert!(skipped.contains(&name), "{name} not in skipped: {v}");
    }
    let reason = |name: &str| {
        v["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["reason"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(reason("f").contains("function"), "{v}");
    assert!(reason("fh").contains("TextIOWrapper"), "{v}");
    assert!(reason("loud").contains("Loud"), "{v}");
    assert!(reason("ring").contains("contains itself"), "{v}");
    assert!(reason("deep").contains("deeper"), "{v}");
    assert!(dir.path().join("ck.json").is_file());

    let r = server
        .call("restart_session", json!({"session_id": "s"}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = server
        .call(
            "restore_session",
            json!({"session_id": "s", "path": "ck.json"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(structured(&r)["restored"], json!(["d", "n", "raw", "st"]));
    let check = exec_ok(
        &server,
        "s",
        "print(n == 12345678901234567890123, d == {'a': [1, 2.5, None], 'b': [], (1, 'k'): [True, 'x']}, \
         st == {1, 'two', (3, b'\\x00')}, raw == b'\\x00\\xffbytes', type(d['a'][1]).__name__)\n\
         print('f' in globals(), 'fh' in globals())",
    )
    .await;
    assert_eq!(
        check["stdout"].as_str().unwrap(),
        "True True True True float\nFalse False\n",
        "{check}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_checkpoint_is_refused_with_nothing_loaded() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    create_session_with(&server, json!({"session_id": "s", "cwd": dir.path()})).await;
    exec_ok(&server, "s", "a = 1\nb = [1, 2]").await;
    let r = server
        .call(
            "checkpoint_session",
            json!({"session_id": "s", "path": "ck.json"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    exec_ok(&server, "s", "a = 'changed'\ndel b").await;

    // One bad value among good ones: the file is refused whole.
    let path = dir.path().join("ck.json");
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file["variables"]["z"] = json!(["int", "12x"]);
    std::fs::write(dir.path().join("bad.json"), file.to_string()).unwrap();
    let full = std::fs::read(&path).unwrap();
    std::fs::write(dir.path().join("cut.json"), &full[..full.len() / 2]).unwrap();
    for bad in ["bad.json", "cut.json"] {
        let r = server
            .call("restore_session", json!({"session_id": "s", "path": bad}))
            .await;
        assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{bad}: {}", text(&r));
        assert!(text(&r).contains("Nothing was loaded"), "{}", text(&r));
    }
    let r = exec_ok(&server, "s", "print(a, 'b' in globals())").await;
    assert_eq!(r["stdout"], "changed False\n", "{r}");

    let r = server
        .call(
            "restore_session",
            json!({"session_id": "s", "path": "missing.json"}),
        )
        .await;
    assert_eq!(error_code(&r), "IO_ERROR", "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_read_by_latest_n_and_by_run_id() {
    let server = Server::start().await;
    server.create_session("s").await;
    let mut ids = Vec::new();
    for code in ["a = 0", "a = 1", "a = 2", "a = 3"] {
        ids.push(
            exec_ok(&server, "s", code).await["run_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let h = structured(
        &server
            .call("get_history", json!({"session_id": "s", "latest_n": 2}))
            .await,
    );
    assert_eq!(codes(&h), ["a = 2", "a = 3"], "{h}");
    assert_eq!(indices(&h), [2, 3]);
    let h = structured(
        &server
            .call("get_history", json!({"session_id": "s", "run_id": ids[1]}))
            .await,
    );
    assert_eq!(codes(&h), ["a = 1"], "{h}");
    assert_eq!(indices(&h), [1]);
    let h = structured(
        &server
            .call("get_history", json!({"session_id": "s", "latest_n": 10}))
            .await,
    );
    assert_eq!(indices(&h), [0, 1, 2, 3]);

    let r = server
        .call(
            "get_history",
            json!({"session_id": "s", "run_id": "run-nope"}),
        )
        .await;
    assert_eq!(error_code(&r), "EXECUTION_NOT_FOUND", "{}", text(&r));
    for mixed in [
        json!({"session_id": "s", "latest_n": 2, "start": 0}),
        json!({"session_id": "s", "run_id": ids[0], "end": 2}),
        json!({"session_id": "s", "run_id": ids[0], "latest_n": 1}),
        json!({"session_id": "s", "latest_n": 0}),
    ] {
        let r = server.call("get_history", mixed.clone()).await;
        assert_eq!(error_code(&r), "INVALID_ARGUMENT", "{mixed}: {}", text(&r));
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_process_has_its_own_server_instance() {
    let one = Server::start().await;
    let two = Server::start().await;
    let a = structured(&one.call("server_info", json!({})).await);
    let b = structured(&two.call("server_info", json!({})).await);
    let id = |v: &Value| {
        v["server_instance"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(id(&a).len(), 32, "{a}");
    assert_ne!(id(&a), id(&b));
    assert!(a["started_at"].is_string(), "{a}");
    let again = structured(&one.call("server_info", json!({})).await);
    assert_eq!(id(&again), id(&a));
    let info = one.create_session("s").await;
    assert_eq!(info["server_instance"], a["server_instance"], "{info}");
    assert_eq!(info["server_started_at"], a["started_at"]);
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_of_other_kernels_point_at_rerun_history() {
    let server = Server::start().await;
    if !structured(&server.call("list_kernels", json!({})).await)["kernels"]
        .to_string()
        .contains("\"bash\"")
    {
        crate::common::skip(
            "no bash kernelspec (`make kernels` installs it): only the Python path is checked",
        );
        server.shutdown().await;
        return;
    }
    server.create_session_on("b", "bash").await;
    let r = server
        .call(
            "checkpoint_session",
            json!({"session_id": "b", "path": "x.json"}),
        )
        .await;
    assert_eq!(error_code(&r), "UNSUPPORTED", "{}", text(&r));
    assert!(text(&r).contains("rerun_history"), "{}", text(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_stays_within_its_size_limit_and_says_what_did_not_fit() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    create_session_with(&server, json!({"session_id": "s", "cwd": dir.path()})).await;
    // 6 MB fits; 9 MB more does not: the variable that does not fit is skipped, not the call.
    exec_ok(
        &server,
        "s",
        "a_fits = 'x' * 6_000_000\nb_big = b'y' * 9_000_000\nc_small = [1, 2, 3]",
    )
    .await;
    let t0 = std::time::Instant::now();
    let r = server
        .call(
            "checkpoint_session",
            json!({"session_id": "s", "path": "big.json"}),
        )
        .await;
    let took = t0.elapsed();
    assert!(!is_error(&r), "{}", text(&r));
    let v = structured(&r);
    assert_eq!(v["saved"], json!(["a_fits", "c_small"]), "{v}");
    assert_eq!(v["skipped"][0]["name"], "b_big", "{v}");
    assert!(
        v["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("bytes left"),
        "{v}"
    );
    let size = std::fs::metadata(dir.path().join("big.json"))
        .unwrap()
        .len();
    assert!(size <= 8 * 1024 * 1024, "{size}");
    server
        .call("restart_session", json!({"session_id": "s"}))
        .await;
    let t1 = std::time::Instant::now();
    let r = server
        .call(
            "restore_session",
            json!({"session_id": "s", "path": "big.json"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    eprintln!(
        "checkpoint of {size} bytes took {took:?}; restore took {:?}",
        t1.elapsed()
    );
    let r = exec_ok(&server, "s", "print(len(a_fits), c_small)").await;
    assert_eq!(r["stdout"], "6000000 [1, 2, 3]\n", "{r}");
    server.shutdown().await;
}
