//! The broker's registry: the `mcpServers` of a `.mcp.json` (the session cwd's, or the
//! server's `--mcp-config PATH`), parsed once when a session attaches (docs/broker.md
//! "The registry").
//!
//! Two steps. The entry *as written* ([`Written`]: unknown fields, wrong types, a missing
//! `command`/`url` and the legacy SSE transport are errors) and the entry *resolved*
//! ([`Transport`]: `${VAR}` expanded, fail-closed; header names, values and the URL checked;
//! an empty bearer token refused). A registry with any error is invalid as a whole: the
//! broker then refuses every call with all the reasons, each naming its entry, while the
//! session's ordinary execution goes on. What is written stays available to `explain`, which
//! shows it with names of variables, headers and environment entries but never their values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::expand;

/// Largest registry file read (bytes).
pub const MAX_REGISTRY_BYTES: u64 = 1024 * 1024;
/// Servers per registry.
pub const MAX_SERVERS: usize = 64;
/// Longest server name (characters).
const MAX_NAME_CHARS: usize = 128;

/// Fields a stdio entry may have.
const STDIO_FIELDS: &[&str] = &["type", "command", "args", "env", "cwd", "allowedTools"];
/// Fields a streamable-HTTP entry may have.
const HTTP_FIELDS: &[&str] = &["type", "url", "headers", "oauth", "allowedTools"];

/// Why an MCP registry (the `mcpServers` of a `.mcp.json`, [`McpRegistry`]; not kernel-mcp's
/// session registry, `crate::registry`), or one of its entries, cannot be used. Every message
/// says where, and the entry-level ones name the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpRegistryError {
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("{path} is larger than {MAX_REGISTRY_BYTES} bytes; a registry is a small JSON file")]
    TooLarge { path: PathBuf },
    #[error("{path} is not valid JSON ({reason}); fix its syntax")]
    Syntax { path: PathBuf, reason: String },
    #[error("{path}: {problem}")]
    Shape { path: PathBuf, problem: String },
    #[error("server \"{entry}\" in {path}: {problem}")]
    Entry {
        path: PathBuf,
        entry: String,
        problem: String,
    },
}

impl McpRegistryError {
    /// The entry the error is about, if it is about one.
    pub fn entry(&self) -> Option<&str> {
        match self {
            McpRegistryError::Entry { entry, .. } => Some(entry),
            _ => None,
        }
    }
}

/// An entry's transport as written in the file (values unexpanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        /// The `oauth` block (docs/broker.md "OAuth").
        oauth: Option<super::oauth::OAuthBlock>,
    },
}

impl Written {
    /// `"stdio"` or `"http"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Written::Stdio { .. } => "stdio",
            Written::Http { .. } => "http",
        }
    }
}

/// An entry's transport, resolved: what the downstream client is started with.
#[derive(Debug, Clone)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: PathBuf,
    },
    Http {
        url: String,
        headers: Vec<(http::HeaderName, http::HeaderValue)>,
        /// The broker gets the server's tokens itself (see [`super::oauth`]).
        oauth: Option<super::oauth::OAuthGrant>,
    },
}

/// One `mcpServers` entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// As written; `None` when the entry's shape is wrong (see `errors`).
    pub written: Option<Written>,
    /// Resolved; `None` when anything about the entry is wrong.
    pub transport: Option<Transport>,
    /// `allowedTools`: the tools the grant is narrowed to; `None`: every tool of the server.
    pub allowed_tools: Option<Vec<String>>,
    /// The entry's problems (also in [`McpRegistry::errors`]).
    pub errors: Vec<McpRegistryError>,
}

impl Entry {
    /// True when the grant lets `tool` be called.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|t| t.iter().any(|a| a == tool))
    }
}

/// A parsed registry (possibly invalid: see [`McpRegistry::errors`]).
#[derive(Debug, Clone)]
pub struct McpRegistry {
    /// The file it was read from (or would be read from, when absent).
    pub path: PathBuf,
    /// False when no file was there (an empty registry, not an error).
    pub found: bool,
    pub entries: BTreeMap<String, Entry>,
    /// Every problem, file-level and entry-level; empty for a usable registry.
    pub errors: Vec<McpRegistryError>,
    /// Values taken from the environment, and header and env values (for redaction).
    pub secrets: Vec<String>,
}

impl McpRegistry {
    /// True when the broker may use it.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// A registry with no servers, for a missing file.
    fn absent(path: &Path) -> McpRegistry {
        McpRegistry {
            path: path.to_path_buf(),
            found: false,
            entries: BTreeMap::new(),
            errors: Vec::new(),
            secrets: Vec::new(),
        }
    }

    fn failed(path: &Path, error: McpRegistryError) -> McpRegistry {
        McpRegistry {
            errors: vec![error],
            found: true,
            ..McpRegistry::absent(path)
        }
    }

    /// Read and parse `path`. `required`: a missing file is an error (`--mcp-config`), not an
    /// empty registry (a cwd without `.mcp.json`). Variables come from `lookup`.
    pub fn load(
        path: &Path,
        required: bool,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> McpRegistry {
        Self::load_fingerprinted(path, required, lookup).0
    }

    /// [`Self::load`], and a fingerprint of what was read (the SHA-256 of the file, or why
    /// there was none): sessions whose registry has the same path and fingerprint share one
    /// set of servers.
    pub fn load_fingerprinted(
        path: &Path,
        required: bool,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> (McpRegistry, String) {
        let unreadable = |e: std::io::Error| {
            let reason = e.to_string();
            (
                McpRegistry::failed(
                    path,
                    McpRegistryError::Unreadable {
                        path: path.to_path_buf(),
                        reason: reason.clone(),
                    },
                ),
                format!("unreadable: {reason}"),
            )
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                return (McpRegistry::absent(path), "absent".into());
            }
            Err(e) => return unreadable(e),
        };
        if meta.len() > MAX_REGISTRY_BYTES {
            return (
                McpRegistry::failed(path, McpRegistryError::TooLarge { path: path.into() }),
                "too large".into(),
            );
        }
        match std::fs::read(path) {
            Ok(bytes) => {
                use sha2::Digest;
                let fingerprint = hex::encode(sha2::Sha256::digest(&bytes));
                let text = String::from_utf8_lossy(&bytes);
                (McpRegistry::parse(path, &text, lookup), fingerprint)
            }
            Err(e) => unreadable(e),
        }
    }

    /// Parse the text of the registry at `path` (relative `cwd`s resolve against its directory).
    pub fn parse(path: &Path, text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> McpRegistry {
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                return McpRegistry::failed(
                    path,
                    McpRegistryError::Syntax {
                        path: path.into(),
                        reason: e.to_string(),
                    },
                );
            }
        };
        let mut reg = McpRegistry {
            found: true,
            ..McpRegistry::absent(path)
        };
        let shape = |problem: String| McpRegistryError::Shape {
            path: path.into(),
            problem,
        };
        let Value::Object(top) = value else {
            reg.errors.push(shape(
                "the top level must be an object: {\"mcpServers\": {…}}".into(),
            ));
            return reg;
        };
        for key in top.keys().filter(|k| *k != "mcpServers") {
            reg.errors.push(shape(format!(
                "unknown top-level field \"{key}\" (a registry holds only \"mcpServers\")"
            )));
        }
        let servers = match top.get("mcpServers") {
            Some(Value::Object(s)) => s,
            Some(_) => {
                reg.errors.push(shape(
                    "\"mcpServers\" must be an object of named servers".into(),
                ));
                return reg;
            }
            None => {
                reg.errors.push(shape(
                    "no \"mcpServers\" object: nothing is configured".into(),
                ));
                return reg;
            }
        };
        if servers.len() > MAX_SERVERS {
            reg.errors.push(shape(format!(
                "{} servers; at most {MAX_SERVERS} are allowed",
                servers.len()
            )));
            return reg;
        }
        let dir = path.parent().unwrap_or(Path::new("/"));
        for (name, body) in servers {
            let entry = parse_entry(path, dir, name, body, lookup);
            reg.errors.extend(entry.0.errors.iter().cloned());
            reg.secrets.extend(entry.1);
            reg.entries.insert(name.clone(), entry.0);
        }
        reg.secrets.retain(|s| !s.is_empty());
        reg.secrets.sort();
        reg.secrets.dedup();
        reg
    }
}

/// Parse one entry; returns it and the secret values it resolved.
fn parse_entry(
    path: &Path,
    dir: &Path,
    name: &str,
    body: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> (Entry, Vec<String>) {
    let mut entry = Entry {
        name: name.to_string(),
        written: None,
        transport: None,
        allowed_tools: None,
        errors: Vec::new(),
    };
    let mut problems: Vec<String> = Vec::new();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        problems.push(format!(
            "a server name must be 1-{MAX_NAME_CHARS} printable characters"
        ));
    }
    let mut secrets = Vec::new();
    match body {
        Value::Object(fields) => {
            entry.allowed_tools = allowed_tools(fields, &mut problems);
            entry.written = written(fields, &mut problems);
            if let (Some(w), true) = (&entry.written, problems.is_empty()) {
                match resolve(w, name, dir, lookup) {
                    Ok((t, s)) => {
                        entry.transport = Some(t);
                        secrets = s;
                    }
                    Err(p) => problems.extend(p),
                }
            }
        }
        _ => problems.push("an entry must be an object (with \"command\" or \"url\")".into()),
    }
    entry.errors = problems
        .into_iter()
        .map(|problem| McpRegistryError::Entry {
            path: path.into(),
            entry: name.to_string(),
            problem,
        })
        .collect();
    if !entry.errors.is_empty() {
        entry.transport = None;
    }
    (entry, secrets)
}

fn allowed_tools(fields: &Map<String, Value>, problems: &mut Vec<String>) -> Option<Vec<String>> {
    let v = fields.get("allowedTools")?;
    let list = v.as_array().and_then(|a| {
        a.iter()
            .map(|t| t.as_str().filter(|s| !s.is_empty()).map(String::from))
            .collect::<Option<Vec<_>>>()
    });
    if list.is_none() {
        problems.push(
            "\"allowedTools\" must be an array of tool names (strings), e.g. [\"echo\"]".into(),
        );
    }
    list
}

/// The entry as written; problems of shape go to `problems`.
fn written(fields: &Map<String, Value>, problems: &mut Vec<String>) -> Option<Written> {
    if transport_kind(fields, problems)? == "stdio" {
        stdio_written(fields, problems)
    } else {
        http_written(fields, problems)
    }
}

/// `"stdio"` or `"http"`: the entry's `type`, else what its `command` or `url` implies; its
/// fields are checked against that kind's.
fn transport_kind(fields: &Map<String, Value>, problems: &mut Vec<String>) -> Option<&'static str> {
    let kind = match fields.get("type") {
        None => None,
        Some(Value::String(t)) => match t.as_str() {
            "stdio" => Some("stdio"),
            "http" | "streamable-http" | "streamableHttp" => Some("http"),
            "sse" => {
                problems.push("type \"sse\" (the legacy HTTP+SSE transport) is not supported; use a streamable-HTTP endpoint (\"type\": \"http\", \"url\": …)".into());
                return None;
            }
            other => {
                problems.push(format!(
                    "unknown type \"{other}\"; use \"stdio\" (with \"command\") or \"http\" (with \"url\")"
                ));
                return None;
            }
        },
        Some(_) => {
            problems.push("\"type\" must be a string: \"stdio\" or \"http\"".into());
            return None;
        }
    };
    let kind = match (
        kind,
        fields.contains_key("command"),
        fields.contains_key("url"),
    ) {
        (_, true, true) => {
            problems.push("has both \"command\" and \"url\"; an entry is either a stdio server or an HTTP one".into());
            return None;
        }
        (Some(k), _, _) => k,
        (None, true, false) => "stdio",
        (None, false, true) => "http",
        (None, false, false) => {
            problems.push(
                "needs \"command\" (a stdio server) or \"url\" (a streamable-HTTP server)".into(),
            );
            return None;
        }
    };
    let allowed = if kind == "stdio" {
        STDIO_FIELDS
    } else {
        HTTP_FIELDS
    };
    for key in fields.keys().filter(|k| !allowed.contains(&k.as_str())) {
        problems.push(format!(
            "unknown field \"{key}\" ({kind} entries take {})",
            allowed.join(", ")
        ));
    }
    Some(kind)
}

/// A stdio entry's `command`, `args`, `env` and `cwd`.
fn stdio_written(fields: &Map<String, Value>, problems: &mut Vec<String>) -> Option<Written> {
    let command = match fields.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        Some(_) => {
            problems.push("\"command\" must be a non-empty string".into());
            return None;
        }
        None => {
            problems.push("type \"stdio\" needs \"command\"".into());
            return None;
        }
    };
    let args = match fields.get("args") {
        None => Vec::new(),
        Some(v) => match strings(v) {
            Some(a) => a,
            None => {
                problems.push("\"args\" must be an array of strings".into());
                Vec::new()
            }
        },
    };
    let env = string_map(fields.get("env"), "env", problems);
    for k in env.keys().filter(|k| !expand::is_var_name(k)) {
        problems.push(format!("env name \"{k}\" is not a variable name"));
    }
    let cwd = match fields.get("cwd") {
        None => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => {
            problems.push("\"cwd\" must be a string".into());
            None
        }
    };
    Some(Written::Stdio {
        command,
        args,
        env,
        cwd,
    })
}

/// An HTTP entry's `url`, `headers` and `oauth`.
fn http_written(fields: &Map<String, Value>, problems: &mut Vec<String>) -> Option<Written> {
    let url = match fields.get("url") {
        Some(Value::String(u)) if !u.trim().is_empty() => u.clone(),
        Some(_) => {
            problems.push("\"url\" must be a non-empty string".into());
            return None;
        }
        None => {
            problems.push("type \"http\" needs \"url\"".into());
            return None;
        }
    };
    let headers = string_map(fields.get("headers"), "headers", problems);
    let oauth = fields
        .get("oauth")
        .and_then(|o| super::oauth::OAuthBlock::parse(o, problems));
    if oauth.is_some()
        && headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"))
    {
        problems.push("has both \"oauth\" and an Authorization header; the broker sends the OAuth token itself, so remove the header".into());
    }
    Some(Written::Http {
        url,
        headers,
        oauth,
    })
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(String::from))
        .collect()
}

fn string_map(
    v: Option<&Value>,
    field: &str,
    problems: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let Some(v) = v else {
        return BTreeMap::new();
    };
    let map = v.as_object().and_then(|m| {
        m.iter()
            .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect::<Option<BTreeMap<_, _>>>()
    });
    map.unwrap_or_else(|| {
        problems.push(format!("\"{field}\" must be an object of strings"));
        BTreeMap::new()
    })
}

mod resolve;
use resolve::resolve;

#[cfg(test)]
mod tests;
