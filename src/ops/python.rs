//! Python-kernel helpers: the code `execute_file` runs, and side-effect-free expressions
//! evaluated through `execute_request.user_expressions` (silent, not in history). Expression
//! results come back JSON-encoded as hex, so their `text/plain` repr is trivial to decode.

use std::time::Duration;

use serde_json::{Value, json};

use crate::session::{SessionError, SessionHandle, WhileBusy};

/// How long a silent expression may take.
const EXPRESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The interpreter running the kernel.
pub const EXECUTABLE: &str =
    "__import__('json').dumps(__import__('sys').executable).encode().hex()";

/// Names, types and short summaries of the user's variables. Only exact builtin scalars and
/// strings are repr'd; containers show their length, numpy/pandas objects their shape; nothing
/// calls a user-defined `__repr__`.
pub const VARIABLES: &str = r#"(lambda j, ns, summary: j.dumps([{"name": k, "type": type(v).__name__, "summary": summary(v)} for k, v in list(ns.items()) if not k.startswith('_') and k not in ('In', 'Out', 'exit', 'quit', 'get_ipython') and type(v).__name__ not in ('module', 'function', 'builtin_function_or_method', 'type')]).encode().hex())(__import__('json'), globals(), lambda v: (repr(v)[:80] if type(v) in (int, float, bool, complex, type(None)) else ((repr(v[:60]) + ('...' if len(v) > 60 else '')) if type(v) in (str, bytes) else (('len=%d' % len(v)) if type(v) in (list, tuple, dict, set, frozenset) else (('shape=%s' % (tuple(v.shape),)) if type(v).__module__.split('.')[0] in ('numpy', 'pandas') and hasattr(type(v), 'shape') else '')))))"#;

/// Code that runs the file at `path` in the user namespace with `__file__ = path` and
/// `sys.argv = [path, *argv]` exactly, compiled with its real filename for tracebacks; both are
/// restored afterwards. Arguments travel as JSON, so no quoting issues.
pub fn run_file_code(path: &str, argv: &[String]) -> String {
    let payload = serde_json::to_string(&json!([path, argv])).unwrap_or_default();
    // A JSON string literal is also a valid Python string literal.
    let literal = serde_json::to_string(&payload).unwrap_or_default();
    format!(
        r#"def __kernel_mcp_run_file(path, argv, ns):
    import sys
    saved_argv, had_file, saved_file = sys.argv, '__file__' in ns, ns.get('__file__')
    sys.argv = [path, *argv]
    ns['__file__'] = path
    try:
        with open(path, 'rb') as f:
            source = f.read()
        exec(compile(source, path, 'exec'), ns)
    finally:
        sys.argv = saved_argv
        if had_file:
            ns['__file__'] = saved_file
        else:
            ns.pop('__file__', None)
__kernel_mcp_run_file(*__import__('json').loads({literal}), globals())
del __kernel_mcp_run_file
"#
    )
}

/// Like [`run_file_code`], for a kernel that cannot read the file (a remote one): the file's
/// `source` travels inside the code (base64), and runs under its name `path`.
pub fn run_source_code(path: &str, source: &[u8], argv: &[String]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(source);
    let payload = serde_json::to_string(&json!([path, encoded, argv])).unwrap_or_default();
    let literal = serde_json::to_string(&payload).unwrap_or_default();
    format!(
        r#"def __kernel_mcp_run_source(path, encoded, argv, ns):
    import sys, base64
    saved_argv, had_file, saved_file = sys.argv, '__file__' in ns, ns.get('__file__')
    sys.argv = [path, *argv]
    ns['__file__'] = path
    try:
        exec(compile(base64.b64decode(encoded), path, 'exec'), ns)
    finally:
        sys.argv = saved_argv
        if had_file:
            ns['__file__'] = saved_file
        else:
            ns.pop('__file__', None)
__kernel_mcp_run_source(*__import__('json').loads({literal}), globals())
del __kernel_mcp_run_source
"#
    )
}

/// `sys.executable -m pip install PACKAGES` run inside the kernel (a remote kernel's own
/// machine), as a hex-encoded JSON `[returncode, output tail]`.
pub fn pip_in_kernel_expr(packages: &[String], tail_bytes: usize) -> String {
    let pkgs = serde_json::to_string(packages).unwrap_or_else(|_| "[]".into());
    let literal = serde_json::to_string(&pkgs).unwrap_or_default();
    format!(
        "(lambda sp, sys, json: (lambda r: json.dumps([r.returncode, (r.stdout + r.stderr)[-{tail_bytes}:]]).encode().hex())(sp.run([sys.executable, '-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', *json.loads({literal})], capture_output=True, text=True, timeout=600)))(__import__('subprocess'), __import__('sys'), __import__('json'))"
    )
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
        .request("execute_request", content, busy, timeout)
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
            code.contains(r#"[\"/tmp/a b.py\",[\"x y\",\"'\\\"\"]]"#),
            "{code}"
        );
    }
}
