//! Turning a kernelspec into a command line and environment (jupyter_client `format_kernel_cmd`).
//! Owns template substitution in argv, resolution of a `python` `argv[0]`, `~` expansion, and
//! `$VAR` expansion of the spec's `env`.

use std::path::{Path, PathBuf};

use super::spec::KernelSpec;

/// Why a kernelspec's argv cannot be made a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    #[error("kernelspec '{kernel}' has an empty argv")]
    Empty { kernel: String },
    /// A `python` argv[0] found nowhere: `tried` lists the candidates, `PATH` last.
    #[error("cannot find the kernel's program '{program}'; tried: {}", tried.join(", "))]
    ProgramNotFound { program: String, tried: Vec<String> },
}

/// argv with `{connection_file}`, `{resource_dir}`, `{prefix}` substituted (unknown `{x}` kept), and
/// `argv[0]` `python` / `python3` / `python3.X` resolved: `<prefix>/bin/<argv0>` (or `<prefix>/bin/python`)
/// when the spec lives in `<prefix>/share/jupyter/kernels/<name>`, else `<env_prefix>/bin/python` when an
/// environment is selected, else via `which`. Errors: [`ArgvError`] (the message names the program).
///
/// Templates are replaced anywhere inside an argument (`--f={connection_file}` works). `{prefix}` is the
/// spec's own prefix (as above), else `env_prefix`, else left as is. `connection_file` is used as given
/// (pass an absolute path). A leading `~` / `~/` in any argument is expanded from `$HOME`; any other
/// `argv[0]` is otherwise kept as is (the OS searches `PATH` at spawn).
pub fn build_argv(
    spec: &KernelSpec,
    connection_file: &Path,
    env_prefix: Option<&Path>,
) -> Result<Vec<String>, ArgvError> {
    let home = std::env::var("HOME").ok();
    build_argv_with(spec, connection_file, env_prefix, home.as_deref())
}

fn build_argv_with(
    spec: &KernelSpec,
    connection_file: &Path,
    env_prefix: Option<&Path>,
    home: Option<&str>,
) -> Result<Vec<String>, ArgvError> {
    let spec_prefix = spec_prefix(&spec.resource_dir);
    let prefix = spec_prefix
        .as_deref()
        .or(env_prefix)
        .map(|p| p.to_string_lossy().into_owned());
    let connection_file = connection_file.to_string_lossy();
    let resource_dir = spec.resource_dir.to_string_lossy();
    let lookup = |name: &str| -> Option<&str> {
        match name {
            "connection_file" => Some(&connection_file),
            "resource_dir" => Some(&resource_dir),
            "prefix" => prefix.as_deref(),
            _ => None,
        }
    };
    let mut argv: Vec<String> = spec
        .argv
        .iter()
        .map(|a| expand_tilde(&substitute(a, &lookup), home))
        .collect();
    let Some(argv0) = argv.first_mut() else {
        return Err(ArgvError::Empty {
            kernel: spec.name.clone(),
        });
    };
    if is_python_name(argv0) {
        *argv0 = resolve_python(argv0, spec_prefix.as_deref(), env_prefix)?
            .to_string_lossy()
            .into_owned();
    }
    Ok(argv)
}

/// Linux's limit on one `NAME=value` string of a new process's environment
/// (`MAX_ARG_STRLEN`: 32 pages of 4 KiB, the terminating NUL included).
pub const ENV_ENTRY_MAX_BYTES: usize = 128 * 1024;
/// What the variables a caller adds may hold in all: they share `ARG_MAX` (about 2 MiB) with
/// the kernel's command line and the environment it inherits.
pub const ENV_TOTAL_MAX_BYTES: usize = 1024 * 1024;

/// Why `env` cannot be added to a new kernel's environment, naming the first variable at
/// fault; `None` when it can. (Otherwise the spawn fails with a bare `E2BIG` or a NUL error.)
pub fn env_problem<'a>(env: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<String> {
    let mut total = 0;
    for (k, v) in env {
        if k.is_empty() || k.contains(['=', '\0']) {
            return Some(format!("{k:?} is not an environment variable name."));
        }
        if v.contains('\0') {
            return Some(format!(
                "the value of {k} contains a NUL byte, which no environment variable can hold."
            ));
        }
        let entry = k.len() + 1 + v.len() + 1;
        if entry > ENV_ENTRY_MAX_BYTES {
            return Some(format!(
                "the value of {k} is {} bytes; one variable can hold at most {} bytes here. Pass large data in a file and give its path.",
                v.len(),
                ENV_ENTRY_MAX_BYTES - k.len() - 2
            ));
        }
        total += entry;
    }
    (total > ENV_TOTAL_MAX_BYTES).then(|| {
        format!(
            "env holds {total} bytes in all, over the {ENV_TOTAL_MAX_BYTES} a kernel's environment may add. Pass large data in a file and give its path."
        )
    })
}

/// The option kernel-mcp adds to an ipykernel command line: IPython's history database in
/// memory (`%history`, `_i<n>` and a `history_request` still answer for the kernel's life).
pub const IPYTHON_MEMORY_HISTORY: &str = "--HistoryManager.hist_file=:memory:";

/// Append [`IPYTHON_MEMORY_HISTORY`] when `argv` runs ipykernel (`-m ipykernel_launcher` or
/// `-m ipykernel`) and sets no `--HistoryManager.` option of its own; otherwise unchanged.
///
/// Why: by default every cell an agent runs is written to the person's
/// `~/.ipython/profile_default/history.sqlite` (tokens in agents' code included), kernels
/// of one service contend for that file's lock, and the write on IPython's saving thread
/// costs ~0.4 ms of each `execute` on a 2-core host. kernel-mcp's `history` tool is the
/// session's record. A kernelspec that names any `HistoryManager` option keeps its choice.
pub fn keep_ipython_history_in_memory(argv: &mut Vec<String>) {
    let runs_ipykernel = argv
        .windows(2)
        .any(|w| w[0] == "-m" && matches!(w[1].as_str(), "ipykernel_launcher" | "ipykernel"));
    let chooses_own = argv.iter().any(|a| a.starts_with("--HistoryManager."));
    if runs_ipykernel && !chooses_own {
        argv.push(IPYTHON_MEMORY_HISTORY.to_string());
    }
}

/// `<prefix>` when `resource_dir` is `<prefix>/share/jupyter/kernels/<name>`.
fn spec_prefix(resource_dir: &Path) -> Option<PathBuf> {
    let kernels = resource_dir.parent()?;
    let jupyter = kernels.parent()?;
    let share = jupyter.parent()?;
    let names = [kernels, jupyter, share].map(|p| p.file_name().and_then(|n| n.to_str()));
    (names == [Some("kernels"), Some("jupyter"), Some("share")])
        .then(|| share.parent().map(Path::to_path_buf))?
}

/// `^python(\d(\.\d+)?)?$`
pub(crate) fn is_python_name(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("python") else {
        return false;
    };
    let mut chars = rest.chars();
    match chars.next() {
        None => true,
        Some(c) if c.is_ascii_digit() => match chars.as_str().strip_prefix('.') {
            None => chars.as_str().is_empty(),
            Some(minor) => !minor.is_empty() && minor.chars().all(|c| c.is_ascii_digit()),
        },
        Some(_) => false,
    }
}

fn resolve_python(
    argv0: &str,
    spec_prefix: Option<&Path>,
    env_prefix: Option<&Path>,
) -> Result<PathBuf, ArgvError> {
    let mut tried: Vec<String> = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = spec_prefix {
        candidates.push(p.join("bin").join(argv0));
        candidates.push(p.join("bin/python"));
    }
    if let Some(p) = env_prefix {
        candidates.push(p.join("bin/python"));
    }
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        let shown = c.display().to_string();
        if !tried.contains(&shown) {
            tried.push(shown);
        }
    }
    which::which(argv0).map_err(|e| {
        tried.push(format!("`{argv0}` on PATH ({e})"));
        ArgvError::ProgramNotFound {
            program: argv0.to_string(),
            tried,
        }
    })
}

/// Replace each `{name}` (name = `[A-Za-z0-9_]+`) for which `lookup` has a value; keep the rest.
fn substitute<'a>(arg: &str, lookup: &dyn Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let ident_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let value = (ident_len > 0 && after[ident_len..].starts_with('}'))
            .then(|| lookup(&after[..ident_len]));
        match value.flatten() {
            Some(v) => {
                out.push_str(v);
                rest = &after[ident_len + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Python `os.path.expanduser` for `~` and `~/...` (not `~user`); unchanged without a home.
fn expand_tilde(arg: &str, home: Option<&str>) -> String {
    match home {
        Some(h) if arg == "~" => h.to_string(),
        Some(h) => match arg.strip_prefix("~/") {
            Some(rest) => format!("{}/{rest}", h.trim_end_matches('/')),
            None => arg.to_string(),
        },
        None => arg.to_string(),
    }
}

/// The kernelspec's `env` with `$VAR` / `${VAR}` expanded from `lookup` (unknown kept, `$$` -> `$`).
///
/// Python `string.Template.safe_substitute`: names are `[A-Za-z_][A-Za-z0-9_]*`; a `$` not followed
/// by a name, `{name}` or `$` is kept. Pairs come in key order.
pub fn expand_env(
    spec: &KernelSpec,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    spec.env
        .iter()
        .map(|(k, v)| (k.clone(), expand_vars(v, lookup)))
        .collect()
}

fn expand_vars(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let ident_len = |t: &str| -> usize {
        let mut chars = t.char_indices();
        match chars.next() {
            Some((_, c)) if c.is_ascii_alphabetic() || c == '_' => chars
                .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(t.len(), |(i, _)| i),
            _ => 0,
        }
    };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        if let Some(braced) = after.strip_prefix('{') {
            let n = ident_len(braced);
            if n > 0 && braced[n..].starts_with('}') {
                let consumed = 1 + n + 1;
                match lookup(&braced[..n]) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[dollar..dollar + 1 + consumed]),
                }
                rest = &after[consumed..];
                continue;
            }
        } else {
            let n = ident_len(after);
            if n > 0 {
                match lookup(&after[..n]) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[dollar..dollar + 1 + n]),
                }
                rest = &after[n..];
                continue;
            }
        }
        out.push('$');
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::fs;

    use super::*;
    use crate::kernel::spec::InterruptMode;

    fn spec(resource_dir: &Path, argv: &[&str]) -> KernelSpec {
        KernelSpec {
            name: "k".into(),
            resource_dir: resource_dir.to_path_buf(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            display_name: "K".into(),
            language: "python".into(),
            interrupt_mode: InterruptMode::Signal,
            env: BTreeMap::new(),
            metadata: serde_json::json!({}),
        }
    }

    fn touch_exe(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "#!/bin/sh\n").unwrap();
    }

    #[test]
    fn templates_are_substituted_inside_arguments_and_unknown_ones_kept() {
        let s = spec(
            Path::new("/opt/kernels/k"),
            &[
                "/bin/kern",
                "--f={connection_file}",
                "{resource_dir}/logo",
                "{nope}",
                "{",
                "{}",
                "a{connection_file}b{x",
            ],
        );
        let argv = build_argv_with(&s, Path::new("/run/c.json"), None, None).unwrap();
        assert_eq!(
            argv,
            [
                "/bin/kern",
                "--f=/run/c.json",
                "/opt/kernels/k/logo",
                "{nope}",
                "{",
                "{}",
                "a/run/c.jsonb{x"
            ]
        );
    }

    #[test]
    fn prefix_is_the_specs_own_prefix_else_env_prefix_else_kept() {
        let s = spec(
            Path::new("/opt/env/share/jupyter/kernels/k"),
            &["/bin/kern", "{prefix}/lib"],
        );
        let argv =
            build_argv_with(&s, Path::new("/c.json"), Some(Path::new("/other")), None).unwrap();
        assert_eq!(argv[1], "/opt/env/lib");
        let s = spec(
            Path::new("/home/u/kernels/k"),
            &["/bin/kern", "{prefix}/lib"],
        );
        let argv =
            build_argv_with(&s, Path::new("/c.json"), Some(Path::new("/other")), None).unwrap();
        assert_eq!(argv[1], "/other/lib");
        let argv = build_argv_with(&s, Path::new("/c.json"), None, None).unwrap();
        assert_eq!(argv[1], "{prefix}/lib");
    }

    #[test]
    fn python_argv0_resolves_to_the_specs_prefix_bin() {
        let root = tempfile::tempdir().unwrap();
        let prefix = root.path().join("venv");
        let rdir = prefix.join("share/jupyter/kernels/python3");
        fs::create_dir_all(&rdir).unwrap();
        touch_exe(&prefix.join("bin/python"));
        let s = spec(
            &rdir,
            &[
                "python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ],
        );
        let argv = build_argv_with(&s, Path::new("/c.json"), None, None).unwrap();
        assert_eq!(argv[0], prefix.join("bin/python").to_str().unwrap());
        assert_eq!(argv[4], "/c.json");
        // The exact name wins when it exists.
        touch_exe(&prefix.join("bin/python3"));
        let argv = build_argv_with(&s, Path::new("/c.json"), None, None).unwrap();
        assert_eq!(argv[0], prefix.join("bin/python3").to_str().unwrap());
    }

    #[test]
    fn env_with_a_bad_name_a_nul_value_or_too_many_bytes_is_refused_naming_the_variable() {
        let one = |k: &str, v: &str| env_problem([(&k.to_string(), &v.to_string())]);
        assert_eq!(one("A", "b"), None);
        assert_eq!(one("EMPTY", ""), None);
        assert!(one("", "x").is_some_and(|m| m.contains("not an environment variable name")));
        assert!(one("A=B", "x").is_some());
        assert!(one("NUL", "a\0b").is_some_and(|m| m.contains("NUL") && m.contains("NUL byte")));
        let limit = ENV_ENTRY_MAX_BYTES - "BIG".len() - 2;
        assert_eq!(one("BIG", &"x".repeat(limit)), None, "exactly at the limit");
        let over = one("BIG", &"x".repeat(limit + 1)).expect("one byte over");
        assert!(
            over.contains("BIG") && over.contains(&limit.to_string()),
            "{over}"
        );
        let many: Vec<(String, String)> = (0..10)
            .map(|i| (format!("V{i}"), "x".repeat(120 * 1024)))
            .collect();
        let total = env_problem(many.iter().map(|(k, v)| (k, v))).expect("1.2 MB in all");
        assert!(total.contains("in all"), "{total}");
    }

    #[test]
    fn ipykernel_argv_gets_in_memory_history_unless_it_chooses_its_own() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut a = v(&["/p/python", "-m", "ipykernel_launcher", "-f", "/c.json"]);
        keep_ipython_history_in_memory(&mut a);
        assert_eq!(a.last().unwrap(), IPYTHON_MEMORY_HISTORY);
        let mut b = v(&["python", "-m", "ipykernel", "-f", "/c.json"]);
        keep_ipython_history_in_memory(&mut b);
        assert_eq!(b.len(), 6);
        // The kernelspec's own choice stands.
        let own = v(&[
            "python",
            "-m",
            "ipykernel_launcher",
            "--HistoryManager.enabled=True",
        ]);
        let mut c = own.clone();
        keep_ipython_history_in_memory(&mut c);
        assert_eq!(c, own);
        // Not ipykernel: nothing added ("ipykernel" as a plain argument is not a launch).
        for other in [
            v(&[
                "R",
                "--slave",
                "-e",
                "IRkernel::main()",
                "--args",
                "/c.json",
            ]),
            v(&["octave-kernel", "-f", "/c.json"]),
            v(&["python", "my_kernel.py", "ipykernel"]),
        ] {
            let mut d = other.clone();
            keep_ipython_history_in_memory(&mut d);
            assert_eq!(d, other);
        }
    }

    #[test]
    fn python_argv0_falls_back_to_env_prefix_python() {
        let root = tempfile::tempdir().unwrap();
        let env = root.path().join("env");
        touch_exe(&env.join("bin/python"));
        let s = spec(
            &root.path().join("user/kernels/py"),
            &["python3.11", "-m", "x"],
        );
        let argv = build_argv_with(&s, Path::new("/c.json"), Some(&env), None).unwrap();
        assert_eq!(argv[0], env.join("bin/python").to_str().unwrap());
    }

    #[test]
    fn unresolvable_python_is_an_error_naming_program_and_candidates() {
        let root = tempfile::tempdir().unwrap();
        let rdir = root.path().join("p/share/jupyter/kernels/k");
        let s = spec(&rdir, &["python9.999", "-m", "x"]);
        let err = build_argv_with(
            &s,
            Path::new("/c.json"),
            Some(&root.path().join("env")),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("'python9.999'"), "{err}");
        assert!(
            err.contains(&root.path().join("p/bin/python9.999").display().to_string()),
            "{err}"
        );
        assert!(
            err.contains(&root.path().join("env/bin/python").display().to_string()),
            "{err}"
        );
        assert!(err.contains("PATH"), "{err}");
    }

    #[test]
    fn non_python_argv0_is_kept_but_tilde_is_expanded() {
        let s = spec(Path::new("/k/r"), &["R", "--slave", "{connection_file}"]);
        assert_eq!(
            build_argv_with(&s, Path::new("/c.json"), None, Some("/home/u")).unwrap()[0],
            "R"
        );
        let s = spec(Path::new("/k/r"), &["~/bin/kern", "~", "~other/x", "a~/b"]);
        let argv = build_argv_with(&s, Path::new("/c.json"), None, Some("/home/u/")).unwrap();
        assert_eq!(argv, ["/home/u/bin/kern", "/home/u/", "~other/x", "a~/b"]);
    }

    #[test]
    fn python_name_pattern() {
        for ok in ["python", "python3", "python3.11", "python2.7"] {
            assert!(is_python_name(ok), "{ok}");
        }
        for bad in [
            "python3.",
            "python31",
            "python3.x",
            "pythonw",
            "ipython",
            "/usr/bin/python3",
            "python3-dbg",
        ] {
            assert!(!is_python_name(bad), "{bad}");
        }
    }

    #[test]
    fn spec_prefix_requires_share_jupyter_kernels_layout() {
        assert_eq!(
            spec_prefix(Path::new("/p/share/jupyter/kernels/k")),
            Some(PathBuf::from("/p"))
        );
        assert_eq!(spec_prefix(Path::new("/p/jupyter/kernels/k")), None);
        assert_eq!(
            spec_prefix(Path::new("/home/u/.local/share/jupyter/kernels/k")),
            Some(PathBuf::from("/home/u/.local"))
        );
        assert_eq!(spec_prefix(Path::new("kernels/k")), None);
    }

    #[test]
    fn env_expansion_follows_safe_substitute() {
        let vars: HashMap<&str, &str> =
            [("HOME", "/home/u"), ("PATH", "/bin"), ("_X1", "x")].into();
        let lookup = |k: &str| vars.get(k).map(|v| v.to_string());
        let cases = [
            ("$HOME/bin", "/home/u/bin"),
            ("${HOME}bin", "/home/ubin"),
            ("$PATH:$NOPE:${NOPE}", "/bin:$NOPE:${NOPE}"),
            ("$$HOME", "$HOME"),
            ("$", "$"),
            ("a$ b", "a$ b"),
            ("$1", "$1"),
            ("${HOME", "${HOME"),
            ("${}", "${}"),
            ("$_X1.y", "x.y"),
            ("cost: 5$", "cost: 5$"),
            ("ünï$HOME", "ünï/home/u"),
        ];
        for (input, want) in cases {
            let mut s = spec(Path::new("/k"), &["x"]);
            s.env.insert("V".into(), input.into());
            assert_eq!(
                expand_env(&s, &lookup),
                [("V".to_string(), want.to_string())],
                "{input}"
            );
        }
    }

    #[test]
    fn expand_env_keeps_every_key_in_order() {
        let mut s = spec(Path::new("/k"), &["x"]);
        s.env.insert("PS1".into(), "$".into());
        s.env.insert("A".into(), "${B}".into());
        let got = expand_env(&s, &|k| (k == "B").then(|| "b".to_string()));
        assert_eq!(
            got,
            [
                ("A".to_string(), "b".to_string()),
                ("PS1".to_string(), "$".to_string())
            ]
        );
    }
}
