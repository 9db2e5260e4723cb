//! Which directories a sandboxed kernel may ever be granted, whatever asks for them: the
//! session's cwd, a path entry of its environment (`PYTHONPATH`, `R_LIBS`…), the prefix of
//! the kernel's interpreter. One set of rules, checked by the registry before a sandboxed
//! session starts (its cwd and environment) and by the supervisor for every grant it derives
//! (docs/sandbox.md, "Attacker's checklist").
//!
//! Never granted, for reading or writing, nor anything that contains them:
//! - `/`; the user's home or a directory above it (`/home` included);
//! - `/tmp`, `/var/tmp` and `/run` themselves (shared by every user and program);
//! - kernel-mcp's own directories — the runtime directory (connection files and their HMAC
//!   keys, broker sockets, the helper module), the service socket's directory (its token),
//!   the state directory (journals, spool and transit files), the config directory — and
//!   every `kernel-mcp-*` directory in the temporary directory (a kernel's private tmp);
//! - the home's credential stores (`~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.kube`, `~/.docker`,
//!   keyrings, `~/.netrc`…) and Jupyter's runtime directory (other kernels' keys).
//!
//! The cwd additionally may not lie in a hidden directory of the home (`~/.config`,
//! `~/.local`, `~/.ipython`: what the user's own programs load and run) nor in a system
//! directory (`/etc`, `/usr`, `/var/lib`…): the cwd is where a `workspace` kernel writes.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Credential stores, relative to the home directory.
const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".pypirc",
    ".npmrc",
    ".config/gcloud",
    ".config/gh",
    ".local/share/keyrings",
    ".local/share/jupyter/runtime",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
];

/// The directories of programs and their libraries: every sandboxed kernel reads them
/// ([`Plan`](super::paths::Plan)), and no cwd may be in one.
pub(super) const PROGRAM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// System directories no cwd may be in (a `workspace` kernel writes its cwd), besides
/// [`PROGRAM_DIRS`].
const SYSTEM: &[&str] = &[
    "/etc",
    "/boot",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/lib",
    "/var/log",
    "/var/spool",
    "/var/cache",
    "/var/mail",
    "/var/run",
    "/var/lock",
    "/nix",
    "/snap",
];

/// Shared directories never granted themselves (what is inside them may be).
const SHARED: &[&str] = &["/tmp", "/var/tmp", "/run", "/home"];

/// What a path is granted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The session's working directory (read, and written under `workspace`).
    Cwd,
    /// Read only: an interpreter's prefix, a library path.
    Read,
}

/// Why a path may not be granted: the rule, in words, and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {}", .path.display(), .why)]
pub struct Refusal {
    /// The path (as checked: absolute, symlinks resolved).
    pub path: PathBuf,
    /// The rule it breaks, as the end of a sentence starting with the path.
    pub why: String,
}

/// The directories kernel-mcp protects from sandboxed kernels (see the module docs), for one
/// user. Built by the server ([`Protected::for_user`]) and handed to each supervisor, so a
/// session's environment (a `HOME` of its own) cannot move them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protected {
    /// The user's home directories (`$HOME`, and the account's home when it differs).
    pub homes: Vec<PathBuf>,
    /// kernel-mcp's runtime, socket, state and config directories.
    pub kernel_mcp: Vec<PathBuf>,
    /// The temporary directories whose `kernel-mcp-*` entries are kernel-mcp's.
    pub tmp: Vec<PathBuf>,
    /// Credential stores and other programs' key directories.
    pub credentials: Vec<PathBuf>,
}

impl Protected {
    /// The directories of the user running this process, from its environment: `HOME` (and
    /// the account's home), the runtime directory (`JUPYTER_RUNTIME_DIR`, else
    /// `$XDG_RUNTIME_DIR/kernel-mcp`, else `<tmp>/kernel-mcp-<uid>`), `KERNEL_MCP_SOCKET`'s
    /// directory, `$XDG_STATE_HOME/kernel-mcp` (else `~/.local/state/kernel-mcp`),
    /// `$XDG_CONFIG_HOME/kernel-mcp` (else `~/.config/kernel-mcp`).
    pub fn for_user() -> Protected {
        let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
        let abs = |k: &str| env(k).filter(|p| p.is_absolute());
        let mut homes: Vec<PathBuf> = abs("HOME").into_iter().collect();
        if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::getuid())
            && user.dir.is_absolute()
            && !homes.contains(&user.dir)
        {
            homes.push(user.dir);
        }
        let home = homes.first().cloned();
        let mut kernel_mcp = vec![crate::kernel::connection::runtime_dir_path()];
        kernel_mcp.extend(abs("JUPYTER_RUNTIME_DIR"));
        if let Some(socket) = abs("KERNEL_MCP_SOCKET")
            && let Some(dir) = socket.parent()
        {
            kernel_mcp.push(dir.to_path_buf());
        }
        let xdg = |var: &str, fallback: &str| {
            abs(var)
                .or_else(|| home.as_ref().map(|h| h.join(fallback)))
                .map(|d| d.join("kernel-mcp"))
        };
        kernel_mcp.extend(xdg("XDG_STATE_HOME", ".local/state"));
        kernel_mcp.extend(xdg("XDG_CONFIG_HOME", ".config"));
        let mut tmp = vec![std::env::temp_dir(), PathBuf::from("/tmp")];
        tmp.dedup();
        let credentials = homes
            .iter()
            .flat_map(|h| CREDENTIALS.iter().map(move |c| h.join(c)))
            .collect();
        let mut p = Protected {
            homes,
            kernel_mcp,
            tmp,
            credentials,
        };
        p.canonicalize();
        p
    }

    /// Protect `dir` too, as one of kernel-mcp's (a service socket given with `--socket`).
    pub fn with_kernel_mcp_dir(mut self, dir: &Path) -> Protected {
        self.kernel_mcp.push(real(dir));
        self
    }

    /// Every path with its symlinks resolved where it exists (what Landlock sees).
    fn canonicalize(&mut self) {
        for list in [
            &mut self.homes,
            &mut self.kernel_mcp,
            &mut self.tmp,
            &mut self.credentials,
        ] {
            let mut out: Vec<PathBuf> = Vec::new();
            for p in list.drain(..) {
                for q in [real(&p), p] {
                    if !out.contains(&q) {
                        out.push(q);
                    }
                }
            }
            *list = out;
        }
    }

    /// Ok when `path` may be granted as `use_`; else the rule it breaks. `path` is made
    /// absolute and its symlinks resolved first (a link into `~/.ssh` is `~/.ssh`).
    pub fn check(&self, path: &Path, use_: Use) -> Result<(), Refusal> {
        let p = real(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        let refuse = |why: String| {
            Err(Refusal {
                path: p.clone(),
                why,
            })
        };
        if p == Path::new("/") {
            return refuse("is the root of the filesystem: everything would be granted".into());
        }
        for h in &self.homes {
            if h.starts_with(&p) {
                return refuse(if *h == p {
                    "is the home directory: it holds ~/.ssh, ~/.bashrc and every other project"
                        .into()
                } else {
                    format!("holds the home directory {}", h.display())
                });
            }
        }
        if SHARED.iter().any(|s| p == Path::new(s)) {
            return refuse("is shared by every user and program on this host".into());
        }
        if let Some(d) = self.kernel_mcp.iter().find(|d| overlap(&p, d)) {
            return refuse(format!(
                "overlaps kernel-mcp's own directory {} (connection files and their keys, broker sockets, journals)",
                d.display()
            ));
        }
        if let Some(d) = self.private_tmp_in(&p) {
            return refuse(format!(
                "is inside {}, a private directory of kernel-mcp or of another kernel",
                d.display()
            ));
        }
        if let Some(c) = self.credentials.iter().find(|c| overlap(&p, c)) {
            return refuse(format!("overlaps {}, which holds credentials", c.display()));
        }
        if use_ == Use::Cwd {
            if let Some(h) = self.homes.iter().find(|h| hidden_in(&p, h)) {
                return refuse(format!(
                    "is in a hidden directory of the home {}: configuration the user's own programs load and run",
                    h.display()
                ));
            }
            let mut system = SYSTEM.iter().chain(PROGRAM_DIRS);
            if let Some(s) = system.find(|s| overlap(&p, Path::new(s))) {
                return refuse(format!("overlaps the system directory {s}"));
            }
        }
        Ok(())
    }

    /// The `<tmp>/kernel-mcp-*` directory `p` is in (or is), if any.
    fn private_tmp_in(&self, p: &Path) -> Option<PathBuf> {
        self.tmp.iter().find_map(|t| {
            let rest = p.strip_prefix(t).ok()?;
            let first = rest.components().next()?;
            let name = first.as_os_str().to_string_lossy();
            name.starts_with("kernel-mcp-").then(|| t.join(&*name))
        })
    }
}

/// True when one of `a`, `b` contains the other.
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// True when `p` is in (or is) a hidden directory of `home`: `~/.config/x`.
fn hidden_in(p: &Path, home: &Path) -> bool {
    match p
        .strip_prefix(home)
        .ok()
        .and_then(|r| r.components().next())
    {
        Some(Component::Normal(first)) => first.to_string_lossy().starts_with('.'),
        _ => false,
    }
}

/// `p` with its symlinks resolved, or as it is when it does not exist.
fn real(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ada() -> Protected {
        Protected {
            homes: vec![PathBuf::from("/home/ada")],
            kernel_mcp: vec![
                PathBuf::from("/run/user/1000/kernel-mcp"),
                PathBuf::from("/home/ada/.local/state/kernel-mcp"),
            ],
            tmp: vec![PathBuf::from("/tmp")],
            credentials: vec![PathBuf::from("/home/ada/.ssh")],
        }
    }

    fn refused(p: &str, use_: Use) -> bool {
        ada().check(Path::new(p), use_).is_err()
    }

    #[test]
    fn the_root_the_home_and_above_and_shared_roots_are_never_granted() {
        for p in ["/", "/home", "/home/ada", "/tmp", "/var/tmp", "/run"] {
            assert!(refused(p, Use::Read), "{p}");
            assert!(refused(p, Use::Cwd), "{p}");
        }
        let e = ada().check(Path::new("/home"), Use::Cwd).unwrap_err();
        assert!(e.to_string().contains("holds the home directory"), "{e}");
    }

    #[test]
    fn kernel_mcps_directories_overlap_either_way_and_private_tmps_are_out() {
        for p in [
            "/run/user/1000",
            "/run/user/1000/kernel-mcp/sandbox-1",
            "/home/ada/.local/state",
            "/tmp/kernel-mcp-0",
            "/tmp/kernel-mcp-sandbox-abc/x",
            "/home/ada/.ssh/keys",
        ] {
            let e = ada().check(Path::new(p), Use::Read).unwrap_err();
            assert!(!e.why.is_empty(), "{p}");
        }
        assert!(!refused("/tmp/.tmpXYZ", Use::Cwd));
        assert!(!refused("/tmp/kernel-mcpx", Use::Cwd));
    }

    #[test]
    fn a_cwd_is_neither_hidden_in_the_home_nor_a_system_directory_but_a_prefix_may_be() {
        assert!(refused("/home/ada/.config/x", Use::Cwd));
        assert!(refused("/usr/local/bin", Use::Cwd));
        assert!(refused("/var", Use::Cwd), "holds /var/lib");
        assert!(!refused("/home/ada/.pyenv/versions/3.12", Use::Read));
        assert!(!refused("/usr", Use::Read));
        assert!(!refused("/home/ada/project", Use::Cwd));
        assert!(!refused("/srv/data/project", Use::Cwd));
    }

    #[test]
    fn for_user_protects_this_processs_runtime_and_home() {
        let p = Protected::for_user();
        let runtime = real(&crate::kernel::connection::runtime_dir_path());
        assert!(p.kernel_mcp.contains(&runtime), "{p:?}");
        assert!(p.check(&runtime.join("x"), Use::Read).is_err());
        if let Some(h) = p.homes.first() {
            assert!(p.check(h, Use::Read).is_err());
            assert!(p.check(&h.join(".ssh"), Use::Read).is_err());
        }
    }
}
