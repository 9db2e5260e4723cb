//! Kernelspec discovery, in jupyter_client's order (docs/semantics.md). Owns the search path (from the
//! environment and OS defaults), the lookup of `<dir>/<name>/kernel.json` in it, and the cache
//! of the last lookup (read again when a name is not found in it).
//!
//! Every entry of the search path is a directory that *directly* contains `<name>/kernel.json`
//! (a `.../kernels` directory); this includes `extra_first` (`--kernelspec-dir`) and `project_dir`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::spec::KernelSpec;

/// No kernelspec of that name: says what exists and where we looked.
#[derive(Debug, Clone, thiserror::Error)]
#[error("Kernel '{name}' not found. Available: {}. Searched: {}", .available.join(", "), .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
pub struct KernelNotFound {
    /// The name asked for, as given.
    pub name: String,
    /// Names of every usable kernelspec, sorted.
    pub available: Vec<String>,
    /// The search path, in order (existing or not).
    pub searched: Vec<PathBuf>,
}

/// The system data dirs on Unix (jupyter_core `SYSTEM_JUPYTER_PATH`), each + `/kernels`.
const SYSTEM_KERNEL_DIRS: [&str; 2] = [
    "/usr/local/share/jupyter/kernels",
    "/usr/share/jupyter/kernels",
];

/// The ordered list of `.../kernels` directories to search, and the kernelspecs last found in
/// them. The first [`KernelSearch::list`] or [`KernelSearch::find`] reads the directories; later
/// calls use that result until `find` misses, which reads them again (so a kernelspec installed
/// after the server started is found on the next `find`).
#[derive(Debug)]
pub struct KernelSearch {
    dirs: Vec<PathBuf>,
    /// The last scan of `dirs` (`None` before the first). A std mutex, not tokio's: it is only
    /// held to copy the list in or out, never across an `.await` or a directory scan, so
    /// callers on the async runtime never wait on it for long.
    cache: Mutex<Option<Vec<KernelSpec>>>,
}

impl Clone for KernelSearch {
    fn clone(&self) -> KernelSearch {
        KernelSearch {
            dirs: self.dirs.clone(),
            cache: Mutex::new(self.cached()),
        }
    }
}

impl KernelSearch {
    /// `extra_first` (from `--kernelspec-dir`) first, then `$JUPYTER_PATH` entries, the user data dir
    /// and the Python environment prefix `env_prefix` (swapped when it is a venv), `/usr/local/share/jupyter`,
    /// `/usr/share/jupyter` — each + `/kernels` — and finally `project_dir` (the project's own `kernelspecs/`).
    ///
    /// `extra_first` and `project_dir` are used as given: they directly contain `<name>/kernel.json`.
    /// Reads the process environment; see [`KernelSearch::with_env`] for the details.
    pub fn new(
        extra_first: &[PathBuf],
        env_prefix: Option<&Path>,
        project_dir: Option<&Path>,
    ) -> KernelSearch {
        Self::with_env(extra_first, env_prefix, project_dir, &|k| {
            std::env::var(k).ok()
        })
    }

    /// Like [`KernelSearch::new`], with environment variables read from `env`:
    /// - `JUPYTER_PATH`: split on `:`, empty entries skipped, each + `/kernels`;
    /// - user dir: `$JUPYTER_DATA_DIR`, else `$XDG_DATA_HOME/jupyter`, else `$HOME/.local/share/jupyter`
    ///   (empty values count as unset; no user dir without any of them), + `/kernels`;
    /// - env dir: `<env_prefix>/share/jupyter/kernels` (left out if it is a system dir). It comes *before*
    ///   the user dir when `$JUPYTER_PREFER_ENV_PATH` is set to a true value (anything but
    ///   `no/n/false/off/0/0.0`, case-insensitive); when that variable is unset, when `env_prefix` is a
    ///   venv (has `pyvenv.cfg`) or the active non-`base` conda env (`$CONDA_PREFIX`, `$CONDA_DEFAULT_ENV`).
    ///
    /// Duplicate directories keep their first position.
    pub fn with_env(
        extra_first: &[PathBuf],
        env_prefix: Option<&Path>,
        project_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> KernelSearch {
        let system: Vec<PathBuf> = SYSTEM_KERNEL_DIRS.iter().map(PathBuf::from).collect();
        Self::build(extra_first, env_prefix, project_dir, env, &system)
    }

    /// [`KernelSearch::with_env`] with the system kernel dirs given (for tests).
    fn build(
        extra_first: &[PathBuf],
        env_prefix: Option<&Path>,
        project_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        system: &[PathBuf],
    ) -> KernelSearch {
        let non_empty = |k: &str| env(k).filter(|v| !v.is_empty());
        let mut dirs: Vec<PathBuf> = extra_first.to_vec();

        if let Some(jp) = env("JUPYTER_PATH") {
            dirs.extend(
                jp.split(':')
                    .filter(|s| !s.is_empty())
                    .map(|s| Path::new(s).join("kernels")),
            );
        }

        let user_data = non_empty("JUPYTER_DATA_DIR")
            .map(PathBuf::from)
            .or_else(|| non_empty("XDG_DATA_HOME").map(|x| Path::new(&x).join("jupyter")))
            .or_else(|| non_empty("HOME").map(|h| Path::new(&h).join(".local/share/jupyter")));
        let user_dir = user_data.map(|d| d.join("kernels"));
        let env_dir = env_prefix
            .map(|p| p.join("share/jupyter/kernels"))
            .filter(|d| !system.contains(d));

        let (first, second) = match env_prefix {
            Some(prefix) if prefer_env_over_user(prefix, env) => (env_dir, user_dir),
            _ => (user_dir, env_dir),
        };
        dirs.extend(first);
        dirs.extend(second);
        dirs.extend(system.iter().cloned());
        dirs.extend(project_dir.map(Path::to_path_buf));

        let mut unique: Vec<PathBuf> = Vec::with_capacity(dirs.len());
        for d in dirs {
            if !unique.contains(&d) {
                unique.push(d);
            }
        }
        KernelSearch {
            dirs: unique,
            cache: Mutex::new(None),
        }
    }

    /// The directories, in search order (existing or not).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Every kernelspec, first hit per name wins, sorted by name. Unreadable specs are skipped (with a tracing warning).
    ///
    /// A name is a subdirectory holding a `kernel.json`, lower-cased. An invalid kernel.json does not
    /// shadow a valid spec of the same name further down the path. Missing directories are skipped.
    /// Reads the directories on the first call only; later calls return that result, refreshed
    /// whenever [`KernelSearch::find`] misses.
    pub fn list(&self) -> Vec<KernelSpec> {
        self.cached().unwrap_or_else(|| self.rescan())
    }

    /// The kernelspec `name` (case-insensitive): the entry of that name in [`KernelSearch::list`].
    /// When it is not there, or its `kernel.json` has gone since, the directories are read again
    /// before giving up.
    ///
    /// Errors: [`KernelNotFound`] with every available name and the directories searched.
    pub fn find(&self, name: &str) -> Result<KernelSpec, KernelNotFound> {
        let wanted = name.to_lowercase();
        let pick = |specs: &[KernelSpec]| specs.iter().find(|s| s.name == wanted).cloned();
        if let Some(spec) = pick(&self.list())
            && spec.resource_dir.join("kernel.json").is_file()
        {
            return Ok(spec);
        }
        let fresh = self.rescan();
        pick(&fresh).ok_or_else(|| KernelNotFound {
            name: name.to_string(),
            available: fresh.into_iter().map(|s| s.name).collect(),
            searched: self.dirs.clone(),
        })
    }

    /// A copy of the last scan, if there was one.
    fn cached(&self) -> Option<Vec<KernelSpec>> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Read the directories (without holding the lock) and remember the result.
    fn rescan(&self) -> Vec<KernelSpec> {
        let specs = scan(&self.dirs);
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Some(specs.clone());
        specs
    }
}

/// Every usable kernelspec in `dirs`, first hit per name wins, sorted by name.
fn scan(dirs: &[PathBuf]) -> Vec<KernelSpec> {
    let mut found: Vec<KernelSpec> = Vec::new();
    for dir in dirs {
        for (name, path) in candidates(dir) {
            if found.iter().any(|s| s.name == name) {
                continue;
            }
            if let Some(spec) = load_or_warn(&name, &path) {
                found.push(spec);
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// jupyter_core `prefer_environment_over_user()`, for the environment at `prefix`.
fn prefer_env_over_user(prefix: &Path, env: &dyn Fn(&str) -> Option<String>) -> bool {
    if let Some(v) = env("JUPYTER_PREFER_ENV_PATH") {
        return !matches!(
            v.to_ascii_lowercase().as_str(),
            "no" | "n" | "false" | "off" | "0" | "0.0"
        );
    }
    if prefix.join("pyvenv.cfg").is_file() {
        return true;
    }
    match env("CONDA_PREFIX") {
        Some(conda) if !conda.is_empty() && prefix.starts_with(&conda) => {
            env("CONDA_DEFAULT_ENV").is_some_and(|e| e != "base")
        }
        _ => false,
    }
}

/// `(lower-cased name, resource dir)` for each subdirectory of `dir` holding a kernel.json, in
/// file-name order. A missing or unreadable `dir` yields nothing.
fn candidates(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let path = e.path();
            path.join("kernel.json").is_file().then_some((name, path))
        })
        .collect();
    out.sort();
    out.into_iter()
        .map(|(n, p)| (n.to_lowercase(), p))
        .collect()
}

fn load_or_warn(name: &str, resource_dir: &Path) -> Option<KernelSpec> {
    match KernelSpec::load(name, resource_dir) {
        Ok(spec) => Some(spec),
        Err(e) => {
            tracing::warn!(kernel = name, error = %e, "skipping unusable kernelspec");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::fs;

    use super::*;

    fn write_spec(kernels_dir: &Path, name: &str, display: &str) {
        let d = kernels_dir.join(name);
        fs::create_dir_all(&d).unwrap();
        let json = serde_json::json!({"argv": ["k", "{connection_file}"], "display_name": display});
        fs::write(d.join("kernel.json"), json.to_string()).unwrap();
    }

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    /// A temp tree with `jp/`, `data/` (user), `env/` (prefix), `sys/kernels`, `proj/`.
    struct Tree {
        root: tempfile::TempDir,
    }

    impl Tree {
        fn new() -> Tree {
            Tree {
                root: tempfile::tempdir().unwrap(),
            }
        }
        fn p(&self, rel: &str) -> PathBuf {
            self.root.path().join(rel)
        }
        fn search(&self, vars: &[(&str, &str)], env_prefix: bool) -> KernelSearch {
            let jp = self.p("jp");
            let data = self.p("data");
            let mut all: Vec<(&str, &str)> = vec![
                ("JUPYTER_PATH", jp.to_str().unwrap()),
                ("JUPYTER_DATA_DIR", data.to_str().unwrap()),
            ];
            all.extend_from_slice(vars);
            let prefix = self.p("env");
            KernelSearch::build(
                &[],
                env_prefix.then_some(prefix.as_path()),
                Some(&self.p("proj")),
                &lookup(&all),
                &[self.p("sys/kernels")],
            )
        }
    }

    fn display_of(search: &KernelSearch, name: &str) -> String {
        search.find(name).unwrap().display_name
    }

    #[test]
    fn search_order_is_jupyter_path_user_env_system_project() {
        let t = Tree::new();
        let s = t.search(&[], true);
        let expected = vec![
            t.p("jp/kernels"),
            t.p("data/kernels"),
            t.p("env/share/jupyter/kernels"),
            t.p("sys/kernels"),
            t.p("proj"),
        ];
        assert_eq!(s.dirs(), expected.as_slice());
    }

    #[test]
    fn jupyter_path_beats_user_beats_env_beats_system_beats_project() {
        let t = Tree::new();
        for (dir, tag) in [
            ("jp/kernels", "jp"),
            ("data/kernels", "user"),
            ("env/share/jupyter/kernels", "env"),
            ("sys/kernels", "sys"),
            ("proj", "proj"),
        ] {
            write_spec(&t.p(dir), "k", tag);
        }
        assert_eq!(display_of(&t.search(&[], true), "k"), "jp");
        fs::remove_dir_all(t.p("jp")).unwrap();
        assert_eq!(display_of(&t.search(&[], true), "k"), "user");
        fs::remove_dir_all(t.p("data")).unwrap();
        assert_eq!(display_of(&t.search(&[], true), "k"), "env");
        fs::remove_dir_all(t.p("env")).unwrap();
        assert_eq!(display_of(&t.search(&[], true), "k"), "sys");
        fs::remove_dir_all(t.p("sys")).unwrap();
        assert_eq!(display_of(&t.search(&[], true), "k"), "proj");
    }

    #[test]
    fn env_dir_comes_before_user_dir_in_a_venv() {
        let t = Tree::new();
        write_spec(&t.p("data/kernels"), "k", "user");
        write_spec(&t.p("env/share/jupyter/kernels"), "k", "env");
        assert_eq!(display_of(&t.search(&[], true), "k"), "user");
        fs::write(t.p("env/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        let s = t.search(&[], true);
        assert_eq!(s.dirs()[1], t.p("env/share/jupyter/kernels"));
        assert_eq!(display_of(&s, "k"), "env");
        // An explicit false JUPYTER_PREFER_ENV_PATH wins over the venv.
        assert_eq!(
            display_of(&t.search(&[("JUPYTER_PREFER_ENV_PATH", "Off")], true), "k"),
            "user"
        );
    }

    #[test]
    fn jupyter_prefer_env_path_truthy_puts_env_first() {
        let t = Tree::new();
        write_spec(&t.p("data/kernels"), "k", "user");
        write_spec(&t.p("env/share/jupyter/kernels"), "k", "env");
        assert_eq!(
            display_of(&t.search(&[("JUPYTER_PREFER_ENV_PATH", "1")], true), "k"),
            "env"
        );
        assert_eq!(
            display_of(&t.search(&[("JUPYTER_PREFER_ENV_PATH", "0.0")], true), "k"),
            "user"
        );
        assert_eq!(
            display_of(&t.search(&[("JUPYTER_PREFER_ENV_PATH", "no")], true), "k"),
            "user"
        );
    }

    #[test]
    fn non_base_conda_env_puts_env_first() {
        let t = Tree::new();
        write_spec(&t.p("data/kernels"), "k", "user");
        write_spec(&t.p("env/share/jupyter/kernels"), "k", "env");
        let env = t.p("env");
        let conda = [
            ("CONDA_PREFIX", env.to_str().unwrap()),
            ("CONDA_DEFAULT_ENV", "myenv"),
        ];
        assert_eq!(display_of(&t.search(&conda, true), "k"), "env");
        let base = [
            ("CONDA_PREFIX", env.to_str().unwrap()),
            ("CONDA_DEFAULT_ENV", "base"),
        ];
        assert_eq!(display_of(&t.search(&base, true), "k"), "user");
    }

    #[test]
    fn user_dir_falls_back_to_xdg_data_home_then_home() {
        let sys = [PathBuf::from("/sys-k")];
        let s = KernelSearch::build(
            &[],
            None,
            None,
            &lookup(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")]),
            &sys,
        );
        assert_eq!(
            s.dirs(),
            &[PathBuf::from("/x/jupyter/kernels"), PathBuf::from("/sys-k")]
        );
        let s = KernelSearch::build(
            &[],
            None,
            None,
            &lookup(&[("XDG_DATA_HOME", ""), ("HOME", "/h")]),
            &sys,
        );
        assert_eq!(
            s.dirs(),
            &[
                PathBuf::from("/h/.local/share/jupyter/kernels"),
                PathBuf::from("/sys-k")
            ]
        );
        let s = KernelSearch::build(&[], None, None, &lookup(&[]), &sys);
        assert_eq!(s.dirs(), &[PathBuf::from("/sys-k")]);
    }

    #[test]
    fn jupyter_path_is_split_on_colons_skipping_empty_entries() {
        let vars = lookup(&[("JUPYTER_PATH", "/a::/b:")]);
        let s = KernelSearch::build(&[], None, None, &vars, &[]);
        assert_eq!(
            s.dirs(),
            &[PathBuf::from("/a/kernels"), PathBuf::from("/b/kernels")]
        );
    }

    #[test]
    fn extra_first_comes_first_and_duplicates_keep_first_position() {
        let vars = lookup(&[("JUPYTER_PATH", "/a:/a"), ("JUPYTER_DATA_DIR", "/a")]);
        let extra = [PathBuf::from("/extra"), PathBuf::from("/sys-k")];
        let s = KernelSearch::build(&extra, None, None, &vars, &[PathBuf::from("/sys-k")]);
        assert_eq!(
            s.dirs(),
            &[
                PathBuf::from("/extra"),
                PathBuf::from("/sys-k"),
                PathBuf::from("/a/kernels")
            ]
        );
    }

    #[test]
    fn env_prefix_that_is_a_system_prefix_keeps_its_system_position() {
        let vars = lookup(&[("JUPYTER_DATA_DIR", "/u"), ("JUPYTER_PREFER_ENV_PATH", "1")]);
        let system = [
            PathBuf::from("/usr/local/share/jupyter/kernels"),
            PathBuf::from("/usr/share/jupyter/kernels"),
        ];
        let s = KernelSearch::build(&[], Some(Path::new("/usr")), None, &vars, &system);
        assert_eq!(s.dirs()[0], PathBuf::from("/u/kernels"));
        assert_eq!(&s.dirs()[1..], &system);
    }

    #[test]
    fn first_hit_wins_and_list_is_sorted_by_lowercased_name() {
        let t = Tree::new();
        write_spec(&t.p("jp/kernels"), "Zeta", "zeta-jp");
        write_spec(&t.p("data/kernels"), "zeta", "zeta-user");
        write_spec(&t.p("data/kernels"), "alpha", "alpha-user");
        write_spec(&t.p("proj"), "Mid", "mid-proj");
        let specs = t.search(&[], false).list();
        let got: Vec<(&str, &str)> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.display_name.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("alpha", "alpha-user"),
                ("mid", "mid-proj"),
                ("zeta", "zeta-jp")
            ]
        );
    }

    #[test]
    fn find_is_case_insensitive_and_keeps_the_real_resource_dir() {
        let t = Tree::new();
        write_spec(&t.p("data/kernels"), "Python3", "Python 3");
        let spec = t.search(&[], false).find("PYTHON3").unwrap();
        assert_eq!(spec.name, "python3");
        assert_eq!(spec.resource_dir, t.p("data/kernels/Python3"));
    }

    #[test]
    fn invalid_spec_is_skipped_and_does_not_shadow_a_later_one() {
        let t = Tree::new();
        let bad = t.p("jp/kernels/k");
        fs::create_dir_all(&bad).unwrap();
        fs::write(bad.join("kernel.json"), r#"{"display_name": "no argv"}"#).unwrap();
        fs::create_dir_all(t.p("jp/kernels/not-a-kernel")).unwrap();
        fs::write(t.p("jp/kernels/stray-file"), "x").unwrap();
        write_spec(&t.p("data/kernels"), "k", "good");
        let s = t.search(&[], false);
        assert_eq!(display_of(&s, "k"), "good");
        let names: Vec<String> = s.list().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["k"]);
    }

    #[test]
    fn kernel_not_found_lists_available_names_and_searched_dirs() {
        let t = Tree::new();
        write_spec(&t.p("data/kernels"), "python3", "Python 3");
        write_spec(&t.p("proj"), "bash", "Bash");
        let s = t.search(&[], false);
        let err = s.find("julia").unwrap_err();
        assert_eq!(err.name, "julia");
        assert_eq!(err.available, ["bash", "python3"]);
        assert_eq!(err.searched, s.dirs());
        let msg = err.to_string();
        assert!(msg.contains("Kernel 'julia' not found"), "{msg}");
        assert!(msg.contains("Available: bash, python3"), "{msg}");
        assert!(
            msg.contains(&t.p("jp/kernels").display().to_string()),
            "{msg}"
        );
        assert!(msg.contains(&t.p("proj").display().to_string()), "{msg}");
    }

    #[test]
    fn list_is_cached_and_a_find_miss_rereads_the_directories() {
        let t = Tree::new();
        write_spec(&t.p("data/kernels"), "a", "A");
        let s = t.search(&[], false);
        let names = |s: &KernelSearch| s.list().into_iter().map(|k| k.name).collect::<Vec<_>>();
        assert_eq!(names(&s), ["a"]);
        write_spec(&t.p("data/kernels"), "b", "B");
        assert_eq!(names(&s), ["a"], "list() answers from the cache");
        assert_eq!(
            display_of(&s, "b"),
            "B",
            "a miss reads the directories again"
        );
        assert_eq!(names(&s), ["a", "b"]);
    }

    #[test]
    fn find_of_a_spec_whose_kernel_json_vanished_rereads_the_directories() {
        let t = Tree::new();
        write_spec(&t.p("jp/kernels"), "k", "first");
        write_spec(&t.p("data/kernels"), "k", "second");
        let s = t.search(&[], false);
        assert_eq!(display_of(&s, "k"), "first");
        fs::remove_dir_all(t.p("jp/kernels/k")).unwrap();
        assert_eq!(display_of(&s, "k"), "second");
        fs::remove_dir_all(t.p("data/kernels/k")).unwrap();
        let err = s.find("k").unwrap_err();
        assert!(err.available.is_empty(), "{err}");
    }
}
