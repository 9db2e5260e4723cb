//! What a sandbox policy lets a kernel read and write, computed by the supervisor from the
//! kernel's argv, its environment and the session (docs/sandbox.md, "Policies").
//!
//! - **Read and execute**: the system (`/usr`, `/bin`, `/sbin`, `/lib*`, `/proc`, `/sys`,
//!   `/nix/store`, `/var/cache/fontconfig`, and `/etc` but for the files that hold secrets
//!   such as `shadow`, `sudoers`, `ssh`, `ssl/private`); every prefix the kernel's programs
//!   live in — the directory above the `bin/` of argv[0] and of each absolute path in argv,
//!   before and after resolving symlinks, and the base interpreter a venv's `pyvenv.cfg`
//!   points at (a venv's `python` is often a symlink into a pyenv or system Python); the
//!   entries of the kernel's `PATH`, `PYTHONPATH`, `R_LIBS*`, `LD_LIBRARY_PATH`; the
//!   kernelspec's resource directory.
//! - **Write**: the session's cwd (not under `read-only`), the kernel's private tmp (also its
//!   `IPYTHONDIR`, `MPLCONFIGDIR` and `XDG_CACHE_HOME`), `/dev/shm` (POSIX semaphores:
//!   `multiprocessing` needs them) and the terminal and null devices.
//! - **Read only**: the directory of its connection file (its own key, its broker endpoint
//!   file, its copy of the `kernel_mcp` helper). ipykernel rewrites an existing connection
//!   file only when it differs from what it bound, which it never does here.
//!
//! Every path the argv or the environment names goes through [`rules`](super::rules) first (never `/`, the
//! home or above it, `/tmp`, kernel-mcp's directories, credential stores…): a refused one is
//! left out (and listed in [`Plan::dropped`]); a refused cwd, or a refused prefix of the
//! kernel's own program, refuses the plan.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Policy;
use super::rules::{PROGRAM_DIRS, Protected, Refusal, Use};

/// System directories a sandboxed kernel reads (those that exist), besides
/// [`PROGRAM_DIRS`].
const SYSTEM_READ: &[&str] = &["/proc", "/sys", "/nix/store", "/var/cache/fontconfig"];

/// Entries of `/etc` that hold secrets (readable only by root, but root runs kernels too).
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssh",
    "security",
    "NetworkManager",
    "wireguard",
    "letsencrypt",
    "ipsec.secrets",
    "ipsec.d",
    "krb5.keytab",
    "docker",
    "libvirt",
];

/// Directories of `/etc` whose entries are granted one by one, all but `private`.
const ETC_SPLIT: &[&str] = &["ssl", "pki"];

/// Devices a sandboxed kernel reads and writes (pseudo-terminals for pexpect-driven kernels).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Environment variables whose `:`-separated entries name what the kernel loads.
pub const PATH_VARS: &[&str] = &[
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "R_HOME",
    "R_LIBS",
    "R_LIBS_USER",
    "R_LIBS_SITE",
    "LD_LIBRARY_PATH",
    "OCTAVE_HOME",
    "JUPYTER_PATH",
];

/// The inputs of a plan.
pub struct PlanInput<'a> {
    pub policy: Policy,
    /// The kernel's working directory.
    pub cwd: &'a Path,
    /// The kernel's argv (after `--`).
    pub argv: &'a [String],
    /// The kernel's environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The directory holding the connection file (the kernel's own, read-only to it).
    pub connection_dir: &'a Path,
    /// The kernel's private tmp (already created).
    pub private_tmp: &'a Path,
    /// What is never granted (see [`rules`](super::rules)).
    pub protected: &'a Protected,
}

/// The filesystem a kernel may reach.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Read and execute (directories or files).
    pub read: Vec<PathBuf>,
    /// Everything (directories).
    pub write: Vec<PathBuf>,
    /// Read, write and ioctl (device files and `/dev/pts`).
    pub devices: Vec<PathBuf>,
    /// Paths the kernel's argv or environment named that the rules keep out (said on the
    /// kernel's stderr, so a start that fails for want of one shows why).
    pub dropped: Vec<Refusal>,
}

impl Plan {
    /// Build the plan for `input` (paths that do not exist are left out).
    /// Errors: the cwd, or the prefix of the kernel's own program (argv\[0\]), breaks a rule
    /// of [`rules`](super::rules): the kernel would not run without it, so it is not started.
    pub fn build(input: &PlanInput<'_>) -> Result<Plan, Refusal> {
        let protected = input.protected;
        let cwd = input
            .cwd
            .canonicalize()
            .unwrap_or_else(|_| input.cwd.to_path_buf());
        protected.check(&cwd, Use::Cwd)?;
        let mut read = BTreeSet::new();
        for d in PROGRAM_DIRS.iter().chain(SYSTEM_READ) {
            read.insert(PathBuf::from(d));
        }
        read.extend(etc_entries(Path::new("/etc")));
        let program = input
            .argv
            .first()
            .and_then(|a| resolve(a, input.env))
            .filter(|exe| !exe.starts_with(input.connection_dir));
        if let Some(exe) = &program {
            for p in program_paths(exe) {
                if p.is_dir() {
                    protected.check(&p, Use::Read)?;
                }
                read.insert(p);
            }
        }
        for arg in input.argv.iter().skip(1).filter(|a| a.starts_with('/')) {
            match resolve(arg, input.env) {
                Some(exe) if !exe.starts_with(input.connection_dir) => {
                    read.extend(program_paths(&exe))
                }
                _ => {}
            }
        }
        for var in PATH_VARS {
            if let Some(v) = (input.env)(var) {
                read.extend(
                    v.split(':')
                        .filter(|e| e.starts_with('/'))
                        .map(PathBuf::from),
                );
            }
        }
        let mut dropped = Vec::new();
        read.retain(|p| {
            if !p.exists() {
                return false;
            }
            match protected.check(p, Use::Read) {
                Ok(()) => true,
                Err(r) => {
                    dropped.push(r);
                    false
                }
            }
        });
        // The supervisor's own grants, which the rules would refuse (they sit in
        // kernel-mcp's directories): the kernel's private tmp and `/dev/shm` to write, its
        // connection file's directory (its key, its broker endpoint, its copy of the helper
        // module) to read.
        read.insert(input.connection_dir.to_path_buf());
        let mut write = BTreeSet::new();
        write.insert(input.private_tmp.to_path_buf());
        if Path::new("/dev/shm").is_dir() {
            write.insert(PathBuf::from("/dev/shm"));
        }
        match input.policy {
            Policy::Workspace => write.insert(cwd),
            Policy::ReadOnly | Policy::None => read.insert(cwd),
        };
        Ok(Plan {
            read: read.into_iter().filter(|p| !write.contains(p)).collect(),
            write: write.into_iter().collect(),
            devices: DEVICES
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect(),
            dropped,
        })
    }
}

/// The entries of `/etc` a kernel may read: all but [`ETC_SECRETS`], with [`ETC_SPLIT`]
/// directories granted entry by entry (without `private`), and the targets of symlinks
/// (`/etc/resolv.conf` often points into `/run`).
fn etc_entries(etc: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(etc) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if ETC_SECRETS.contains(&name.as_ref()) {
            continue;
        }
        let path = e.path();
        if ETC_SPLIT.contains(&name.as_ref()) && path.is_dir() {
            if let Ok(inner) = std::fs::read_dir(&path) {
                out.extend(
                    inner
                        .flatten()
                        .filter(|i| i.file_name() != "private")
                        .map(|i| i.path()),
                );
            }
            continue;
        }
        if path.is_symlink()
            && let Ok(target) = path.canonicalize()
            && !target.starts_with(etc)
        {
            out.push(target);
        }
        out.push(path);
    }
    out
}

/// `arg` as an absolute path: itself, or found on the kernel's `PATH`.
fn resolve(arg: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let p = Path::new(arg);
    if p.is_absolute() {
        return p.exists().then(|| p.to_path_buf());
    }
    let path = env("PATH")?;
    which::which_in(arg, Some(path), "/").ok()
}

/// What running `exe` needs: the file, and the prefix above its `bin/` — before and after
/// resolving symlinks — plus the base interpreter of a venv prefix (`pyvenv.cfg`'s `home`).
fn program_paths(exe: &Path) -> Vec<PathBuf> {
    let mut out = vec![exe.to_path_buf()];
    let mut exes = vec![exe.to_path_buf()];
    if let Ok(real) = exe.canonicalize()
        && real != exe
    {
        out.push(real.clone());
        exes.push(real);
    }
    for e in exes {
        let Some(prefix) = prefix_of(&e) else {
            continue;
        };
        if let Some(home) = venv_home(&prefix)
            && let Some(base) = prefix_of(&home.join("python"))
        {
            out.push(base);
        }
        out.push(prefix);
    }
    out
}

/// `/x/y` for `/x/y/bin/prog` (or `sbin`); the directory of `prog` otherwise. `None` for a
/// program of `/bin` or `/sbin`: the system, read already.
fn prefix_of(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    let prefix = match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin" | "sbin") => dir.parent()?,
        _ => dir,
    };
    (prefix != Path::new("/")).then(|| prefix.to_path_buf())
}

/// The `home = …` of `<prefix>/pyvenv.cfg`: the base interpreter's `bin` directory.
fn venv_home(prefix: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(prefix.join("pyvenv.cfg")).ok()?;
    cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_python_brings_its_prefix_and_its_base_interpreter() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("pyenv/3.11");
        std::fs::create_dir_all(base.join("bin")).unwrap();
        std::fs::write(base.join("bin/python3.11"), "").unwrap();
        let venv = root.path().join("proj/.venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\nversion = 3.11\n", base.join("bin").display()),
        )
        .unwrap();
        let got = program_paths(&venv.join("bin/python"));
        let base = base.canonicalize().unwrap();
        assert!(got.contains(&venv), "{got:?}");
        assert!(got.contains(&base), "{got:?}");
    }

    fn protected_home(home: &Path) -> Protected {
        Protected {
            homes: vec![home.to_path_buf()],
            ..Default::default()
        }
    }

    #[test]
    fn workspace_writes_its_cwd_and_read_only_only_reads_it() {
        let cwd = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let conn = tempfile::tempdir().unwrap();
        let env = |k: &str| (k == "HOME").then(|| "/nonexistent-home".to_string());
        let argv = vec!["/bin/sh".to_string()];
        let protected = protected_home(Path::new("/nonexistent-home"));
        let input = |policy| PlanInput {
            policy,
            cwd: cwd.path(),
            argv: &argv,
            env: &env,
            connection_dir: conn.path(),
            private_tmp: tmp.path(),
            protected: &protected,
        };
        let real = cwd.path().canonicalize().unwrap();
        let ws = Plan::build(&input(Policy::Workspace)).unwrap();
        assert!(ws.write.contains(&real), "{ws:?}");
        assert!(ws.write.contains(&tmp.path().to_path_buf()), "{ws:?}");
        assert!(
            ws.read.contains(&conn.path().to_path_buf())
                && !ws.write.contains(&conn.path().to_path_buf()),
            "its connection file's directory is read-only: {ws:?}"
        );
        assert!(!ws.read.iter().any(|p| p == Path::new("/etc/shadow")));
        let ro = Plan::build(&input(Policy::ReadOnly)).unwrap();
        assert!(
            !ro.write.contains(&real) && ro.read.contains(&real),
            "{ro:?}"
        );
        assert!(ro.read.contains(&PathBuf::from("/usr")));
    }

    #[test]
    fn a_refused_cwd_or_program_prefix_refuses_the_plan_and_other_paths_are_dropped() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let project = home.join("project");
        std::fs::create_dir_all(home.join("tools/bin")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(home.join("tools/bin/kernel"), "").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let conn = tempfile::tempdir().unwrap();
        let protected = protected_home(&home);
        let path = format!("/usr/bin:{}", home.display());
        let env = move |k: &str| (k == "PATH").then(|| path.clone());
        let plan = |cwd: &Path, argv: &[String]| {
            Plan::build(&PlanInput {
                policy: Policy::Workspace,
                cwd,
                argv,
                env: &env,
                connection_dir: conn.path(),
                private_tmp: tmp.path(),
                protected: &protected,
            })
        };
        let sh = vec!["/bin/sh".to_string()];
        let e = plan(&home, &sh).unwrap_err();
        assert!(e.why.contains("home directory"), "{e}");
        let ok = plan(&project, &sh).unwrap();
        assert!(
            ok.dropped.iter().any(|r| r.path == home),
            "the PATH entry of the home is dropped: {ok:?}"
        );
        assert!(!ok.read.contains(&home));
        // A kernel in ~/tools/bin: its prefix ~/tools is fine; one directly in ~/bin is not.
        let tool = vec![home.join("tools/bin/kernel").display().to_string()];
        assert!(
            plan(&project, &tool)
                .unwrap()
                .read
                .contains(&home.join("tools"))
        );
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::fs::write(home.join("bin/kernel"), "").unwrap();
        let in_home = vec![home.join("bin/kernel").display().to_string()];
        let e = plan(&project, &in_home).unwrap_err();
        assert_eq!(e.path, home, "{e}");
    }
}
