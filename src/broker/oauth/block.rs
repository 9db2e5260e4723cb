//! The `oauth` block of a `type: http` registry entry (docs/broker.md "OAuth"), in the same
//! two steps as the entry itself: as written ([`OAuthBlock`]: unknown fields, wrong types and
//! a missing `clientId` / `clientSecret` are problems) and resolved ([`OAuthGrant`]: `${VAR}`
//! expanded, fail-closed; the credential file's path made absolute). The client secret is a
//! [`Secret`], which never prints.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Fields of an `authorization_code` block.
const CODE_FIELDS: &[&str] = &[
    "grantType",
    "credentialFile",
    "redirectPort",
    "clientId",
    "scope",
];
/// Fields of a `client_credentials` block.
const CLIENT_FIELDS: &[&str] = &["grantType", "clientId", "clientSecret", "scope"];

/// The `oauth` block as written (values unexpanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthBlock {
    /// A person signs in once with `kernel-mcp broker login NAME`; the broker refreshes.
    AuthorizationCode {
        credential_file: Option<String>,
        /// The loopback redirect's port; 0: one the OS picks at each login.
        redirect_port: u16,
        /// A client registered out of band; `None`: dynamic client registration.
        client_id: Option<String>,
        scope: Option<String>,
    },
    /// The broker fetches tokens itself with the client's id and secret.
    ClientCredentials {
        client_id: String,
        client_secret: String,
        scope: Option<String>,
    },
}

impl OAuthBlock {
    /// `"authorization_code"` or `"client_credentials"`.
    pub fn grant_type(&self) -> &'static str {
        match self {
            OAuthBlock::AuthorizationCode { .. } => "authorization_code",
            OAuthBlock::ClientCredentials { .. } => "client_credentials",
        }
    }

    /// Parse the block; problems (one sentence each) go to `problems`.
    pub fn parse(v: &Value, problems: &mut Vec<String>) -> Option<OAuthBlock> {
        let Value::Object(fields) = v else {
            problems.push("\"oauth\" must be an object with \"grantType\"".into());
            return None;
        };
        let (kind, allowed) = match fields.get("grantType").and_then(Value::as_str) {
            Some("authorization_code") => ("authorization_code", CODE_FIELDS),
            Some("client_credentials") => ("client_credentials", CLIENT_FIELDS),
            _ => {
                problems.push("\"oauth\" needs \"grantType\": \"authorization_code\" or \"client_credentials\"".into());
                return None;
            }
        };
        let before = problems.len();
        for key in fields.keys().filter(|k| !allowed.contains(&k.as_str())) {
            problems.push(format!(
                "unknown field \"oauth.{key}\" ({kind} takes {})",
                allowed.join(", ")
            ));
        }
        let scope = string(fields, "scope", problems);
        let client_id = string(fields, "clientId", problems);
        let block = if kind == "authorization_code" {
            let redirect_port = match fields.get("redirectPort") {
                None => 0,
                Some(p) => match p.as_u64().and_then(|p| u16::try_from(p).ok()) {
                    Some(p) => p,
                    None => {
                        problems.push(
                            "\"oauth.redirectPort\" must be a port number (0: any free one)".into(),
                        );
                        0
                    }
                },
            };
            OAuthBlock::AuthorizationCode {
                credential_file: string(fields, "credentialFile", problems),
                redirect_port,
                client_id,
                scope,
            }
        } else {
            let client_secret = string(fields, "clientSecret", problems);
            let (Some(client_id), Some(client_secret)) = (client_id, client_secret) else {
                problems.push("grantType \"client_credentials\" needs \"clientId\" and \"clientSecret\" (write the secret as \"${VAR}\")".into());
                return None;
            };
            OAuthBlock::ClientCredentials {
                client_id,
                client_secret,
                scope,
            }
        };
        (problems.len() == before).then_some(block)
    }

    /// The strings that `${VAR}` may appear in, with where they are and whether they are
    /// secret (for `explain` and resolution).
    pub fn values(&self) -> Vec<(&'static str, &str, bool)> {
        match self {
            OAuthBlock::AuthorizationCode {
                credential_file,
                client_id,
                ..
            } => [
                ("oauth.credentialFile", credential_file.as_deref(), false),
                ("oauth.clientId", client_id.as_deref(), false),
            ]
            .into_iter()
            .filter_map(|(w, v, s)| v.map(|v| (w, v, s)))
            .collect(),
            OAuthBlock::ClientCredentials {
                client_id,
                client_secret,
                ..
            } => vec![
                ("oauth.clientId", client_id.as_str(), false),
                ("oauth.clientSecret", client_secret.as_str(), true),
            ],
        }
    }
}

/// A non-empty string field, or a problem.
fn string(fields: &Map<String, Value>, key: &str, problems: &mut Vec<String>) -> Option<String> {
    match fields.get(key)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => {
            problems.push(format!("\"oauth.{key}\" must be a non-empty string"));
            None
        }
    }
}

/// A value that must not be shown: its `Debug` prints `[secret]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[secret]")
    }
}

/// The block resolved: what the broker and `broker login` work with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthGrant {
    AuthorizationCode {
        /// Where the credential is kept (absolute).
        credential_file: PathBuf,
        redirect_port: u16,
        client_id: Option<String>,
        scopes: Vec<String>,
    },
    ClientCredentials {
        client_id: String,
        client_secret: Secret,
        scopes: Vec<String>,
    },
}

impl OAuthGrant {
    /// `"authorization_code"` or `"client_credentials"`.
    pub fn grant_type(&self) -> &'static str {
        match self {
            OAuthGrant::AuthorizationCode { .. } => "authorization_code",
            OAuthGrant::ClientCredentials { .. } => "client_credentials",
        }
    }
}

/// Resolve `block` of the entry `server` (at `url`, in a registry in `dir`) with `exp`, which
/// expands one value (and records problems and secrets itself). `None` when the credential
/// file's default place cannot be known (a problem is pushed).
pub fn resolve(
    block: &OAuthBlock,
    server: &str,
    url: &str,
    dir: &Path,
    exp: &mut dyn FnMut(&str, &str, bool) -> String,
    problems: &mut Vec<String>,
) -> Option<OAuthGrant> {
    let scopes = |s: &Option<String>| -> Vec<String> {
        s.as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    Some(match block {
        OAuthBlock::AuthorizationCode {
            credential_file,
            redirect_port,
            client_id,
            scope,
        } => {
            let credential_file = match credential_file {
                Some(f) => dir.join(exp(f, "oauth.credentialFile", false)),
                None => match super::store::default_file(server, url) {
                    Some(f) => f,
                    None => {
                        problems.push("no place for the OAuth credential: neither XDG_STATE_HOME nor HOME is set; set one, or give \"oauth.credentialFile\"".into());
                        return None;
                    }
                },
            };
            OAuthGrant::AuthorizationCode {
                credential_file,
                redirect_port: *redirect_port,
                client_id: client_id
                    .as_deref()
                    .map(|c| exp(c, "oauth.clientId", false)),
                scopes: scopes(scope),
            }
        }
        OAuthBlock::ClientCredentials {
            client_id,
            client_secret,
            scope,
        } => OAuthGrant::ClientCredentials {
            client_id: exp(client_id, "oauth.clientId", false),
            client_secret: Secret(exp(client_secret, "oauth.clientSecret", true)),
            scopes: scopes(scope),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> (Option<OAuthBlock>, Vec<String>) {
        let mut problems = Vec::new();
        (OAuthBlock::parse(&v, &mut problems), problems)
    }

    #[test]
    fn both_grants_parse_and_a_wrong_block_says_what_is_wrong() {
        let (b, p) = parse(json!({"grantType": "authorization_code", "redirectPort": 8765}));
        assert!(p.is_empty(), "{p:?}");
        assert!(matches!(
            b,
            Some(OAuthBlock::AuthorizationCode {
                redirect_port: 8765,
                ..
            })
        ));
        let (b, p) = parse(
            json!({"grantType": "client_credentials", "clientId": "c", "clientSecret": "${S}", "scope": "a b"}),
        );
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(b.unwrap().grant_type(), "client_credentials");
        let (_, p) = parse(json!({"grantType": "client_credentials", "clientId": "c"}));
        assert!(p[0].contains("clientSecret"), "{p:?}");
        let (_, p) = parse(json!({"grantType": "password"}));
        assert!(p[0].contains("grantType"), "{p:?}");
        let (_, p) = parse(json!({"grantType": "authorization_code", "clientSecret": "x"}));
        assert!(
            p[0].contains("unknown field \"oauth.clientSecret\""),
            "{p:?}"
        );
        let (_, p) = parse(json!({"grantType": "authorization_code", "redirectPort": 70000}));
        assert!(p[0].contains("redirectPort"), "{p:?}");
    }

    #[test]
    fn a_secret_never_prints() {
        let g = OAuthGrant::ClientCredentials {
            client_id: "c".into(),
            client_secret: Secret("hunter2-secret".into()),
            scopes: vec![],
        };
        assert!(!format!("{g:?}").contains("hunter2"));
    }
}
