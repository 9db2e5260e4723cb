//! `kernel-mcp install --client …`: each client's file, in a temp HOME and project, with an
//! existing server that must survive; `--dry-run` writes nothing; a broken file is left alone.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

struct Dirs {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    env: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    let env = tmp.path().join("venv");
    for d in [&home, &project, &env] {
        std::fs::create_dir_all(d).unwrap();
    }
    Dirs {
        home,
        project,
        env,
        _tmp: tmp,
    }
}

fn install(d: &Dirs, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kernel-mcp"))
        .arg("install")
        .args(args)
        .args(["--python-env", d.env.to_str().unwrap()])
        .env("HOME", &d.home)
        .env_remove("CODEX_HOME")
        .current_dir(&d.project)
        .output()
        .expect("run kernel-mcp install")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const OTHER_JSON: &str = r#"{
  "theme": "dark",
  "mcpServers": {
    "other": {"command": "/usr/bin/other-mcp", "args": ["--x"]}
  },
  "zLast": [1, 2]
}
"#;

/// Dry run shows the kernel-mcp entry and leaves the file as it was; the real run keeps the
/// other server and the other keys (in their order) and adds ours with absolute paths.
fn check_json_client(client: &str, scope: &str, file: impl Fn(&Dirs) -> PathBuf) {
    let d = dirs();
    let path = file(&d);
    write(&path, OTHER_JSON);
    let dry = install(&d, &["--client", client, "--scope", scope, "--dry-run"]);
    let shown = stdout(&dry);
    assert!(
        dry.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(shown.contains(&path.display().to_string()), "{shown}");
    assert!(shown.contains("\"command\""), "{shown}");
    assert!(shown.contains("KERNEL_MCP_PYTHON_ENV"), "{shown}");
    assert!(shown.contains("dry run"), "{shown}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), OTHER_JSON);

    let real = install(&d, &["--client", client, "--scope", scope]);
    assert!(real.status.success(), "{}", stdout(&real));
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Value = serde_json::from_str(&text).expect("still JSON");
    assert_eq!(v["theme"], "dark");
    assert_eq!(v["mcpServers"]["other"]["command"], "/usr/bin/other-mcp");
    let ours = &v["mcpServers"]["kernel-mcp"];
    let command = ours["command"].as_str().expect("a command");
    assert!(Path::new(command).is_absolute(), "{ours}");
    assert!(Path::new(command).exists(), "{ours}");
    assert_eq!(ours["args"], serde_json::json!(["serve"]));
    assert_eq!(
        ours["env"]["KERNEL_MCP_PYTHON_ENV"],
        d.env.display().to_string()
    );
    let order: Vec<usize> = ["\"theme\"", "\"mcpServers\"", "\"zLast\""]
        .iter()
        .map(|k| text.find(k).expect("key kept"))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "key order: {text}");

    // Running it again changes nothing.
    let again = install(&d, &["--client", client, "--scope", scope]);
    assert!(stdout(&again).contains("unchanged"), "{}", stdout(&again));
}

#[test]
fn claude_project_scope_writes_mcp_json_and_keeps_the_other_server() {
    check_json_client("claude", "project", |d| d.project.join(".mcp.json"));
}

#[test]
fn claude_user_scope_writes_claude_json_with_a_stdio_type() {
    check_json_client("claude", "user", |d| d.home.join(".claude.json"));
    let d = dirs();
    install(&d, &["--client", "claude"]);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(d.home.join(".claude.json")).unwrap())
            .unwrap();
    assert_eq!(v["mcpServers"]["kernel-mcp"]["type"], "stdio");
}

#[test]
fn kiro_writes_settings_mcp_json_in_both_scopes() {
    check_json_client("kiro", "user", |d| d.home.join(".kiro/settings/mcp.json"));
    check_json_client("kiro", "project", |d| {
        d.project.join(".kiro/settings/mcp.json")
    });
}

#[test]
fn cursor_writes_cursor_mcp_json_in_both_scopes() {
    check_json_client("cursor", "user", |d| d.home.join(".cursor/mcp.json"));
    check_json_client("cursor", "project", |d| d.project.join(".cursor/mcp.json"));
}

const OTHER_TOML: &str = r#"# my codex settings
model = "o4"

[mcp_servers.other]
command = "/usr/bin/other-mcp" # keep me
args = ["--x"]
"#;

#[test]
fn codex_toml_keeps_comments_and_the_other_server() {
    let d = dirs();
    let path = d.home.join(".codex/config.toml");
    write(&path, OTHER_TOML);
    let dry = install(&d, &["--client", "codex", "--dry-run"]);
    let shown = stdout(&dry);
    assert!(shown.contains("[mcp_servers.kernel-mcp]"), "{shown}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), OTHER_TOML);

    let real = install(&d, &["--client", "codex"]);
    assert!(real.status.success(), "{}", stdout(&real));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(OTHER_TOML),
        "the old text is kept as is:\n{text}"
    );
    let doc: toml_edit::DocumentMut = text.parse().expect("still TOML");
    let ours = &doc["mcp_servers"]["kernel-mcp"];
    assert!(Path::new(ours["command"].as_str().unwrap()).is_absolute());
    assert_eq!(ours["tool_timeout_sec"].as_integer(), Some(120), "{text}");
    assert_eq!(
        ours["env"]["KERNEL_MCP_PYTHON_ENV"].as_str(),
        Some(d.env.to_str().unwrap())
    );
    assert_eq!(
        doc["mcp_servers"]["other"]["command"].as_str(),
        Some("/usr/bin/other-mcp")
    );
}

#[test]
fn codex_project_scope_and_shared_write_serve_shared_to_dot_codex() {
    let d = dirs();
    let real = install(&d, &["--client", "codex", "--scope", "project", "--shared"]);
    assert!(real.status.success(), "{}", stdout(&real));
    let text = std::fs::read_to_string(d.project.join(".codex/config.toml")).unwrap();
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    let args: Vec<&str> = doc["mcp_servers"]["kernel-mcp"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(args, ["serve", "--shared"], "{text}");
    assert!(!text.contains("[mcp_servers]\n"), "no bare header: {text}");
}

#[test]
fn a_config_file_that_does_not_parse_is_left_alone_with_a_reason() {
    let d = dirs();
    let path = d.project.join(".mcp.json");
    write(&path, "{ not json");
    let out = install(&d, &["--client", "claude", "--scope", "project"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("left as it is") && err.contains("not JSON"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json");
}

#[test]
fn existing_file_permissions_survive_the_rewrite() {
    use std::os::unix::fs::PermissionsExt;
    let d = dirs();
    let path = d.home.join(".cursor/mcp.json");
    write(&path, "{}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = install(&d, &["--client", "cursor"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn a_symlinked_config_is_written_through_the_link_and_stays_a_link() {
    // As stow, chezmoi and home-manager set it up: ~/.claude.json -> a dotfiles repository,
    // by a relative link.
    let d = dirs();
    let real = d.home.join("dotfiles/claude.json");
    write(&real, OTHER_JSON);
    let link = d.home.join(".claude.json");
    std::os::unix::fs::symlink("dotfiles/claude.json", &link).unwrap();
    let out = install(&d, &["--client", "claude"]);
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(
        meta.file_type().is_symlink(),
        "the link became a plain file"
    );
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("dotfiles/claude.json")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert!(
        v["mcpServers"]["kernel-mcp"]["command"].is_string(),
        "the real file has no entry: {v}"
    );
    assert_eq!(v["mcpServers"]["other"]["command"], "/usr/bin/other-mcp");
    // No temporary file is left beside the link or the real file.
    for dir in [&d.home, &d.home.join("dotfiles")] {
        let names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names
                .iter()
                .all(|n| !n.ends_with(".tmp") && !n.starts_with(".tmp")),
            "{names:?}"
        );
    }
}

#[test]
fn a_new_config_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = dirs();
    let out = install(&d, &["--client", "claude"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let mode = std::fs::metadata(d.home.join(".claude.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}
