//! Tools that work with code beyond `execute`: run a file, install packages into a Python
//! session's interpreter, complete and inspect.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, tool, tool_router};
use serde_json::json;

use super::params::{
    CompleteParams, ExecuteFileParams, ExecuteParams, InspectParams, InstallPackagesParams,
};
use super::render;
use super::server::{KernelMcp, guarded};
use crate::session::output::clean_text;
use crate::session::{ErrorCode, SessionError, SessionHandle, packages, python};

/// How long complete/inspect wait for the kernel.
const INTROSPECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// `cursor_pos` (code points) or the end of `code`. Errors: `INVALID_ARGUMENT` past the end.
fn cursor(code: &str, cursor_pos: Option<usize>) -> Result<usize, SessionError> {
    let len = code.chars().count();
    match cursor_pos {
        None => Ok(len),
        Some(p) if p <= len => Ok(p),
        Some(p) => Err(SessionError::new(
            ErrorCode::InvalidArgument,
            format!(
                "cursor_pos {p} is past the end of the code ({len} characters); omit it to use the end."
            ),
        )),
    }
}

async fn is_python(handle: &SessionHandle) -> Result<bool, SessionError> {
    Ok(handle.info().await?.language.eq_ignore_ascii_case("python"))
}

#[tool_router(router = code_router, vis = "pub(crate)")]
impl KernelMcp {
    /// Run a file in a session. Python kernels run it in the session's namespace with its real
    /// filename in tracebacks, __file__ set and sys.argv = [path, *argv] exactly; other kernels
    /// execute the file's contents. Relative paths resolve against the session's cwd.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn execute_file(
        &self,
        Parameters(p): Parameters<ExecuteFileParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        guarded("execute_file", async {
            let handle = tri!(self.registry.get_or_default(p.session_id.as_deref()).await);
            let info = tri!(handle.info().await);
            let mut path = PathBuf::from(&p.path);
            if path.is_relative() {
                path = PathBuf::from(&info.cwd).join(path);
            }
            let contents = match std::fs::read(&path) {
                Ok(c) => c,
                Err(e) => {
                    return render::error(
                        &SessionError::new(
                            ErrorCode::IoError,
                            format!("cannot read {}: {e}", path.display()),
                        )
                        .with_details(json!({"path": path})),
                    );
                }
            };
            let argv = p.argv.unwrap_or_default();
            let code = if info.language.eq_ignore_ascii_case("python") {
                python::run_file_code(&path.display().to_string(), &argv)
            } else {
                let expected = info.kernel_info["language_info"]["file_extension"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_start_matches('.')
                    .to_ascii_lowercase();
                let actual = path
                    .extension()
                    .map(|e| e.to_string_lossy().to_ascii_lowercase())
                    .unwrap_or_default();
                if !expected.is_empty() && !actual.is_empty() && actual != expected {
                    return render::error(&SessionError::new(
                        ErrorCode::InvalidArgument,
                        format!(
                            "{} is a .{actual} file, but session '{}' runs {} (.{expected} files). Run it in a session of its own language.",
                            path.display(), info.session_id, info.language
                        ),
                    ));
                }
                if !argv.is_empty() {
                    return render::error(&SessionError::new(
                        ErrorCode::Unsupported,
                        format!(
                            "argv is only supported for Python kernels; this session runs {}.",
                            info.language
                        ),
                    ));
                }
                String::from_utf8_lossy(&contents).into_owned()
            };
            let params = ExecuteParams {
                session_id: Some(info.session_id),
                code,
                timeout_s: p.timeout_s,
                wait_s: p.wait_s,
                stdin: None,
                expected_generation: None,
                store_history: Some(true),
            };
            self.execute_inner(params, ctx).await
        })
        .await
    }

    /// Install packages into a Python session's own interpreter (uv pip when uv is on PATH, else
    /// pip). Says whether a restart is recommended (an already-imported package was replaced).
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = true
    ))]
    async fn install_packages(
        &self,
        Parameters(p): Parameters<InstallPackagesParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("install_packages", async {
            tri!(packages::validate(&p.packages));
            let handle = tri!(self.registry.get(&p.session_id));
            if !tri!(is_python(&handle).await) {
                return render::error(&SessionError::new(
                    ErrorCode::Unsupported,
                    "install_packages works for Python kernels. For R use execute with install.packages(\"name\"); for Octave, pkg install -forge name; for bash, the system package manager.",
                ));
            }
            let exe = tri!(python::eval_json(&handle, python::EXECUTABLE).await);
            let Some(exe) = exe.as_str().filter(|s| !s.is_empty()) else {
                return render::error(&SessionError::new(ErrorCode::InternalError, "The kernel did not report its interpreter (sys.executable is empty)."));
            };
            let outcome = tri!(packages::install(std::path::Path::new(exe), &p.packages).await);
            if outcome.ok {
                // Let the running kernel see the new modules without a restart.
                let _ = python::eval_json(&handle, "__import__('importlib').invalidate_caches() or '6e756c6c'").await;
            }
            let text = format!(
                "{} {}{}\n{}",
                if outcome.ok { "installed" } else { "install FAILED:" },
                p.packages.join(" "),
                if outcome.restart_recommended { " (restart recommended: an installed package replaced one that may already be imported)" } else { "" },
                outcome.output.trim_end()
            );
            let mut r = render::success(text, &outcome, vec![]);
            r.is_error = Some(!outcome.ok);
            r
        })
        .await
    }

    /// Code completion at cursor_pos (default: end of code): matches and the range they replace.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn complete(
        &self,
        Parameters(p): Parameters<CompleteParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("complete", async {
            let cursor = tri!(cursor(&p.code, p.cursor_pos));
            let handle = tri!(self.registry.get(&p.session_id));
            let reply = tri!(
                handle
                    .request("complete_request", json!({"code": p.code, "cursor_pos": cursor}), true, INTROSPECTION_TIMEOUT)
                    .await
            );
            let matches: Vec<String> = reply["matches"]
                .as_array()
                .map(|m| m.iter().filter_map(|v| v.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let v = json!({"matches": matches, "cursor_start": reply["cursor_start"], "cursor_end": reply["cursor_end"]});
            render::success(matches.join("\n"), &v, vec![])
        })
        .await
    }

    /// Documentation for the name at cursor_pos (default: end of code), as the kernel gives it.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn inspect(
        &self,
        Parameters(p): Parameters<InspectParams>,
    ) -> Result<CallToolResult, McpError> {
        guarded("inspect", async {
            let cursor = tri!(cursor(&p.code, p.cursor_pos));
            let handle = tri!(self.registry.get(&p.session_id));
            let content = json!({"code": p.code, "cursor_pos": cursor, "detail_level": p.detail_level.unwrap_or(0).min(1)});
            let reply = tri!(handle.request("inspect_request", content, true, INTROSPECTION_TIMEOUT).await);
            let found = reply["found"].as_bool().unwrap_or(false);
            let text = reply["data"]["text/plain"].as_str().map(|t| clean_text(t).into_owned()).unwrap_or_default();
            let shown = if found { text.clone() } else { format!("nothing found for {:?}", p.code) };
            render::success(shown, &json!({"found": found, "text": text}), vec![])
        })
        .await
    }
}
