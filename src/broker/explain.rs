//! `mcp.explain(server, tool=None)`: what the broker knows about a server without connecting
//! to it — where it is configured, its transport as written, the grant, whether each
//! credential (header, env entry, `${VAR}`) is present (never a value), the connection state,
//! and the fix for what stands in the way of a call.
//!
//! Values are never shown: headers and env entries by name; `command` and `args` as written
//! (with `${VAR}` unexpanded); a URL without its query string.

use serde_json::{Value, json};

use super::config::{McpRegistry, Transport, Written};
use super::downstream::State;
use super::expand;
use super::shared::Shared;

/// The explanation of `server` (and `tool`) for the session of `shared`.
pub fn explain(shared: &Shared, server: &str, tool: Option<&str>) -> Value {
    let reg = &shared.project.registry;
    let Some(entry) = reg.entries.get(server) else {
        return not_configured(reg, server);
    };
    let Shown {
        transport,
        credentials,
        variables,
    } = written(entry.written.as_ref());
    let state = shared.project.downstreams.get(server).map(|d| d.state());
    let granted = tool.map(|t| entry.allows(t));
    let errors: Vec<String> = entry.errors.iter().map(|e| e.to_string()).collect();
    let oauth = oauth_of(server, entry);
    let fix = fix(
        reg,
        server,
        &errors,
        tool.filter(|_| granted == Some(false)),
        &state,
    )
    .or_else(|| {
        let o = oauth.as_ref()?;
        (o["ready"] == false).then(|| o["hint"].as_str().map(String::from))?
    });
    let mut out = json!({
        "server": server,
        "configured": true,
        "registry": reg.path,
        "transport": transport,
        "grant": match &entry.allowed_tools {
            Some(t) => json!({"allowedTools": t}),
            None => json!("every tool of the server (no allowedTools)"),
        },
        "credentials": credentials,
        "variables": variables.iter().map(|(k, set)| (k.clone(), present_word(*set))).collect::<serde_json::Map<_, _>>(),
        "state": state.map(|s| serde_json::to_value(s).unwrap_or(Value::Null)).unwrap_or_else(|| json!({"state": "unavailable"})),
        "errors": errors,
        "fix": fix,
    });
    if let Some(o) = oauth {
        out["oauth"] = o;
    }
    if let (Some(t), Some(g)) = (tool, granted) {
        out["tool"] = json!(t);
        out["tool_granted"] = json!(g);
    }
    // Text the broker did not write (a server's error) passes the redactor too.
    let text = serde_json::to_string(&out).unwrap_or_default();
    let redacted = shared.project.redactor.redact(&text);
    if redacted != text {
        serde_json::from_str(&redacted).unwrap_or(out)
    } else {
        out
    }
}

/// The `oauth` part of an HTTP entry's explanation (see [`super::oauth::explain`]).
fn oauth_of(server: &str, entry: &super::config::Entry) -> Option<Value> {
    let Some(Written::Http {
        url,
        oauth: Some(block),
        ..
    }) = &entry.written
    else {
        return None;
    };
    let (url, grant) = match &entry.transport {
        Some(Transport::Http { url, oauth, .. }) => (url.as_str(), oauth.as_ref()),
        _ => (url.as_str(), None),
    };
    Some(super::oauth::explain(server, url, block, grant))
}

/// The explanation of a server the registry does not configure, with where to add it.
fn not_configured(reg: &McpRegistry, server: &str) -> Value {
    let known: Vec<&str> = reg.entries.keys().map(String::as_str).collect();
    let fix = if reg.found {
        format!(
            "Add \"{server}\" under \"mcpServers\" in {}{}.",
            reg.path.display(),
            if known.is_empty() {
                String::new()
            } else {
                format!(" (configured: {})", known.join(", "))
            }
        )
    } else {
        format!(
            "Create {} with {{\"mcpServers\": {{\"{server}\": {{\"command\": …}}}}}}, then start a new session.",
            reg.path.display()
        )
    };
    json!({
        "server": server,
        "configured": false,
        "registry": reg.path,
        "registry_found": reg.found,
        "registry_errors": reg.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        "known_servers": known,
        "fix": fix,
    })
}

/// What [`written`] shows of an entry: no value, only names and presence.
struct Shown {
    /// The transport as written (`null` when the entry's shape is wrong).
    transport: Value,
    /// `env.NAME` / `headers.NAME` → `present` or `missing`.
    credentials: serde_json::Map<String, Value>,
    /// Each `${VAR}` named, and whether it is set (sorted, once each).
    variables: Vec<(String, bool)>,
}

/// The entry as written, without values.
fn written(written: Option<&Written>) -> Shown {
    let lookup = |k: &str| std::env::var(k).ok();
    let mut variables: Vec<(String, bool)> = Vec::new();
    let mut credentials = serde_json::Map::new();
    let transport = match written {
        Some(Written::Stdio {
            command,
            args,
            env,
            cwd,
        }) => {
            for s in std::iter::once(command).chain(args).chain(cwd) {
                variables.extend(expand::variables(s, &lookup));
            }
            for (k, v) in env {
                let vars = expand::variables(v, &lookup);
                let present = vars.iter().all(|(_, set)| *set) && !v.is_empty();
                credentials.insert(format!("env.{k}"), present_word(present));
                variables.extend(vars);
            }
            json!({"type": "stdio", "command": command, "args": args, "cwd": cwd, "env": env.keys().collect::<Vec<_>>()})
        }
        Some(Written::Http {
            url,
            headers,
            oauth,
        }) => {
            variables.extend(expand::variables(url, &lookup));
            for (where_, v, secret) in oauth.iter().flat_map(|o| o.values()) {
                let vars = expand::variables(v, &lookup);
                if secret {
                    credentials.insert(where_.into(), present_word(vars.iter().all(|(_, s)| *s)));
                }
                variables.extend(vars);
            }
            for (k, v) in headers {
                let vars = expand::variables(v, &lookup);
                let present = vars.iter().all(|(_, set)| *set) && !v.trim().is_empty();
                credentials.insert(format!("headers.{k}"), present_word(present));
                variables.extend(vars);
            }
            let (base, query) = match url.split_once('?') {
                Some((b, _)) => (b, true),
                None => (url.as_str(), false),
            };
            json!({"type": "http", "url": base, "url_has_query": query, "headers": headers.keys().collect::<Vec<_>>()})
        }
        None => Value::Null,
    };
    variables.sort();
    variables.dedup();
    Shown {
        transport,
        credentials,
        variables,
    }
}

/// The fix for what stands first in the way of a call: the entry's `errors`, the rest of the
/// registry's, the tool `refused` by the grant, a broken connection; `None` when nothing does.
fn fix(
    reg: &McpRegistry,
    server: &str,
    errors: &[String],
    refused: Option<&str>,
    state: &Option<State>,
) -> Option<String> {
    let other_errors: Vec<String> = reg
        .errors
        .iter()
        .filter(|e| e.entry() != Some(server))
        .map(|e| e.to_string())
        .collect();
    if !errors.is_empty() {
        Some(format!(
            "Fix {} (then start a new session): {}",
            reg.path.display(),
            errors.join("; ")
        ))
    } else if !other_errors.is_empty() {
        Some(format!(
            "This server's entry is fine, but the registry is not, so no call works: {}",
            other_errors.join("; ")
        ))
    } else if let Some(tool) = refused {
        Some(format!(
            "Add \"{tool}\" to \"allowedTools\" of \"{server}\" in {}.",
            reg.path.display()
        ))
    } else if let Some(State::Broken { reason, .. }) = state {
        Some(format!(
            "The last connection failed: {reason}. Check the entry's command or url; the next call tries again."
        ))
    } else {
        None
    }
}

fn present_word(present: bool) -> Value {
    Value::from(if present { "present" } else { "missing" })
}
