//! Operations on a session built from several actor calls, holding the policy; `mcp/` only
//! turns parameters into these calls and their results into tool results. This file: the
//! code that runs a file, variables, packages. Layout: `history.rs` (history from a live
//! session or its journal, replay, export, which entries `get_history` returns),
//! `checkpoint.rs` (a Python namespace to a file and back), `export/` (transcript, script,
//! notebook), `files/` (files users name, read and written safely), `packages.rs` (pip / uv in
//! a session's interpreter), `python.rs` (silent Python expressions and the code that runs a
//! file).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::session::cmd;
use crate::session::language::Language;
use crate::session::{SessionError, SessionHandle};
use packages::InstallOutcome;

pub mod checkpoint;
pub mod export;
pub mod files;
pub mod history;
pub mod packages;
pub mod python;

/// Variables listed by `variables` at most (the rest are counted, not listed).
pub const MAX_VARIABLES: usize = 200;

/// The user's variables of `handle`'s session (name, type, short summary), at most
/// `MAX_VARIABLES`, and how many there are in all. Never calls a user-defined `__repr__`.
/// While a run executes, the kernel's subshell answers (see `session/actor/subshell.rs`).
/// Errors: `UNSUPPORTED` for kernels other than Python; `SESSION_BUSY` while a run executes
/// in a kernel without subshells.
pub async fn variables(handle: &SessionHandle) -> Result<(Vec<Value>, usize), SessionError> {
    let info = handle.call(cmd::Info).await?;
    if !Language::from_name(&info.language).is_python() {
        return Err(SessionError::Unsupported(
            "Variables are listed for Python kernels only.".into(),
        ));
    }
    let vars = python::eval_json_beside(handle, &python::variables_expr()).await?;
    let mut vars = match vars {
        Value::Array(v) => v,
        _ => Vec::new(),
    };
    let total = vars.len();
    vars.truncate(MAX_VARIABLES);
    Ok((vars, total))
}

/// The largest file `execute_file` runs in a local Python kernel, which reads it itself
/// (other kernels get the file's contents, within the code size limit).
pub const PYTHON_FILE_MAX_BYTES: u64 = 256 << 20;

/// File extensions of other kernels' languages (R, Octave, bash, Julia, JavaScript): a
/// Python session refuses to run such a file.
const OTHER_LANGUAGE_EXTENSIONS: [&str; 6] = ["r", "m", "sh", "bash", "jl", "js"];

/// The code that runs the file at `path` (relative to the cwd of `handle`'s session) with
/// `argv`: for Python, in the session's namespace with its real filename, `__file__` and
/// `sys.argv = [path, *argv]`; for other kernels, the file's contents.
/// Errors: `IO_ERROR` (missing, not a regular file…), `LIMIT_EXCEEDED` (over `max_bytes`; for
/// a local Python kernel over [`PYTHON_FILE_MAX_BYTES`]), `INVALID_ARGUMENT` (a file of
/// another language), `UNSUPPORTED` (argv for non-Python).
pub async fn file_code(
    handle: &SessionHandle,
    path: &Path,
    argv: &[String],
    max_bytes: usize,
) -> Result<String, SessionError> {
    let info = handle.call(cmd::Info).await?;
    let path = PathBuf::from(&info.cwd).join(path);
    let reach = files::Reach::of_session(&info);
    let language = Language::from_name(&info.language);
    let actual = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let wrong_language = |expected: &str| {
        SessionError::InvalidArgument(format!(
            "{} is a .{actual} file, but session '{}' runs {} (.{expected} files). Run it in a session of its own language.",
            path.display(),
            info.session_id,
            info.language
        ))
    };
    // Python runs a file of any name; one named for another kernel's language is a mistake.
    if language.is_python() && OTHER_LANGUAGE_EXTENSIONS.contains(&actual.as_str()) {
        return Err(wrong_language("py"));
    }
    if language.is_python() && info.location == "local" {
        // The kernel reads the file itself: checked here, not read.
        files::check_readable_in(&reach, &path, PYTHON_FILE_MAX_BYTES).await?;
        return Ok(python::run_file_code(&path.display().to_string(), argv));
    }
    let contents = files::read_capped_in(&reach, &path, max_bytes).await?;
    if language.is_python() {
        return Ok(python::run_source_code(
            &path.display().to_string(),
            &contents,
            argv,
        ));
    }
    let expected = info.kernel_info["language_info"]["file_extension"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches('.')
        .to_ascii_lowercase();
    if !expected.is_empty() && !actual.is_empty() && actual != expected {
        return Err(wrong_language(&expected));
    }
    if !argv.is_empty() {
        return Err(SessionError::Unsupported(format!(
            "argv is only supported for Python kernels; this session runs {}.",
            info.language
        )));
    }
    Ok(String::from_utf8_lossy(&contents).into_owned())
}

/// Install `packages` into the interpreter of `handle`'s Python session, then let the running
/// kernel see new modules. Errors: `INVALID_ARGUMENT`, `UNSUPPORTED` (not Python),
/// `SESSION_BUSY`, `IO_ERROR`, `LIMIT_EXCEEDED` (the installer's time limit).
pub async fn install_packages(
    handle: &SessionHandle,
    packages_: &[String],
) -> Result<InstallOutcome, SessionError> {
    packages::validate(packages_)?;
    let info = handle.call(cmd::Info).await?;
    if !Language::from_name(&info.language).is_python() {
        return Err(SessionError::Unsupported(
                "Packages can be installed for Python kernels. For R run install.packages(\"name\"); for Octave, pkg install -forge name; for bash, the system package manager.".into(),
            ));
    }
    if info.location != "local" {
        return install_in_kernel(handle, packages_, REMOTE_INSTALL_NOTICE).await;
    }
    if info.sandbox.restricts() {
        // The installer must not run outside the sandbox (a package's build scripts are
        // code too): it runs in the kernel, where the policy lets it write the prefix.
        let prefix = python::eval_json(
            handle,
            "__import__('json').dumps(__import__('sys').prefix).encode().hex()",
        )
        .await?;
        let prefix = PathBuf::from(prefix.as_str().unwrap_or_default());
        let prefix = prefix.canonicalize().unwrap_or(prefix);
        let cwd = Path::new(&info.cwd);
        let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
        if !info.sandbox.allows_writing(&cwd, &prefix) {
            return Err(SessionError::Unsupported(format!(
                "Session '{}' runs in the '{}' sandbox, which cannot write its Python environment ({}), so install_packages cannot install there. Install the packages before creating the session, or use a virtual environment inside the session's cwd with sandbox \"workspace\", or create the session with sandbox \"none\" where the server allows it.",
                info.session_id,
                info.sandbox,
                prefix.display()
            )));
        }
        return install_in_kernel(handle, packages_, SANDBOX_INSTALL_NOTICE).await;
    }
    let exe = python::eval_json(handle, python::EXECUTABLE).await?;
    let Some(exe) = exe.as_str().filter(|s| !s.is_empty()) else {
        return Err(SessionError::Internal(
            "The kernel did not report its interpreter (sys.executable is empty).".into(),
        ));
    };
    let outcome = packages::install(Path::new(exe), packages_).await?;
    if outcome.ok {
        // Let the running kernel see the new modules without a restart.
        let _ = python::eval_json(
            handle,
            "__import__('importlib').invalidate_caches() or '6e756c6c'",
        )
        .await;
    }
    Ok(outcome)
}

/// `install_packages` inside the kernel (a remote one, on its machine; a sandboxed one, in
/// its sandbox), said by `notice`.
async fn install_in_kernel(
    handle: &SessionHandle,
    packages_: &[String],
    notice: &str,
) -> Result<InstallOutcome, SessionError> {
    let expr = python::pip_in_kernel_expr(packages_, 4000);
    let v = python::eval_json_within(handle, &expr, packages::INSTALL_TIMEOUT).await?;
    let code = v[0].as_i64().unwrap_or(-1);
    let output = v[1].as_str().unwrap_or_default().to_string();
    let mut command: Vec<String> = ["sys.executable", "-m", "pip", "install"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    command.extend(packages_.iter().cloned());
    if code == 0 {
        let _ = python::eval_json(
            handle,
            "__import__('importlib').invalidate_caches() or '6e756c6c'",
        )
        .await;
    }
    Ok(InstallOutcome {
        ok: code == 0,
        command,
        restart_recommended: output.contains("Successfully uninstalled"),
        output,
        notices: vec![notice.into()],
    })
}

/// Said by `install_packages` on a remote session.
pub const REMOTE_INSTALL_NOTICE: &str = "The kernel runs on a gateway: pip ran inside it (sys.executable -m pip), on the kernel's machine.";

/// Said by `install_packages` in a sandboxed session whose policy lets it write the environment.
pub const SANDBOX_INSTALL_NOTICE: &str = "The session is sandboxed: pip ran inside the kernel's sandbox (sys.executable -m pip), with its network and filesystem rules.";

/// Said by `execute_file` on a remote session.
pub const REMOTE_FILE_NOTICE: &str =
    "The kernel runs on a gateway: the file was read here and its contents sent to the kernel.";

/// `{"variables": [...]}` details for a listing cut short.
pub fn variables_note(listed: usize, total: usize) -> Option<Value> {
    (total > listed).then(|| {
        json!(format!(
            "{listed} of {total} variables are listed; the rest are left out."
        ))
    })
}
