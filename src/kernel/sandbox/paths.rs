//! What a sandbox policy lets a kernel read and write, computed by the supervisor from the
//! kernel's argv, its environment and the session (docs/sandbox.md, "What a sandboxed kernel
//! can reach").
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
//!   `IPYTHONDIR`, `MPLCONFIGDIR` and `XDG_CACHE_HOME`), the directory of its connection file
//!   (ipykernel rewrites the file), `/dev/shm` (POSIX semaphores: `multiprocessing` needs
//!   them) and the terminal and null devices.
//!
//! Never granted through any of the above: `/`, the user's home or a directory above it (a
//! `PATH` entry of `~` would open all of it), `/tmp` itself, `/run`, `/home`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Policy;

/// System directories a sandboxed kernel reads (those that exist).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/sys",
    "/nix/store",
    "/var/cache/fontconfig",
];

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
const PATH_VARS: &[&str] = &[
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
    /// The directory holding the connection file.
    pub connection_dir: &'a Path,
    /// The kernel's private tmp (already created).
    pub private_tmp: &'a Path,
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
}

impl Plan {
    /// Build the plan for `input` (paths that do not exist are left out).
    pub fn build(input: &PlanInput<'_>) -> Plan {
        let home = (input.env)("HOME").map(PathBuf::from);
        let grantable = |p: &Path| grantable(p, home.as_deref());
        let mut read = BTreeSet::new();
        for d in SYSTEM_READ {
            read.insert(PathBuf::from(d));
        }
        read.extend(etc_entries(Path::new("/etc")));
        for arg in input
            .argv
            .iter()
            .take(1)
            .chain(input.argv.iter().skip(1).filter(|a| a.starts_with('/')))
        {
            let Some(exe) = resolve(arg, input.env) else {
                continue;
            };
            if exe.starts_with(input.connection_dir) {
                continue;
            }
            read.extend(program_paths(&exe));
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
        let mut write = BTreeSet::new();
        write.insert(input.private_tmp.to_path_buf());
        write.insert(input.connection_dir.to_path_buf());
        write.insert(PathBuf::from("/dev/shm"));
        let keep = |set: BTreeSet<PathBuf>| -> BTreeSet<PathBuf> {
            set.into_iter()
                .filter(|p| p.exists() && grantable(p))
                .collect()
        };
        let (mut read, mut write) = (keep(read), keep(write));
        // The cwd is the session's choice, so it is granted even when it is the home
        // directory; never `/` (the registry refuses a sandboxed session there).
        let cwd = input
            .cwd
            .canonicalize()
            .unwrap_or_else(|_| input.cwd.to_path_buf());
        if cwd != Path::new("/") {
            match input.policy {
                Policy::Workspace => write.insert(cwd),
                Policy::ReadOnly | Policy::None => read.insert(cwd),
            };
        }
        Plan {
            read: read.into_iter().filter(|p| !write.contains(p)).collect(),
            write: write.into_iter().collect(),
            devices: DEVICES
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect(),
        }
    }
}

/// False for `/`, `/tmp`, `/home`, `/run` and the user's home or any directory above it.
fn grantable(p: &Path, home: Option<&Path>) -> bool {
    let never = [
        Path::new("/"),
        Path::new("/tmp"),
        Path::new("/home"),
        Path::new("/run"),
    ];
    if never.contains(&p) {
        return false;
    }
    match home {
        Some(h) => !h.starts_with(p),
        None => true,
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

/// `/x/y` for `/x/y/bin/prog` (or `sbin`); the directory of `prog` otherwise.
fn prefix_of(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin" | "sbin") => dir.parent().map(Path::to_path_buf),
        _ => Some(dir.to_path_buf()),
    }
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
    fn home_and_its_ancestors_and_the_shared_roots_are_never_granted() {
        let home = Some(Path::new("/home/ada"));
        for p in ["/", "/home", "/home/ada", "/tmp", "/run"] {
            assert!(!grantable(Path::new(p), home), "{p}");
        }
        assert!(grantable(Path::new("/home/ada/.pyenv/versions/3.12"), home));
        assert!(grantable(Path::new("/usr"), home));
    }

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

    #[test]
    fn workspace_writes_its_cwd_and_read_only_only_reads_it() {
        let cwd = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let conn = tempfile::tempdir().unwrap();
        let env = |k: &str| (k == "HOME").then(|| "/nonexistent-home".to_string());
        let argv = vec!["/bin/sh".to_string()];
        let input = |policy| PlanInput {
            policy,
            cwd: cwd.path(),
            argv: &argv,
            env: &env,
            connection_dir: conn.path(),
            private_tmp: tmp.path(),
        };
        let real = cwd.path().canonicalize().unwrap();
        let ws = Plan::build(&input(Policy::Workspace));
        assert!(ws.write.contains(&real), "{ws:?}");
        assert!(ws.write.contains(&tmp.path().to_path_buf()), "{ws:?}");
        assert!(ws.write.contains(&conn.path().to_path_buf()), "{ws:?}");
        assert!(!ws.read.iter().any(|p| p == Path::new("/etc/shadow")));
        let ro = Plan::build(&input(Policy::ReadOnly));
        assert!(
            !ro.write.contains(&real) && ro.read.contains(&real),
            "{ro:?}"
        );
        assert!(ro.read.contains(&PathBuf::from("/usr")));
    }
}
