//! The registry parser: what is accepted, and that every error names its entry.

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("tok-123".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn parse(text: &str) -> McpRegistry {
    McpRegistry::parse(Path::new("/proj/.mcp.json"), text, &env)
}

/// The messages of `reg`'s errors, asserting each names entry `name`.
fn entry_errors(reg: &McpRegistry, name: &str) -> Vec<String> {
    assert!(!reg.errors.is_empty(), "expected errors");
    reg.errors
        .iter()
        .map(|e| {
            assert_eq!(e.entry(), Some(name), "error does not name {name}: {e}");
            let s = e.to_string();
            assert!(s.contains(&format!("server \"{name}\"")), "{s}");
            s
        })
        .collect()
}

#[test]
fn stdio_and_http_entries_parse_and_resolve() {
    let reg = parse(
        r#"{"mcpServers": {
            "local": {"command": "node", "args": ["srv.js", "${TOKEN}"], "env": {"K": "${TOKEN}"}, "cwd": "tools", "allowedTools": ["echo"]},
            "remote": {"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}", "X-Team": "a"}}
        }}"#,
    );
    assert!(reg.is_valid(), "{:?}", reg.errors);
    let local = &reg.entries["local"];
    assert!(local.allows("echo") && !local.allows("add"));
    match local.transport.as_ref().unwrap() {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            assert_eq!(command, "node");
            assert_eq!(args, &["srv.js", "tok-123"]);
            assert_eq!(env["K"], "tok-123");
            assert_eq!(cwd, Path::new("/proj/tools"));
        }
        other => panic!("{other:?}"),
    }
    let remote = &reg.entries["remote"];
    assert!(remote.allows("anything"));
    match remote.transport.as_ref().unwrap() {
        Transport::Http { url, headers, .. } => {
            assert_eq!(url, "https://example.test/mcp");
            assert_eq!(headers.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    // The token, and header/env values, are remembered for redaction.
    assert!(reg.secrets.contains(&"tok-123".to_string()));
    assert!(reg.secrets.contains(&"Bearer tok-123".to_string()));
}

#[test]
fn a_stdio_cwd_defaults_to_the_registry_directory() {
    let reg = parse(r#"{"mcpServers": {"s": {"command": "x"}}}"#);
    match reg.entries["s"].transport.as_ref().unwrap() {
        Transport::Stdio { cwd, .. } => assert_eq!(cwd, Path::new("/proj")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_fields_are_errors_naming_the_entry() {
    let reg = parse(r#"{"mcpServers": {"svc": {"command": "x", "timeout": 5}}}"#);
    let errs = entry_errors(&reg, "svc");
    assert!(errs[0].contains("unknown field \"timeout\""), "{errs:?}");
    // An HTTP entry takes no `args`.
    let reg = parse(r#"{"mcpServers": {"web": {"url": "http://h/mcp", "args": []}}}"#);
    assert!(entry_errors(&reg, "web")[0].contains("unknown field \"args\""));
}

#[test]
fn a_missing_variable_fails_closed_naming_entry_and_variable() {
    let reg = parse(
        r#"{"mcpServers": {"web": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${NOT_SET}"}}}}"#,
    );
    let errs = entry_errors(&reg, "web");
    assert!(
        errs[0].contains("${NOT_SET}") && errs[0].contains("headers.Authorization"),
        "{errs:?}"
    );
    assert!(reg.entries["web"].transport.is_none());
    // Empty counts as missing.
    let reg = parse(r#"{"mcpServers": {"s": {"command": "x", "env": {"A": "${EMPTY}"}}}}"#);
    assert!(entry_errors(&reg, "s")[0].contains("${EMPTY}"));
}

#[test]
fn empty_bearer_headers_are_errors_naming_the_entry() {
    for value in ["Bearer", "Bearer   ", "bearer ${EMPTY:-}"] {
        let text = format!(
            r#"{{"mcpServers": {{"web": {{"url": "http://h/mcp", "headers": {{"Authorization": "{value}"}}}}}}}}"#
        );
        let reg = parse(&text);
        let errs = entry_errors(&reg, "web");
        assert!(
            errs[0].contains("empty bearer token") || errs[0].contains("is empty"),
            "{value:?}: {errs:?}"
        );
    }
}

#[test]
fn transports_are_checked() {
    let cases = [
        (
            r#"{"type": "sse", "url": "http://h/sse"}"#,
            "legacy HTTP+SSE",
        ),
        (
            r#"{"command": "x", "url": "http://h"}"#,
            "both \"command\" and \"url\"",
        ),
        (r#"{"args": ["a"]}"#, "needs \"command\""),
        (
            r#"{"type": "stdio", "url": "http://h"}"#,
            "needs \"command\"",
        ),
        (r#"{"type": "ws", "url": "ws://h"}"#, "unknown type \"ws\""),
        (r#"{"url": "ftp://h/mcp"}"#, "http:// or https://"),
        (r#"{"command": ""}"#, "non-empty string"),
        (r#"{"command": "x", "args": "a b"}"#, "array of strings"),
        (
            r#"{"command": "x", "env": {"A B": "1"}}"#,
            "not a variable name",
        ),
        (
            r#"{"command": "x", "allowedTools": "echo"}"#,
            "allowedTools",
        ),
        (
            r#"{"url": "http://h", "headers": {"bad name": "v"}}"#,
            "not a valid HTTP header name",
        ),
        (r#""node srv.js""#, "must be an object"),
    ];
    for (body, expected) in cases {
        let reg = parse(&format!(r#"{{"mcpServers": {{"e": {body}}}}}"#));
        let errs = entry_errors(&reg, "e");
        assert!(
            errs.iter().any(|e| e.contains(expected)),
            "{body}: expected {expected:?} in {errs:?}"
        );
    }
}

#[test]
fn file_level_problems_say_where() {
    let reg = parse("{not json");
    assert!(matches!(reg.errors[0], McpRegistryError::Syntax { .. }));
    assert!(reg.errors[0].to_string().contains("/proj/.mcp.json"));
    let reg = parse(r#"{"servers": {}}"#);
    let msgs: Vec<String> = reg.errors.iter().map(|e| e.to_string()).collect();
    assert!(
        msgs.iter()
            .any(|m| m.contains("unknown top-level field \"servers\"")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("no \"mcpServers\"")),
        "{msgs:?}"
    );
    assert!(!parse("[]").is_valid());
}

#[test]
fn one_bad_entry_makes_the_registry_invalid_and_keeps_the_others_written() {
    let reg =
        parse(r#"{"mcpServers": {"good": {"command": "x"}, "bad": {"command": "y", "oops": 1}}}"#);
    assert!(!reg.is_valid());
    assert_eq!(reg.errors.len(), 1);
    assert!(reg.entries["good"].transport.is_some());
    assert!(reg.entries["bad"].written.is_some());
    assert!(reg.entries["bad"].transport.is_none());
}

#[test]
fn a_missing_file_is_an_empty_registry_unless_required() {
    let path = Path::new("/nonexistent/kernel-mcp-test/.mcp.json");
    let reg = McpRegistry::load(path, false, &env);
    assert!(reg.is_valid() && !reg.found && reg.entries.is_empty());
    let reg = McpRegistry::load(path, true, &env);
    assert!(matches!(reg.errors[0], McpRegistryError::Unreadable { .. }));
}

#[test]
fn an_oauth_block_resolves_its_secret_and_refuses_an_authorization_header_beside_it() {
    let reg = parse(
        r#"{"mcpServers": {
            "cc": {"type": "http", "url": "https://example.test/mcp", "oauth": {"grantType": "client_credentials", "clientId": "c", "clientSecret": "${TOKEN}"}},
            "code": {"type": "http", "url": "https://example.test/mcp", "oauth": {"grantType": "authorization_code", "credentialFile": "creds/x.json"}}
        }}"#,
    );
    assert!(reg.is_valid(), "{:?}", reg.errors);
    assert!(reg.secrets.contains(&"tok-123".to_string()));
    match &reg.entries["code"].transport {
        Some(Transport::Http {
            oauth:
                Some(crate::broker::oauth::OAuthGrant::AuthorizationCode {
                    credential_file, ..
                }),
            ..
        }) => assert_eq!(credential_file, Path::new("/proj/creds/x.json")),
        other => panic!("{other:?}"),
    }
    let reg = parse(
        r#"{"mcpServers": {"both": {"url": "https://e.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
            "oauth": {"grantType": "client_credentials", "clientId": "c", "clientSecret": "${MISSING}"}}}}"#,
    );
    let errors = entry_errors(&reg, "both").join("\n");
    assert!(
        errors.contains("both \"oauth\" and an Authorization header"),
        "{errors}"
    );
}
