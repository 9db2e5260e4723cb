//! Python-kernel helpers: the code `execute_file` runs, and side-effect-free expressions
//! evaluated through `execute_request.user_expressions` (silent, not in history). Expression
//! results come back JSON-encoded as hex, so their `text/plain` repr is trivial to decode.
//!
//! Helpers longer than a line are `.py` files beside this one (`python/`, `checkpoint/`),
//! each defining `run(...)`, called by [`helper_call`].

use std::time::Duration;

use serde_json::{Value, json};

use crate::session::cmd;
use crate::session::{SessionError, SessionHandle, WhileBusy};

/// How long a silent expression may take.
const EXPRESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// See [`variables_expr`].
const VARIABLES_PY: &str = include_str!("python/variables.py");
/// See [`run_file_code`].
const RUN_FILE_PY: &str = include_str!("python/run_file.py");
/// See [`pip_in_kernel_expr`].
const PIP_INSTALL_PY: &str = include_str!("python/pip_install.py");

/// The interpreter running the kernel.
pub const EXECUTABLE: &str =
    "__import__('json').dumps(__import__('sys').executable).encode().hex()";

/// Names, types and short summaries of the user's variables (an expression; see
/// `python/variables.py`). Nothing calls a user-defined `__repr__`.
pub fn variables_expr() -> String {
    helper_call(VARIABLES_PY, "globals()")
}

/// Code that runs the file at `path` in the user namespace with `__file__ = path` and
/// `sys.argv = [path, *argv]` exactly, compiled with its real filename for tracebacks; both are
/// restored afterwards (see `python/run_file.py`). Arguments travel as JSON, so no quoting
/// issues.
pub fn run_file_code(path: &str, argv: &[String]) -> String {
    run_file_with(&json!([path, null, argv]))
}

/// Like [`run_file_code`], for a kernel that cannot read the file (a remote one): the file's
/// `source` travels inside the code (base64), and runs under its name `path`.
pub fn run_source_code(path: &str, source: &[u8], argv: &[String]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(source);
    run_file_with(&json!([path, encoded, argv]))
}

/// `run(path, encoded, argv, globals())` of `python/run_file.py`, its first three arguments
/// from the JSON array `args`.
fn run_file_with(args: &Value) -> String {
    let payload = serde_json::to_string(args).unwrap_or_default();
    // A JSON string literal is also a valid Python string literal.
    let literal = serde_json::to_string(&payload).unwrap_or_default();
    helper_call(
        RUN_FILE_PY,
        &format!("*__import__('json').loads({literal}), globals()"),
    )
}

/// `sys.executable -m pip install PACKAGES` run inside the kernel (a remote kernel's own
/// machine), as a hex-encoded JSON `[returncode, output tail]` (see `python/pip_install.py`).
pub fn pip_in_kernel_expr(packages: &[String], tail_chars: usize) -> String {
    let pkgs = serde_json::to_string(packages).unwrap_or_else(|_| "[]".into());
    let literal = serde_json::to_string(&pkgs).unwrap_or_default();
    helper_call(
        PIP_INSTALL_PY,
        &format!("__import__('json').loads({literal}), {tail_chars}"),
    )
}

/// The expression that calls `run(args)` of the Python source `src`, the source executed in
/// a private dict (no name reaches the user's namespace). How every `.py` helper of `ops/` is
/// run: as a `user_expressions` expression, or as the code of an `execute_request`.
pub fn helper_call(src: &str, args: &str) -> String {
    // A JSON string literal is a valid Python string literal (serde_json writes non-ASCII raw).
    let literal = serde_json::to_string(src).unwrap_or_default();
    format!("(lambda h: (exec({literal}, h), h['run'])[1])({{}})({args})")
}

/// Evaluate a hex-encoding JSON `expr` silently in the kernel and decode the result.
/// Errors: `SESSION_BUSY` while a run executes; `INTERNAL_ERROR` if the expression failed.
pub async fn eval_json(handle: &SessionHandle, expr: &str) -> Result<Value, SessionError> {
    eval_json_within(handle, expr, EXPRESSION_TIMEOUT).await
}

/// [`eval_json`], evaluated on the kernel's subshell while a run executes (for read-only
/// expressions such as [`VARIABLES`]). Errors: `SESSION_BUSY` while a run executes in a
/// kernel without subshells; `INTERNAL_ERROR` if the expression failed.
pub async fn eval_json_beside(handle: &SessionHandle, expr: &str) -> Result<Value, SessionError> {
    eval_json_routed(handle, expr, EXPRESSION_TIMEOUT, WhileBusy::Subshell).await
}

/// [`eval_json`] with its own time limit (for helpers that move a lot of data).
pub async fn eval_json_within(
    handle: &SessionHandle,
    expr: &str,
    timeout: Duration,
) -> Result<Value, SessionError> {
    eval_json_routed(handle, expr, timeout, WhileBusy::Refuse).await
}

async fn eval_json_routed(
    handle: &SessionHandle,
    expr: &str,
    timeout: Duration,
    busy: WhileBusy,
) -> Result<Value, SessionError> {
    let content = json!({
        "code": "",
        "silent": true,
        "store_history": false,
        "user_expressions": {"v": expr},
        "allow_stdin": false,
        "stop_on_error": false,
    });
    let reply = handle
        .call(cmd::Request {
            msg_type: "execute_request".into(),
            content,
            busy,
            timeout,
        })
        .await?;
    let v = &reply["user_expressions"]["v"];
    if v["status"] != "ok" {
        return Err(SessionError::Internal(format!(
            "The kernel could not evaluate the helper expression: {} {}",
            v["ename"].as_str().unwrap_or(""),
            v["evalue"].as_str().unwrap_or("")
        )));
    }
    let text = v["data"]["text/plain"].as_str().unwrap_or_default();
    decode_hex_repr(text)
        .ok_or_else(|| SessionError::Internal(format!("Unexpected helper result: {text:.200}")))
}

/// `'7b22…'` (the repr of a hex string) → the JSON value it encodes.
fn decode_hex_repr(text: &str) -> Option<Value> {
    let hex_text = text.trim().trim_matches(|c| c == '\'' || c == '"');
    let bytes = hex::decode(hex_text).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Running the `.py` helpers with a real interpreter, for unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;

    /// `$KERNEL_MCP_TEST_PYTHON`, else the checkout's `.venv`, else `python3` on PATH.
    pub fn python() -> PathBuf {
        if let Some(p) = std::env::var_os("KERNEL_MCP_TEST_PYTHON") {
            return p.into();
        }
        let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        if venv.is_file() {
            venv
        } else {
            "python3".into()
        }
    }

    /// Run `script` with [`python`] (`-I -c`, no site paths of the user) and the given
    /// arguments; its stdout. Panics when it does not run or fails.
    pub fn run(script: &str, args: &[&str]) -> String {
        let out = std::process::Command::new(python())
            .arg("-I")
            .arg("-c")
            .arg(script)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python().display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "python failed: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The JSON value a hex-encoding helper printed.
    pub fn decode(printed: &str) -> serde_json::Value {
        super::decode_hex_repr(printed).unwrap_or_else(|| panic!("not hex JSON: {printed}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_repr_decodes_to_the_json_value() {
        let hex_text = hex::encode(br#"{"a": [1, "x"]}"#);
        assert_eq!(
            decode_hex_repr(&format!("'{hex_text}'")),
            Some(json!({"a": [1, "x"]}))
        );
        assert_eq!(decode_hex_repr("'zz'"), None);
    }

    #[test]
    fn run_file_code_carries_arguments_as_json() {
        let code = run_file_code("/tmp/a b.py", &["x y".into(), "'\"".into()]);
        assert!(
            code.contains(r#"[\"/tmp/a b.py\",null,[\"x y\",\"'\\\"\"]]"#),
            "{code}"
        );
    }

    /// Every `.py` file under `src/` (these helpers, the broker's module, the fork helper,
    /// the pool adapter) is Python the kernel's interpreter compiles.
    #[test]
    fn every_python_file_in_src_compiles() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        let mut dirs = vec![src];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "py") {
                    files.push(path.display().to_string());
                }
            }
        }
        assert!(files.len() >= 8, "{files:?}");
        let args: Vec<&str> = files.iter().map(String::as_str).collect();
        let out = testing::run(
            "import sys\nfor p in sys.argv[1:]:\n    compile(open(p, encoding='utf-8').read(), p, 'exec')\nprint(len(sys.argv) - 1)",
            &args,
        );
        assert_eq!(out.trim(), files.len().to_string());
    }

    #[test]
    fn variables_are_listed_with_short_summaries_and_no_user_repr() {
        let script = format!(
            "class Loud:\n    def __repr__(self):\n        raise SystemExit('repr called')\nn = 42\ns = 'x' * 100\nxs = [1, 2]\nloud = Loud()\n_hidden = 1\nimport os\nprint({})",
            variables_expr()
        );
        let got = testing::decode(&testing::run(&script, &[]));
        let by_name = |n: &str| {
            got.as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == n)
                .cloned()
                .unwrap_or(Value::Null)
        };
        assert_eq!(by_name("n")["summary"], "42", "{got}");
        assert_eq!(by_name("s")["summary"], format!("'{}'...", "x".repeat(60)));
        assert_eq!(by_name("xs")["summary"], "len=2");
        assert_eq!(by_name("loud")["type"], "Loud");
        assert_eq!(by_name("loud")["summary"], "");
        for absent in ["_hidden", "os", "Loud"] {
            assert_eq!(by_name(absent), Value::Null, "{absent}: {got}");
        }
    }

    #[test]
    fn a_file_runs_with_its_argv_and_file_and_both_are_restored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prog.py");
        std::fs::write(
            &file,
            "import sys\nprint(sys.argv, __file__ == sys.argv[0])\nran = True\n",
        )
        .unwrap();
        let path = file.display().to_string();
        let argv = ["a b".to_string(), "'\"".to_string()];
        for code in [
            run_file_code(&path, &argv),
            run_source_code(&path, &std::fs::read(&file).unwrap(), &argv),
        ] {
            let script = format!(
                "import sys\nsys.argv = ['before']\n{code}\nprint(sys.argv, ran, '__file__' in globals())"
            );
            let out = testing::run(&script, &[]);
            let want = format!("['{path}', 'a b', '\\'\"'] True\n['before'] True False\n");
            assert_eq!(out, want);
        }
    }
}
