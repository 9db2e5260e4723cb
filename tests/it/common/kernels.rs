//! Helpers for the real-kernel tests (`tests/kernels_*.rs`, issue 5): one conformance walk
//! that every kernel must pass (state, stdout, error, interrupt, restart, destroy, no process
//! left), plus what the kernel-specific tests share.
//!
//! A kernel that is not installed fails the test with the reason and the install command —
//! never a silent skip: `make kernels` (run by `make test`) installs them all.
//!
//! [`Checks`] collects soft failures so one run reports every broken step of the walk, not
//! only the first.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

/// How each kernel gets installed, for the "not installed" failure message.
pub fn install_hint(kernel: &str) -> &'static str {
    match kernel {
        "ir" => {
            "Debian's r-cran-irkernel (`apt-get install --no-install-recommends r-cran-irkernel`), \
             which installs /usr/share/jupyter/kernels/ir"
        }
        "octave" => {
            "Debian's octave plus `pip install octave_kernel` and \
             `python -m octave_kernel install --sys-prefix` in .venv"
        }
        "bash" => {
            "`pip install bash_kernel` and `python -m bash_kernel.install --sys-prefix` in .venv"
        }
        "xpython" => "`pip install xeus-python` in .venv (the wheel ships the xpython kernelspec)",
        _ => "ipykernel in .venv (`make .venv`)",
    }
}

/// Panics loudly unless `list_kernels` reports `kernel`: names what is installed, what
/// to install and that `make kernels` does it. Returns the kernel's `list_kernels` entry.
pub async fn require_kernel(server: &Server, kernel: &str) -> Value {
    let r = server.call("list_kernels", json!({})).await;
    let listed = structured(&r);
    let kernels = listed["kernels"].as_array().cloned().unwrap_or_default();
    if let Some(k) = kernels.iter().find(|k| k["name"] == kernel) {
        return k.clone();
    }
    let names: Vec<&str> = kernels.iter().filter_map(|k| k["name"].as_str()).collect();
    panic!(
        "KERNEL NOT INSTALLED: kernelspec '{kernel}' is not available to kernel-mcp, so this test \
         cannot run. Install it with `make kernels` (it needs {}). Installed kernels: {names:?}. \
         list_kernels said: {listed}",
        install_hint(kernel)
    );
}

/// `create_session(session_id, kernel)`; panics (with the server's words) when it fails.
pub async fn create_kernel_session(server: &Server, session: &str, kernel: &str) -> Value {
    server.create_session_on(session, kernel).await
}

/// `execute` with extra arguments (`timeout_s`, `wait_s`, `stdin`…); returns the structured
/// result and how long the call took.
pub async fn exec_args(
    server: &Server,
    session: &str,
    code: &str,
    extra: Value,
) -> (Value, Duration) {
    let mut args = json!({"session_id": session, "code": code});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            a.insert(k.clone(), v.clone());
        }
    }
    let started = Instant::now();
    let r = server.call("execute", args).await;
    (structured(&r), started.elapsed())
}

/// Everything a reader of the result would see as text: stdout, stderr, the result, each
/// display output's text and the error (ename, evalue, traceback), newline-separated.
pub fn rendered(r: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    for key in ["stdout", "stderr", "result"] {
        if let Some(t) = r[key].as_str() {
            parts.push(t.to_string());
        }
    }
    for o in r["outputs"].as_array().into_iter().flatten() {
        if let Some(t) = o["text"].as_str() {
            parts.push(t.to_string());
        }
    }
    let e = &r["error"];
    for key in ["ename", "evalue"] {
        if let Some(t) = e[key].as_str() {
            parts.push(t.to_string());
        }
    }
    for t in e["traceback"].as_array().into_iter().flatten() {
        if let Some(t) = t.as_str() {
            parts.push(t.to_string());
        }
    }
    parts.join("\n")
}

/// Soft assertions: record every failed step, panic once at the end with all of them.
#[derive(Default)]
pub struct Checks {
    kernel: String,
    failures: Vec<String>,
}

impl Checks {
    pub fn new(kernel: &str) -> Checks {
        Checks {
            kernel: kernel.to_string(),
            failures: Vec::new(),
        }
    }

    /// Record `msg` unless `ok`; returns `ok`.
    pub fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) -> bool {
        if !ok {
            let m = msg();
            eprintln!("[{}] FAILED: {m}", self.kernel);
            self.failures.push(m);
        }
        ok
    }

    /// Panic listing every failure (with the server's stderr tail), if any.
    pub fn finish(self, server: &Server) {
        if !self.failures.is_empty() {
            panic!(
                "kernel '{}': {} step(s) failed:\n- {}\n--- server stderr (tail) ---\n{}",
                self.kernel,
                self.failures.len(),
                self.failures.join("\n- "),
                server.stderr_tail()
            );
        }
    }
}

/// The code snippets of the conformance walk, in one kernel's language.
pub struct Lang {
    /// Kernelspec name.
    pub kernel: &'static str,
    /// Sets the variable `x` to 31337 (may print nothing or echo it).
    pub set_state: &'static str,
    /// Shows `x` (its text must contain 31337).
    pub read_state: &'static str,
    /// Writes `hello-stdout` to stdout.
    pub print: &'static str,
    /// Fails; the result must be `status: "error"` with `error_marker` in its text.
    pub raise: &'static str,
    pub error_marker: &'static str,
    /// Loops forever (busy), to be interrupted.
    pub long_loop: &'static str,
    /// The kernel is known to exit on SIGINT (xeus-python 0.19): then the interrupted run
    /// may end `kernel_died` and the next run may have `state_reset` (with a notice).
    pub may_die_on_interrupt: bool,
}

/// The acceptance walk for one kernel (issue 5, first bullet): create a session, set state,
/// read it back in a second call, print to stdout, raise an error, interrupt a long loop
/// (usable afterwards), restart, destroy; no kernel process left.
pub async fn conformance(lang: &Lang) {
    let server = Server::start().await;
    let spec = require_kernel(&server, lang.kernel).await;
    let mut c = Checks::new(lang.kernel);
    let sid = format!("conf-{}", lang.kernel);
    let sid = sid.as_str();

    let info = create_kernel_session(&server, sid, lang.kernel).await;
    c.check(info["kernel"] == lang.kernel, || {
        format!(
            "create_session: SessionInfo.kernel is not '{}': {info}",
            lang.kernel
        )
    });
    c.check(info["language"] == spec["language"], || {
        format!("create_session: language differs from list_kernels ({spec}): {info}")
    });
    c.check(info["generation"] == 1, || {
        format!("create_session: generation != 1: {info}")
    });

    // State survives between calls.
    let (set, _) = exec_args(&server, sid, lang.set_state, json!({})).await;
    c.check(status(&set) == "ok", || {
        format!("set state `{}`: status != ok: {set}", lang.set_state)
    });
    let (read, _) = exec_args(&server, sid, lang.read_state, json!({})).await;
    c.check(
        status(&read) == "ok" && rendered(&read).contains("31337"),
        || {
            format!(
                "read state back `{}`: expected ok with 31337 in the text: {read}",
                lang.read_state
            )
        },
    );

    // stdout.
    let (out, _) = exec_args(&server, sid, lang.print, json!({})).await;
    c.check(
        status(&out) == "ok"
            && out["stdout"]
                .as_str()
                .unwrap_or("")
                .contains("hello-stdout"),
        || {
            format!(
                "print `{}`: expected ok with hello-stdout in stdout: {out}",
                lang.print
            )
        },
    );

    // An error.
    let (err, took) = exec_args(&server, sid, lang.raise, json!({"wait_s": 30})).await;
    c.check(status(&err) == "error", || {
        format!(
            "error `{}`: status is not \"error\" (took {took:?}): {err}",
            lang.raise
        )
    });
    c.check(rendered(&err).contains(lang.error_marker), || {
        format!(
            "error `{}`: '{}' not in the rendered text: {err}",
            lang.raise, lang.error_marker
        )
    });
    c.check(!err["error"].is_null(), || {
        format!("error `{}`: the error field is null: {err}", lang.raise)
    });
    let (after_err, _) = exec_args(&server, sid, lang.print, json!({})).await;
    c.check(
        status(&after_err) == "ok" && rendered(&after_err).contains("hello-stdout"),
        || format!("print after the error: expected ok with hello-stdout: {after_err}"),
    );

    // Interrupt a long loop; the session stays usable.
    let (running, _) = exec_args(&server, sid, lang.long_loop, json!({"wait_s": 2})).await;
    c.check(status(&running) == "running", || {
        format!(
            "long loop `{}`: expected running after wait_s=2: {running}",
            lang.long_loop
        )
    });
    if let Some(run_id) = running["run_id"].as_str().map(str::to_string) {
        let t0 = Instant::now();
        let r = server
            .call("interrupt_session", json!({"session_id": sid}))
            .await;
        c.check(!is_error(&r), || {
            format!("interrupt_session is an error: {}", dump(&r))
        });
        let info = structured(&r);
        c.check(info["interrupted_run_id"] == run_id.as_str(), || {
            format!("interrupt_session: interrupted_run_id != {run_id}: {info}")
        });
        let r = server
            .call("get_execution", json!({"run_id": run_id, "wait_s": 15}))
            .await;
        let ended = t0.elapsed();
        let done = structured(&r);
        let st = status(&done);
        eprintln!(
            "[{}] interrupted loop ended after {ended:?}: {done}",
            lang.kernel
        );
        let allowed: &[&str] = if lang.may_die_on_interrupt {
            &["interrupted", "kernel_died"]
        } else {
            &["interrupted"]
        };
        c.check(allowed.contains(&st), || {
            format!("interrupted loop: status '{st}' not in {allowed:?} ({ended:?} after interrupt_session): {done}")
        });
        c.check(ended < Duration::from_secs(10), || {
            format!("interrupted loop took {ended:?} to end (want < 10 s): {done}")
        });
        if st == "running" {
            // Do not leave it spinning for the rest of the walk.
            let _ = server
                .call("cancel_execution", json!({"run_id": run_id}))
                .await;
        }
    }
    let (after, _) = exec_args(&server, sid, lang.read_state, json!({"wait_s": 30})).await;
    eprintln!("[{}] first call after the interrupt: {after}", lang.kernel);
    if after["state_reset"] == true {
        let notices = after["notices"].as_array().map_or(0, |n| n.len());
        c.check(lang.may_die_on_interrupt && notices > 0, || {
            format!(
                "after the interrupt the kernel was replaced (state_reset: true, {notices} notice(s)); \
                 this kernel should survive SIGINT with its state: {after}"
            )
        });
    } else {
        c.check(
            status(&after) == "ok" && rendered(&after).contains("31337"),
            || {
                format!(
                    "after the interrupt: `{}` should be ok and show 31337: {after}",
                    lang.read_state
                )
            },
        );
    }
    let (after_print, _) = exec_args(&server, sid, lang.print, json!({"wait_s": 30})).await;
    c.check(
        status(&after_print) == "ok" && rendered(&after_print).contains("hello-stdout"),
        || format!("print after the interrupt: expected ok with hello-stdout: {after_print}"),
    );

    // Restart: generation + 1, state gone, still usable.
    let before = structured(&server.call("get_session", json!({"session_id": sid})).await);
    let generation = before["generation"].as_u64().unwrap_or(0);
    let old_pid = before["pid"].as_u64().unwrap_or(0) as u32;
    let r = server
        .call("restart_session", json!({"session_id": sid}))
        .await;
    c.check(!is_error(&r), || {
        format!("restart_session is an error: {}", dump(&r))
    });
    let restarted = structured(&r);
    c.check(restarted["generation"] == generation + 1, || {
        format!(
            "restart_session: generation should be {}: {restarted}",
            generation + 1
        )
    });
    c.check(
        old_pid != 0 && wait_until(Duration::from_secs(10), || !pid_alive(old_pid)).await,
        || format!("restart_session: the old kernel (pid {old_pid}) is still alive 10 s later"),
    );
    let (gone, _) = exec_args(&server, sid, lang.read_state, json!({"wait_s": 30})).await;
    c.check(!rendered(&gone).contains("31337"), || {
        format!(
            "after restart `{}` still shows 31337 (state should be gone): {gone}",
            lang.read_state
        )
    });
    let (alive, _) = exec_args(&server, sid, lang.print, json!({"wait_s": 30})).await;
    c.check(
        status(&alive) == "ok" && rendered(&alive).contains("hello-stdout"),
        || format!("print after restart: expected ok with hello-stdout: {alive}"),
    );

    // Destroy: every process the kernel started is gone.
    let procs = descendants(server.pid());
    let t0 = Instant::now();
    let r = server
        .call("destroy_session", json!({"session_id": sid}))
        .await;
    eprintln!(
        "[{}] destroy_session took {:?}: {}",
        lang.kernel,
        t0.elapsed(),
        text(&r)
    );
    c.check(!is_error(&r), || {
        format!("destroy_session is an error: {}", dump(&r))
    });
    let left = procs.clone();
    c.check(
        wait_until(Duration::from_secs(15), || {
            left.iter().all(|&p| !pid_alive(p))
        })
        .await,
        || {
            let alive: Vec<String> = procs
                .iter()
                .filter(|&&p| pid_alive(p))
                .map(|p| format!("{p} ({})", cmdline(*p)))
                .collect();
            format!("destroy_session: kernel processes still alive 15 s later: {alive:?}")
        },
    );
    let r = server.call("get_session", json!({"session_id": sid})).await;
    c.check(is_error(&r), || {
        format!(
            "get_session after destroy should be SESSION_NOT_FOUND: {}",
            dump(&r)
        )
    });

    c.finish(&server);
    server.shutdown().await;
}

/// `/proc/<pid>/cmdline` with spaces, for messages.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// Write a copy of the venv's python3 kernelspec with `interrupt_mode: "message"` as
/// `<dir>/<name>/kernel.json` (for `--kernelspec-dir <dir>`).
pub fn write_message_mode_python_spec(dir: &Path, name: &str) {
    let src = venv().join("share/jupyter/kernels/python3/kernel.json");
    let text = std::fs::read_to_string(&src)
        .unwrap_or_else(|e| panic!("read {}: {e} (run `make .venv`)", src.display()));
    let mut spec: Value = serde_json::from_str(&text).expect("python3 kernel.json is JSON");
    spec["interrupt_mode"] = json!("message");
    spec["display_name"] = json!("Python 3 (interrupt over control)");
    // argv[0] `python` resolves through PATH for a spec outside a prefix: pin the venv's.
    spec["argv"][0] = json!(venv().join("bin/python"));
    let kdir = dir.join(name);
    std::fs::create_dir_all(&kdir).expect("create kernelspec dir");
    std::fs::write(
        kdir.join("kernel.json"),
        serde_json::to_string_pretty(&spec).unwrap(),
    )
    .expect("write kernel.json");
}
