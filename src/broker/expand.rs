//! `${VAR}` expansion in registry values (docs/broker.md "Variables"). A variable that is
//! missing or empty fails closed: the value is not used, and the error names the variable and
//! where it appeared. `${VAR:-default}` uses `default` instead. A `$` not followed by `{` is
//! kept as written. Every value taken from the environment is remembered as a secret, so that
//! text the broker hands back (errors, a server's stderr) can be redacted.

/// How an expansion failed (the caller adds the entry and field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("${{{0}}} is not set (or is empty)")]
    Missing(String),
    #[error("\"${{\" is not closed by \"}}\"")]
    Unclosed,
    #[error("${{{0}}} is not a variable name (letters, digits and '_', not starting with a digit)")]
    BadName(String),
}

/// The outcome of expanding one string: the text, and the variables it used.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub text: String,
    /// Variables referenced, and whether each was set (non-empty).
    pub vars: Vec<(String, bool)>,
    /// Values taken from the environment (for redaction).
    pub secrets: Vec<String>,
}

/// True for `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Expand `${VAR}` and `${VAR:-default}` in `input`, looking variables up with `lookup`.
/// Errors: the first missing/empty variable without a default, an unclosed `${`, a bad name.
/// Every variable is still listed in the result's `vars` when expansion fails (see
/// [`variables`]).
pub fn expand(
    input: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, ExpandError> {
    let mut out = Expanded::default();
    let mut rest = input;
    while let Some(at) = rest.find("${") {
        out.text.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unclosed);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return Err(ExpandError::BadName(name.to_string()));
        }
        match lookup(name).filter(|v| !v.is_empty()) {
            Some(v) => {
                out.vars.push((name.to_string(), true));
                out.text.push_str(&v);
                out.secrets.push(v);
            }
            None => {
                out.vars.push((name.to_string(), false));
                match default {
                    Some(d) => out.text.push_str(d),
                    None => return Err(ExpandError::Missing(name.to_string())),
                }
            }
        }
        rest = &after[end + 1..];
    }
    out.text.push_str(rest);
    Ok(out)
}

/// The variables `input` refers to and whether each is set, without failing (for `explain`).
pub fn variables(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, bool)> {
    let mut vars = Vec::new();
    let mut rest = input;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            break;
        };
        let inner = &after[..end];
        let name = inner.split_once(":-").map_or(inner, |(n, _)| n);
        if is_var_name(name) {
            let set = lookup(name).is_some_and(|v| !v.is_empty());
            vars.push((name.to_string(), set));
        }
        rest = &after[end + 1..];
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_and_are_remembered_as_secrets() {
        let e = expand("Bearer ${TOKEN}", &env).unwrap();
        assert_eq!(e.text, "Bearer s3cret");
        assert_eq!(e.vars, vec![("TOKEN".to_string(), true)]);
        assert_eq!(e.secrets, vec!["s3cret".to_string()]);
    }

    #[test]
    fn missing_and_empty_variables_fail_closed() {
        assert_eq!(
            expand("x ${NOPE} y", &env),
            Err(ExpandError::Missing("NOPE".into()))
        );
        assert_eq!(
            expand("${EMPTY}", &env),
            Err(ExpandError::Missing("EMPTY".into()))
        );
    }

    #[test]
    fn a_default_stands_in_for_a_missing_variable() {
        assert_eq!(expand("${NOPE:-8080}", &env).unwrap().text, "8080");
        assert_eq!(expand("${TOKEN:-x}", &env).unwrap().text, "s3cret");
    }

    #[test]
    fn malformed_references_are_errors_and_plain_dollars_stay() {
        assert_eq!(expand("${TOKEN", &env), Err(ExpandError::Unclosed));
        assert_eq!(
            expand("${1X}", &env),
            Err(ExpandError::BadName("1X".into()))
        );
        assert_eq!(
            expand("cost $5 and $HOME", &env).unwrap().text,
            "cost $5 and $HOME"
        );
    }

    #[test]
    fn variables_are_listed_without_failing() {
        assert_eq!(
            variables("${TOKEN} ${NOPE} ${EMPTY:-d}", &env),
            vec![
                ("TOKEN".to_string(), true),
                ("NOPE".to_string(), false),
                ("EMPTY".to_string(), false)
            ]
        );
    }
}
