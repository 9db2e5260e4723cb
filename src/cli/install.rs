//! `kernel-mcp install --client claude|codex|kiro|cursor [--shared] [--scope project|user]
//! [--dry-run]`: writes kernel-mcp's entry into an MCP client's config file.
//!
//! The entry runs this very binary by its absolute path (or `uvx kernel-mcp` / `pipx run
//! kernel-mcp` when this binary lives in one of their throw-away caches) and carries the
//! Python environment kernel-mcp selected now as `KERNEL_MCP_PYTHON_ENV`, because MCP clients
//! start servers with a small environment and the shell's `VIRTUAL_ENV` does not reach them.
//!
//! The file is parsed and written back with everything else in it kept: JSON through
//! [`super::ordered_json`] (key order kept), TOML through `toml_edit` (comments and layout
//! kept). The old and new entries are printed before anything is written; `--dry-run` stops
//! there. The write is atomic (a temporary file in the same directory, renamed over the old
//! one, which keeps its permissions) and goes through a symlink to its target. A file that
//! does not parse is left alone.
//!
//! Where each client reads its servers:
//!
//! | client | `--scope user` | `--scope project` | format |
//! |---|---|---|---|
//! | claude (Claude Code) | `~/.claude.json` | `.mcp.json` | `mcpServers.NAME {type, command, args, env}` |
//! | codex | `$CODEX_HOME/config.toml` (`~/.codex`) | `.codex/config.toml` (trusted projects) | `[mcp_servers.NAME]` |
//! | kiro | `~/.kiro/settings/mcp.json` | `.kiro/settings/mcp.json` | `mcpServers.NAME` |
//! | cursor | `~/.cursor/mcp.json` | `.cursor/mcp.json` | `mcpServers.NAME` |

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::env_prefix::{EnvCandidate, EnvSource};
use kernel_mcp::ops::files::{FileError, FileMode, WriteOptions, write_file_blocking};

use super::ordered_json::Json;

/// The clients whose config `install` can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    Claude,
    Codex,
    Kiro,
    Cursor,
}

/// Which of a client's config files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The per-user file: every project sees the server.
    User,
    /// The project's file (in `--project-dir`, default the working directory).
    Project,
}

/// `kernel-mcp install` arguments.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The MCP client to configure.
    #[arg(long, value_enum)]
    pub client: Client,
    /// Run through the per-user service (`serve --shared`), so sessions outlive the client.
    #[arg(long)]
    pub shared: bool,
    /// The client's per-user config, or the project's.
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// Print the change and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The server's name in the client's config.
    #[arg(long, default_value = "kernel-mcp")]
    pub name: String,
    /// The project for `--scope project` (default: the working directory).
    #[arg(long)]
    pub project_dir: Option<PathBuf>,
}

/// What the client runs: program, arguments, environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Where `client` keeps its servers for `scope`. `home` is `$HOME`, `codex_home` is
/// `$CODEX_HOME` (when set), `project` the project directory.
pub fn config_path(
    client: Client,
    scope: Scope,
    home: &Path,
    codex_home: Option<&Path>,
    project: &Path,
) -> PathBuf {
    match (client, scope) {
        (Client::Claude, Scope::User) => home.join(".claude.json"),
        (Client::Claude, Scope::Project) => project.join(".mcp.json"),
        (Client::Codex, Scope::User) => codex_home
            .map(Path::to_path_buf)
            .unwrap_or_else(|| home.join(".codex"))
            .join("config.toml"),
        (Client::Codex, Scope::Project) => project.join(".codex/config.toml"),
        (Client::Kiro, Scope::User) => home.join(".kiro/settings/mcp.json"),
        (Client::Kiro, Scope::Project) => project.join(".kiro/settings/mcp.json"),
        (Client::Cursor, Scope::User) => home.join(".cursor/mcp.json"),
        (Client::Cursor, Scope::Project) => project.join(".cursor/mcp.json"),
    }
}

/// The entry that runs `exe`. A binary in uv's or pipx's cache is run through `uvx` / `pipx
/// run` (found on `PATH` by `which`), since the cache path can vanish. `env` selects
/// `python_env` unless it is the binary's own environment (found again at every start).
pub fn entry_for(
    exe: &Path,
    shared: bool,
    python_env: Option<&EnvCandidate>,
    which: &dyn Fn(&str) -> Option<PathBuf>,
) -> Entry {
    let mut serve = vec!["serve".to_string()];
    if shared {
        serve.push("--shared".into());
    }
    let text = exe.to_string_lossy();
    let runner = if text.contains("/uv/archive-v") {
        which("uvx").map(|p| (p, vec!["kernel-mcp".to_string()]))
    } else if text.contains("/pipx/.cache/") {
        which("pipx").map(|p| (p, vec!["run".to_string(), "kernel-mcp".to_string()]))
    } else {
        None
    };
    let (command, mut args) = match runner {
        Some((p, a)) => (p.display().to_string(), a),
        None => (text.into_owned(), Vec::new()),
    };
    args.extend(serve);
    let env = python_env
        .filter(|c| c.source != EnvSource::OwnInstall)
        .map(|c| {
            let abs = std::path::absolute(&c.prefix).unwrap_or_else(|_| c.prefix.clone());
            vec![(
                "KERNEL_MCP_PYTHON_ENV".to_string(),
                abs.display().to_string(),
            )]
        })
        .unwrap_or_default();
    Entry { command, args, env }
}

/// The change to one config file: its new text, and the old and new entry as shown.
#[derive(Debug)]
pub struct Change {
    pub new_text: String,
    pub old_entry: Option<String>,
    pub new_entry: String,
}

/// Adds or replaces `name` in the client's JSON config `old` (`None`: no file yet).
/// Errors: the file is not JSON, or its `mcpServers` is not an object.
pub fn update_json(
    old: Option<&str>,
    client: Client,
    name: &str,
    entry: &Entry,
) -> Result<Change, String> {
    let mut doc: Json = match old.map(str::trim) {
        None | Some("") => Json::Object(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| format!("it is not JSON: {e}"))?,
    };
    if !matches!(doc, Json::Object(_)) {
        return Err("its top level is not a JSON object".into());
    }
    let servers = doc
        .object_entry("mcpServers")
        .ok_or("its \"mcpServers\" is not an object")?;
    let old_entry = servers.get(name).map(pretty);
    let mut fields: Vec<(String, Json)> = Vec::new();
    if client == Client::Claude {
        fields.push(("type".into(), Json::String("stdio".into())));
    }
    fields.push(("command".into(), Json::String(entry.command.clone())));
    fields.push((
        "args".into(),
        Json::Array(entry.args.iter().cloned().map(Json::String).collect()),
    ));
    fields.push((
        "env".into(),
        Json::Object(
            entry
                .env
                .iter()
                .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                .collect(),
        ),
    ));
    let new = Json::Object(fields);
    let new_entry = pretty(&new);
    servers.set(name, new);
    let mut new_text = pretty(&doc);
    new_text.push('\n');
    Ok(Change {
        new_text,
        old_entry,
        new_entry,
    })
}

fn pretty(v: &Json) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Adds or replaces `[mcp_servers.NAME]` in Codex's TOML config `old`, keeping the rest
/// (comments included). Errors: not TOML, or `mcp_servers` is not a table.
pub fn update_toml(old: Option<&str>, name: &str, entry: &Entry) -> Result<Change, String> {
    let mut doc: toml_edit::DocumentMut = old
        .unwrap_or_default()
        .parse()
        .map_err(|e| format!("it is not TOML: {e}"))?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            // No bare `[mcp_servers]` header: only `[mcp_servers.NAME]`.
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or("its `mcp_servers` is not a table")?;
    let old_entry = servers.get(name).map(|item| {
        let mut t = toml_edit::DocumentMut::new();
        t.insert(name, item.clone());
        t.to_string().trim_end().to_string()
    });
    let mut table = toml_edit::Table::new();
    table.insert("command", toml_edit::value(entry.command.as_str()));
    let mut args = toml_edit::Array::new();
    for a in &entry.args {
        args.push(a.as_str());
    }
    table.insert("args", toml_edit::value(args));
    // Codex gives a tool call 60 s by default; `execute` may wait 50 s before it answers.
    table.insert("tool_timeout_sec", toml_edit::value(120));
    if !entry.env.is_empty() {
        let mut env = toml_edit::InlineTable::new();
        for (k, v) in &entry.env {
            env.insert(k, v.as_str().into());
        }
        table.insert("env", toml_edit::value(env));
    }
    let mut shown = toml_edit::DocumentMut::new();
    let mut shown_servers = toml_edit::Table::new();
    shown_servers.set_implicit(true);
    shown_servers.insert(name, toml_edit::Item::Table(table.clone()));
    shown.insert("mcp_servers", toml_edit::Item::Table(shown_servers));
    servers.insert(name, toml_edit::Item::Table(table));
    Ok(Change {
        new_text: doc.to_string(),
        old_entry,
        new_entry: shown.to_string().trim_end().to_string(),
    })
}

/// Writes `text` to `path` atomically with the server's own file writer: a temporary file
/// next to the real file, flushed to disk, renamed over it. A symlinked config (a dotfiles
/// repository's, as stow, chezmoi and home-manager link them) is written through: its target
/// gets the new text and the link stays a link. The old file's permissions carry over; a new
/// file is 0600 (a client's config can hold credentials).
pub fn write_atomic(path: &Path, text: &str) -> Result<(), FileError> {
    let opts = WriteOptions {
        mode: FileMode::KeepNewPrivate,
        sync: true,
    };
    write_file_blocking(path, text.as_bytes(), opts)
}

/// Runs `kernel-mcp install`. `python_env` is the environment kernel-mcp selected.
pub fn run(args: &InstallArgs, python_env: Option<&EnvCandidate>) -> ExitCode {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let Some(home) = home else {
        eprintln!("kernel-mcp install: $HOME is not set; set it to your home directory.");
        return ExitCode::FAILURE;
    };
    let codex_home = std::env::var_os("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let project = args
        .project_dir
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let project = std::path::absolute(&project).unwrap_or(project);
    let path = config_path(
        args.client,
        args.scope,
        &home,
        codex_home.as_deref(),
        &project,
    );
    let exe = match std::env::current_exe() {
        Ok(e) => std::fs::canonicalize(&e).unwrap_or(e),
        Err(e) => {
            eprintln!("kernel-mcp install: cannot find this program's own path: {e}");
            return ExitCode::FAILURE;
        }
    };
    let entry = entry_for(&exe, args.shared, python_env, &|n| which::which(n).ok());
    let old = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            eprintln!("kernel-mcp install: cannot read {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let change = match args.client {
        Client::Codex => update_toml(old.as_deref(), &args.name, &entry),
        _ => update_json(old.as_deref(), args.client, &args.name, &entry),
    };
    let change = match change {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "kernel-mcp install: {} was left as it is because {e}. Fix the file (or move it aside) and run this again.",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let verb = if old.is_none() { "create" } else { "update" };
    println!("{verb} {}:", path.display());
    match &change.old_entry {
        Some(o) => println!("--- the entry '{}' now\n{o}", args.name),
        None => println!("--- no entry '{}' yet", args.name),
    }
    let place = match args.client {
        Client::Codex => String::new(),
        _ => format!(" (mcpServers.{:?})", args.name),
    };
    println!("+++ the new entry{place}\n{}", change.new_entry);
    if python_env.is_none() {
        println!(
            "note: no Python environment is selected, so kernels use `python3` from PATH. Pass --python-env /path/to/venv (a venv with ipykernel) to put it in the entry; `kernel-mcp doctor` shows what is found."
        );
    }
    if args.dry_run {
        println!("dry run: nothing written.");
        return ExitCode::SUCCESS;
    }
    if old.as_deref() == Some(change.new_text.as_str()) {
        println!("unchanged: the entry is already there.");
        return ExitCode::SUCCESS;
    }
    match write_atomic(&path, &change.new_text) {
        Ok(()) => {
            println!(
                "written. Restart the client (or reload its MCP servers) to start kernel-mcp; `kernel-mcp doctor` checks the setup."
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kernel-mcp install: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(source: EnvSource) -> EnvCandidate {
        EnvCandidate {
            prefix: PathBuf::from("/envs/k"),
            source,
        }
    }

    #[test]
    fn entry_runs_this_binary_and_names_a_chosen_environment() {
        let e = entry_for(
            Path::new("/opt/km/bin/kernel-mcp"),
            false,
            Some(&env(EnvSource::VirtualEnv)),
            &|_| None,
        );
        assert_eq!(e.command, "/opt/km/bin/kernel-mcp");
        assert_eq!(e.args, ["serve"]);
        assert_eq!(
            e.env,
            [("KERNEL_MCP_PYTHON_ENV".to_string(), "/envs/k".to_string())]
        );
    }

    #[test]
    fn entry_leaves_out_the_binary_s_own_environment() {
        let e = entry_for(
            Path::new("/envs/k/bin/kernel-mcp"),
            true,
            Some(&env(EnvSource::OwnInstall)),
            &|_| None,
        );
        assert!(e.env.is_empty(), "{e:?}");
        assert_eq!(e.args, ["serve", "--shared"]);
    }

    #[test]
    fn a_binary_in_uv_s_cache_is_run_through_uvx() {
        let exe = Path::new("/home/u/.cache/uv/archive-v0/abc/bin/kernel-mcp");
        let uvx = |n: &str| (n == "uvx").then(|| PathBuf::from("/usr/local/bin/uvx"));
        let e = entry_for(exe, false, None, &uvx);
        assert_eq!(e.command, "/usr/local/bin/uvx");
        assert_eq!(e.args, ["kernel-mcp", "serve"]);
        // Without uvx on PATH the cache path is all there is.
        let e = entry_for(exe, false, None, &|_| None);
        assert_eq!(e.command, exe.display().to_string());
    }

    #[test]
    fn json_without_a_file_gets_a_fresh_mcp_servers_object() {
        let entry = Entry {
            command: "/k".into(),
            args: vec!["serve".into()],
            env: vec![],
        };
        let c = update_json(None, Client::Cursor, "kernel-mcp", &entry).unwrap();
        let v: serde_json::Value = serde_json::from_str(&c.new_text).unwrap();
        assert_eq!(v["mcpServers"]["kernel-mcp"]["command"], "/k");
        assert!(c.old_entry.is_none());
        assert!(update_json(Some("[1]"), Client::Kiro, "k", &entry).is_err());
        assert!(update_json(Some(r#"{"mcpServers": 3}"#), Client::Kiro, "k", &entry).is_err());
    }
}
