//! How kernel-mcp arrives (docs/install.md), checked for shape without building anything: the
//! MCP registry's `server.json` validates against the registry's published schema (2025-12-11,
//! from the PyPI package skillsaw that `make .venv` installs, which ships it byte for byte) and
//! matches the README's `mcp-name`; the MCP Bundle manifest (`mcpb/manifest.json`; the official
//! `mcpb` CLI validates and packs it in `make mcpb`) and the Claude Code plugin (`plugin/`)
//! agree with the crate and the tools. Versions are the crate's everywhere.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn json(rel: &str) -> Value {
    let text = std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
}

fn text(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The registry's server.json schema as skillsaw ships it in the venv.
fn registry_schema() -> Value {
    let lib = crate::common::venv().join("lib");
    let found: Option<PathBuf> = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| {
                d.path().join(
                    "site-packages/skillsaw/schemas/mcp_registry/v2025_12_11/server.schema.json",
                )
            })
            .find(|p| p.exists())
    });
    let path = found.unwrap_or_else(|| {
        panic!(
            "the MCP registry's server.json schema (skillsaw) is not in {}: run `make .venv` (requirements-dev.txt)",
            lib.display()
        )
    });
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn server_json_validates_against_the_registry_schema_and_names_the_readme_mcp_name() {
    let schema = registry_schema();
    assert_eq!(
        schema["$id"],
        "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    );
    let server = json("server.json");
    assert_eq!(server["$schema"], schema["$id"]);
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&server)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "server.json: {errors:#?}");
    // The schema's own limits that a validator may not enforce everywhere.
    assert!(server["description"].as_str().unwrap().len() <= 100);
    assert_eq!(server["version"], VERSION);
    let name = server["name"].as_str().unwrap();
    let readme = text("README.md");
    assert!(
        readme.contains(&format!("mcp-name: {name}")),
        "README.md (the wheel's readme) must carry `mcp-name: {name}` for the registry"
    );
    let pypi = server["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["registryType"] == "pypi")
        .expect("a PyPI package");
    assert_eq!(pypi["identifier"], env!("CARGO_PKG_NAME"));
    assert_eq!(pypi["version"], VERSION);
    assert_eq!(pypi["transport"]["type"], "stdio");
}

#[test]
fn the_bundle_manifest_runs_the_binary_and_lists_the_default_tools() {
    let m = json("mcpb/manifest.json");
    assert_eq!(m["name"], env!("CARGO_PKG_NAME"));
    assert_eq!(m["version"], VERSION);
    assert_eq!(m["manifest_version"], "0.3");
    assert_eq!(m["server"]["type"], "binary");
    assert_eq!(m["server"]["entry_point"], "server/kernel-mcp");
    assert_eq!(
        m["server"]["mcp_config"]["command"],
        "${__dirname}/server/kernel-mcp"
    );
    let tools: Vec<&str> = m["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, kernel_mcp::mcp::DEFAULT_TOOLS.to_vec());
    assert_eq!(m["user_config"]["tools"]["default"], "default");
    assert!(
        text("Makefile").contains("mcpb/build.sh"),
        "make mcpb packs it"
    );
}

/// The YAML front matter of a SKILL.md: `key: value` lines between `---` lines.
fn front_matter(skill: &str) -> Vec<(String, String)> {
    let mut lines = skill.lines();
    assert_eq!(
        lines.next(),
        Some("---"),
        "SKILL.md starts with front matter"
    );
    lines
        .take_while(|l| *l != "---")
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_claude_code_plugin_starts_kernel_mcp_and_its_skill_covers_the_workflow() {
    let manifest = json("plugin/.claude-plugin/plugin.json");
    assert_eq!(manifest["name"], env!("CARGO_PKG_NAME"));
    assert_eq!(manifest["version"], VERSION);
    assert!(
        manifest["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let mcp = json("plugin/.mcp.json");
    let entry = &mcp["mcpServers"]["kernel-mcp"];
    assert_eq!(entry["command"], "uvx", "{mcp}");
    assert_eq!(entry["args"], serde_json::json!(["kernel-mcp"]), "{mcp}");
    assert_eq!(manifest["mcpServers"], "./.mcp.json");

    let skill = text("plugin/skills/kernel-sessions/SKILL.md");
    let fm = front_matter(&skill);
    let get = |k: &str| fm.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("name"), Some("kernel-sessions"));
    let description = get("description").expect("a description");
    assert!(
        description.len() > 50 && description.len() <= 1024,
        "{description}"
    );
    for topic in [
        "## When to use a session",
        "`execute_file`",
        "get_execution",
        "send_input",
        "interrupt_session",
        "restart_session",
        "from kernel_mcp import mcp",
    ] {
        assert!(skill.contains(topic), "SKILL.md says nothing of {topic}");
    }
    // Every tool it names exists.
    let all: Vec<&str> = kernel_mcp::mcp::DEFAULT_TOOLS.to_vec();
    for word in skill.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.contains('_') && word.ends_with("_session") || word.ends_with("_execution") {
            assert!(
                all.contains(&word),
                "SKILL.md names {word}, which is no default tool"
            );
        }
    }
}
