//! The second step of reading an entry: `${VAR}` expanded (fail-closed), header names and
//! values checked, empty bearer tokens refused, the URL's scheme checked; the values taken
//! from the environment are returned for redaction.

use std::path::Path;

use super::{Transport, Written};
use crate::broker::expand::{self, ExpandError, Expanded};

/// Expand and check a written entry. Errors: one sentence per problem.
pub(super) fn resolve(
    w: &Written,
    name: &str,
    dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(Transport, Vec<String>), Vec<String>> {
    let mut problems = Vec::new();
    let mut expansion_problems = Vec::new();
    let mut secrets = Vec::new();
    let mut exp = |value: &str, where_: &str, secret: bool| -> String {
        match expand::expand(value, lookup) {
            Ok(Expanded {
                text, secrets: s, ..
            }) => {
                secrets.extend(s);
                if secret {
                    secrets.push(text.clone());
                }
                text
            }
            Err(e) => {
                expansion_problems.push(expand_problem(&e, where_));
                String::new()
            }
        }
    };
    let t = match w {
        Written::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let command = exp(command, "command", false);
            let args = args
                .iter()
                .enumerate()
                .map(|(i, a)| exp(a, &format!("args[{i}]"), false))
                .collect();
            let env = env
                .iter()
                .map(|(k, v)| (k.clone(), exp(v, &format!("env.{k}"), true)))
                .collect();
            let cwd = match cwd {
                Some(c) => dir.join(exp(c, "cwd", false)),
                None => dir.to_path_buf(),
            };
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            }
        }
        Written::Http {
            url,
            headers,
            oauth,
        } => {
            let url = exp(url, "url", false);
            let mut out = Vec::new();
            for (k, v) in headers {
                let value = exp(v, &format!("headers.{k}"), true);
                if let Some(h) = header(k, &value, &mut problems) {
                    out.push(h);
                }
            }
            if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
                problems.push("\"url\" must start with http:// or https://".into());
            }
            let oauth = oauth.as_ref().and_then(|b| {
                crate::broker::oauth::block::resolve(b, name, &url, dir, &mut exp, &mut problems)
            });
            Transport::Http {
                url,
                headers: out,
                oauth,
            }
        }
    };
    expansion_problems.append(&mut problems);
    if expansion_problems.is_empty() {
        Ok((t, secrets))
    } else {
        Err(expansion_problems)
    }
}

/// The header `k: value` (already expanded), marked sensitive; `None` with the problem in
/// `problems` for a bad name, an empty value or bearer token, or a value no header carries.
fn header(
    k: &str,
    value: &str,
    problems: &mut Vec<String>,
) -> Option<(http::HeaderName, http::HeaderValue)> {
    let Ok(name) = http::HeaderName::from_bytes(k.as_bytes()) else {
        problems.push(format!("\"{k}\" is not a valid HTTP header name"));
        return None;
    };
    if value.trim().is_empty() {
        problems.push(format!("header \"{k}\" is empty"));
        return None;
    }
    let mut parts = value.split_whitespace();
    if name == http::header::AUTHORIZATION
        && parts
            .next()
            .is_some_and(|s| s.eq_ignore_ascii_case("bearer"))
        && parts.next().is_none()
    {
        problems.push(format!(
            "header \"{k}\" is an empty bearer token (\"Bearer\" with nothing after it); set the token, e.g. \"Bearer ${{TOKEN}}\""
        ));
        return None;
    }
    match http::HeaderValue::from_str(value) {
        Ok(mut hv) => {
            hv.set_sensitive(true);
            Some((name, hv))
        }
        Err(_) => {
            problems.push(format!(
                "header \"{k}\" holds characters an HTTP header cannot carry"
            ));
            None
        }
    }
}

fn expand_problem(e: &ExpandError, where_: &str) -> String {
    match e {
        ExpandError::Missing(v) => format!(
            "${{{v}}} in {where_} is not set (or is empty) in kernel-mcp's environment; set it before starting kernel-mcp, or write ${{{v}:-default}}"
        ),
        other => format!("{where_}: {other}"),
    }
}
