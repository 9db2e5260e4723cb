//! What to tell a person when no kernel can start: the text that turns "No module named
//! ipykernel_launcher" into the command that fixes it. Pure functions over paths and strings, so
//! every message can be tested without a Python or a kernel.
//!
//! Each message names the interpreter or program that was tried, the exact command that
//! installs what is missing into it, and the setting that points kernel-mcp at another Python
//! environment instead (`--python-env`, `KERNEL_MCP_PYTHON_ENV` or `VIRTUAL_ENV` in the `env` of
//! the MCP client's entry for kernel-mcp). MCP clients start servers with a small environment
//! (Node's MCP SDK passes HOME, LOGNAME, PATH, SHELL, TERM and USER), so an activated venv in the
//! user's shell is not seen; that is why the config key matters more than the shell.

use std::path::Path;

/// True when a kernel's start-up output says Python could not import ipykernel (the
/// `python -m ipykernel_launcher` of a kernelspec run by an interpreter without it).
pub fn is_missing_ipykernel(output: &str) -> bool {
    output.contains("No module named ipykernel") || output.contains("No module named 'ipykernel")
}

/// The install command for `interpreter`, as a person would type it.
pub fn install_command(interpreter: &Path) -> String {
    format!("{} -m pip install ipykernel", interpreter.display())
}

/// How to fix an interpreter that cannot import ipykernel: install it there (pip, or uv when
/// `has_uv`), or select an environment that has it. Several lines; ends without a newline.
pub fn missing_ipykernel(interpreter: &Path, has_uv: bool) -> String {
    let exe = interpreter.display();
    let uv = if has_uv {
        format!(" (or: uv pip install --python {exe} ipykernel)")
    } else {
        String::new()
    };
    format!(
        "{exe} cannot import ipykernel. To fix it, either:\n\
         - install ipykernel into it: {cmd}{uv}; a system Python that refuses pip (\"externally \
         managed\") needs a venv instead: python3 -m venv ~/.venvs/kernels && \
         ~/.venvs/kernels/bin/pip install ipykernel, then select it as below;\n\
         - or {select}",
        cmd = install_command(interpreter),
        select = select_env_hint(),
    )
}

/// How to fix a kernelspec whose program does not exist (`argv[0]` not found).
/// `spec_file` is the kernelspec's `kernel.json` (none for a spec built from an interpreter).
pub fn missing_program(program: &str, spec_file: Option<&Path>, is_python: bool) -> String {
    let mut out = format!("The kernel's program '{program}' is not installed or not on PATH. ");
    if is_python {
        out.push_str(
            "Install Python 3 with ipykernel (`uvx kernel-mcp` brings both), or point kernel-mcp \
             at one:\n- ",
        );
        out.push_str(&select_env_hint());
    } else {
        out.push_str("Install that kernel's program");
        if let Some(file) = spec_file {
            out.push_str(&format!(
                ", or fix `argv` in {} (or remove that kernelspec)",
                file.display()
            ));
        }
        out.push('.');
    }
    out
}

/// The settings that select another Python environment, and where to put them: a sentence
/// starting "use a Python environment…", then a line pointing at `kernel-mcp doctor`.
pub fn select_env_hint() -> String {
    "use a Python environment that has ipykernel: set VIRTUAL_ENV (or KERNEL_MCP_PYTHON_ENV) \
     to it in the `env` of kernel-mcp's entry in your MCP client's config, or start kernel-mcp \
     with --python-env /path/to/venv (`kernel-mcp install --client …` writes that entry); \
     create_session(python=\"/path/to/venv\") picks one per session.\n\
     Run `kernel-mcp doctor` to see the kernels and Python environments kernel-mcp finds."
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn missing_ipykernel_names_the_interpreter_the_command_and_the_settings() {
        let text = missing_ipykernel(&PathBuf::from("/usr/bin/python3"), false);
        assert!(
            text.contains("/usr/bin/python3 -m pip install ipykernel"),
            "{text}"
        );
        for key in [
            "VIRTUAL_ENV",
            "KERNEL_MCP_PYTHON_ENV",
            "--python-env",
            "doctor",
        ] {
            assert!(text.contains(key), "{key} missing from: {text}");
        }
        assert!(!text.contains("uv pip"), "no uv offered without uv: {text}");
    }

    #[test]
    fn missing_ipykernel_offers_uv_when_uv_is_installed() {
        let text = missing_ipykernel(&PathBuf::from("/opt/py/bin/python"), true);
        assert!(
            text.contains("uv pip install --python /opt/py/bin/python ipykernel"),
            "{text}"
        );
    }

    #[test]
    fn ipykernel_import_failures_are_recognised_and_other_modules_are_not() {
        assert!(is_missing_ipykernel(
            "/usr/bin/python3: No module named ipykernel_launcher"
        ));
        assert!(is_missing_ipykernel(
            "ModuleNotFoundError: No module named 'ipykernel'"
        ));
        assert!(!is_missing_ipykernel("No module named xpython_launcher"));
    }

    #[test]
    fn missing_non_python_program_points_at_the_kernelspec_file() {
        let file = PathBuf::from("/k/ir/kernel.json");
        let text = missing_program("R", Some(&file), false);
        assert!(
            text.contains("'R'") && text.contains("/k/ir/kernel.json"),
            "{text}"
        );
        let py = missing_program("python3", None, true);
        assert!(py.contains("VIRTUAL_ENV"), "{py}");
    }
}
