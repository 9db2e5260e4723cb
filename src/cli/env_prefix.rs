//! Which Python environment kernel-mcp uses when nobody says: the candidates in order, and the
//! detection of the environment the binary itself was installed into (a wheel installed by
//! `uvx`, `pipx` or `pip` puts `kernel-mcp` in `<prefix>/bin/` next to the `python` that has
//! ipykernel, because the wheel depends on it).
//!
//! Order, first present wins: `--python-env` / `KERNEL_MCP_PYTHON_ENV`, `$VIRTUAL_ENV`, the
//! binary's own environment, `$CONDA_PREFIX`, `./.venv` (when it has `bin/python`). The binary's
//! own environment comes before `$CONDA_PREFIX` because an activated conda `base` is ambient and
//! often lacks ipykernel, while the wheel's environment always has it.
//!
//! Nothing here runs Python; `kernel-mcp doctor` probes the candidates.

use std::path::{Path, PathBuf};

/// Where a candidate environment came from (shown by `doctor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvSource {
    /// `--python-env` or `KERNEL_MCP_PYTHON_ENV`.
    Flag,
    /// `$VIRTUAL_ENV`.
    VirtualEnv,
    /// The environment whose `bin/` holds the running kernel-mcp binary.
    OwnInstall,
    /// `$CONDA_PREFIX`.
    CondaPrefix,
    /// `./.venv` in the working directory.
    LocalVenv,
}

impl EnvSource {
    /// How a person would name the setting.
    pub fn label(self) -> &'static str {
        match self {
            EnvSource::Flag => "--python-env / KERNEL_MCP_PYTHON_ENV",
            EnvSource::VirtualEnv => "$VIRTUAL_ENV",
            EnvSource::OwnInstall => "kernel-mcp's own environment",
            EnvSource::CondaPrefix => "$CONDA_PREFIX",
            EnvSource::LocalVenv => "./.venv",
        }
    }
}

/// One Python environment kernel-mcp could use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EnvCandidate {
    pub prefix: PathBuf,
    pub source: EnvSource,
}

impl EnvCandidate {
    /// `<prefix>/bin/python`, else `<prefix>/bin/python3` when only that exists (a plain
    /// installation such as `/usr/local`); the first when neither exists.
    pub fn python(&self) -> PathBuf {
        let bin = self.prefix.join("bin");
        let python = bin.join("python");
        if !python.exists() && bin.join("python3").exists() {
            return bin.join("python3");
        }
        python
    }
}

/// Every candidate, in the order of the module docs, duplicates (same prefix) dropped.
/// `flag` is `--python-env`; `env` reads environment variables; `cwd` and `exe` are the working
/// directory and the running binary (either may be unknown).
pub fn candidates(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    exe: Option<&Path>,
) -> Vec<EnvCandidate> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let local = cwd
        .map(|c| c.join(".venv"))
        .filter(|v| v.join("bin").join("python").exists());
    let found = [
        (flag.map(Path::to_path_buf), EnvSource::Flag),
        (var("VIRTUAL_ENV"), EnvSource::VirtualEnv),
        (exe.and_then(install_prefix), EnvSource::OwnInstall),
        (var("CONDA_PREFIX"), EnvSource::CondaPrefix),
        (local, EnvSource::LocalVenv),
    ];
    let mut out: Vec<EnvCandidate> = Vec::new();
    for (prefix, source) in found {
        if let Some(prefix) = prefix
            && !out.iter().any(|c| c.prefix == prefix)
        {
            out.push(EnvCandidate { prefix, source });
        }
    }
    out
}

/// The environment to use: the first of [`candidates`].
pub fn select(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    exe: Option<&Path>,
) -> Option<EnvCandidate> {
    candidates(flag, env, cwd, exe).into_iter().next()
}

/// [`select`] from this process: its environment, working directory and executable.
pub fn select_from_process(flag: Option<&Path>) -> Option<EnvCandidate> {
    let (cwd, exe) = process_paths();
    select(
        flag,
        &|k| std::env::var(k).ok(),
        cwd.as_deref(),
        exe.as_deref(),
    )
}

/// [`candidates`] from this process.
pub fn candidates_from_process(flag: Option<&Path>) -> Vec<EnvCandidate> {
    let (cwd, exe) = process_paths();
    candidates(
        flag,
        &|k| std::env::var(k).ok(),
        cwd.as_deref(),
        exe.as_deref(),
    )
}

fn process_paths() -> (Option<PathBuf>, Option<PathBuf>) {
    let cwd = std::env::current_dir().ok();
    // current_exe resolves symlinks on Linux, so pipx's `~/.local/bin/kernel-mcp` link leads to
    // the venv it points into.
    let exe = std::env::current_exe()
        .ok()
        .map(|e| std::fs::canonicalize(&e).unwrap_or(e));
    (cwd, exe)
}

/// `<prefix>` when `exe` is `<prefix>/bin/<name>` and `<prefix>` is a Python environment: a
/// `bin/python` or `bin/python3` beside the binary, and `pyvenv.cfg` (a venv: uv, pipx,
/// `python -m venv`) or `lib/python3.*/site-packages` (a conda env or a plain installation;
/// Debian's `dist-packages` counts too). The interpreter is required so that a binary copied
/// to `/usr/local/bin` on a system whose Python lives elsewhere selects nothing.
pub fn install_prefix(exe: &Path) -> Option<PathBuf> {
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    let has_python = bin.join("python").exists() || bin.join("python3").exists();
    (has_python && (prefix.join("pyvenv.cfg").is_file() || has_site_packages(prefix)))
        .then(|| prefix.to_path_buf())
}

/// `<prefix>/lib/python3.*/{site,dist}-packages` exists. Reads one directory, bounded.
fn has_site_packages(prefix: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
        return false;
    };
    entries.flatten().take(1000).any(|e| {
        let name = e.file_name();
        name.to_str().is_some_and(|n| n.starts_with("python3."))
            && ["site-packages", "dist-packages"]
                .iter()
                .any(|d| e.path().join(d).is_dir())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn binary_in_a_venv_bin_dir_finds_that_venv() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("bin/kernel-mcp");
        touch(&exe);
        touch(&t.path().join("bin/python"));
        touch(&t.path().join("pyvenv.cfg"));
        assert_eq!(install_prefix(&exe).as_deref(), Some(t.path()));
    }

    #[test]
    fn binary_in_a_conda_style_prefix_finds_it_by_site_packages() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("bin/kernel-mcp");
        touch(&exe);
        touch(&t.path().join("bin/python3"));
        std::fs::create_dir_all(t.path().join("lib/python3.12/site-packages")).unwrap();
        assert_eq!(install_prefix(&exe).as_deref(), Some(t.path()));
        let c = EnvCandidate {
            prefix: t.path().to_path_buf(),
            source: EnvSource::OwnInstall,
        };
        assert_eq!(c.python(), t.path().join("bin/python3"));
    }

    #[test]
    fn site_packages_without_an_interpreter_beside_the_binary_is_not_an_environment() {
        // Debian's empty /usr/local/lib/python3.X/dist-packages with no /usr/local/bin/python3.
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("bin/kernel-mcp");
        touch(&exe);
        std::fs::create_dir_all(t.path().join("lib/python3.11/dist-packages")).unwrap();
        assert_eq!(install_prefix(&exe), None);
    }

    #[test]
    fn binary_outside_a_python_environment_finds_none() {
        let t = tempfile::tempdir().unwrap();
        // A cargo install root: bin/ but no Python around it.
        let exe = t.path().join("bin/kernel-mcp");
        touch(&exe);
        std::fs::create_dir_all(t.path().join("lib/rustlib")).unwrap();
        assert_eq!(install_prefix(&exe), None);
        // A build directory: not even a bin/.
        let dev = t.path().join("target/debug/kernel-mcp");
        touch(&dev);
        touch(&t.path().join("target/pyvenv.cfg"));
        assert_eq!(install_prefix(&dev), None);
    }

    #[test]
    fn own_install_is_used_when_no_virtual_env_or_flag_is_given() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("bin/kernel-mcp");
        touch(&exe);
        touch(&t.path().join("bin/python"));
        touch(&t.path().join("pyvenv.cfg"));
        let conda = env_of(&[("CONDA_PREFIX", "/opt/conda")]);
        let chosen = select(None, &conda, None, Some(&exe)).unwrap();
        assert_eq!(chosen.source, EnvSource::OwnInstall);
        assert_eq!(chosen.prefix, t.path());

        let venv = env_of(&[("VIRTUAL_ENV", "/work/venv")]);
        let chosen = select(None, &venv, None, Some(&exe)).unwrap();
        assert_eq!(
            (chosen.source, chosen.prefix),
            (EnvSource::VirtualEnv, PathBuf::from("/work/venv"))
        );
        let flag = Path::new("/flag/env");
        let chosen = select(Some(flag), &venv, None, Some(&exe)).unwrap();
        assert_eq!(chosen.source, EnvSource::Flag);
    }

    #[test]
    fn candidates_keep_order_skip_empty_values_and_drop_duplicates() {
        let t = tempfile::tempdir().unwrap();
        touch(&t.path().join(".venv/bin/python"));
        let env = env_of(&[
            ("VIRTUAL_ENV", ""),
            ("CONDA_PREFIX", t.path().join(".venv").to_str().unwrap()),
        ]);
        let all = candidates(None, &env, Some(t.path()), None);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].source, EnvSource::CondaPrefix);
        assert_eq!(select(None, &env_of(&[]), None, None), None);
    }
}
